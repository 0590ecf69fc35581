#!/bin/sh
# The queue's overlapped uploads and write-backs (#25 item 2) on an H200
# machine: the unit test of the queue's prefetch order (fake module), the
# CUDA tests of write-backs, copies and queued gemms, then `locus bench
# pipeline` on cuda:0: 8 gemms from the host through one queue, overlap on
# and off in the same run, at 2048 and 4096 (inputs pinned at their first
# copy) and 768 (2.25 MiB inputs, below the pinning threshold: the staged
# path through the two alternating pinned chunks). Target: ratio >= 1.3
# at 4096. Reuses SESSION_BUILD when set (a build of this tree), else
# builds what it needs in /tmp/locus-pipeline-build. Under 3 minutes.
#
#   run: sh scripts/device/h200-pipeline.sh
#
# $OUT/pipeline.log is the summary; pipeline.json and pipeline.txt the
# bench's output, unit.log the test's.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
start=$(date +%s)
exec 3>&1 >"$out/pipeline.log" 2>&1
root=$(pwd)
. "$root/scripts/device/gpu-env.sh"
export PATH=/usr/local/cuda/bin:$PATH XDG_CACHE_HOME=/tmp/locus-cache
echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null)" >&3
build=${SESSION_BUILD:-/tmp/locus-pipeline-build}
[ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dbuildtype=release >/dev/null ||
    { echo "setup failed" >&3; exit 1; }
# Only these targets (a no-op where SESSION_BUILD has them already).
targets="tools/locus backends/cuda/locus-cuda.so tests/unit/test_queue_overlap
    tests/unit/modules/fake_prefetch/locus-cuda.so
    tests/gpu/test_cuda_queue_writeback tests/gpu/test_cuda_coherence
    tests/gpu/test_cuda_gemm"
timeout 150 ninja -C "$build" $targets >/dev/null ||
    { ninja -C "$build" $targets 2>&1 | grep -E "error|FAILED" | head -20 >&3
      exit 1; }
echo "built after $(( $(date +%s) - start )) s" >&3
nvidia-smi -L >&3

timeout 30 "$build/tests/unit/test_queue_overlap" \
    "$build/tests/unit/modules/fake_prefetch" >"$out/unit.log" 2>&1
echo "=== unit-queue_overlap exit $? (0: passed)" >&3
grep FAIL "$out/unit.log" | head -10 >&3

export LOCUS_PLUGIN_PATH="$build/backends/cuda"
# The write-backs on the GPU, and the tests of copies and queued gemms.
for t in test_cuda_queue_writeback test_cuda_coherence test_cuda_gemm; do
    timeout 120 "$build/tests/gpu/$t" >"$out/$t.log" 2>&1
    echo "=== $t exit $? (0: passed)" >&3
    grep -iE "fail|off by|differs" "$out/$t.log" | head -10 >&3
done
locus="$build/tools/locus"
timeout 60 "$locus" bench pipeline --device cuda:0 --size 768,2048,4096 \
    --count 8 --repeat 3 --json >"$out/pipeline.json" 2>"$out/pipeline.err"
echo "=== bench pipeline --json exit $? after $(( $(date +%s) - start )) s" >&3
python3 - "$out/pipeline.json" <<'PY' >&3 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    if not r["ran"]:
        print(f'{r["size"]:5} failed: {r["error"]}')
        continue
    print(f'{r["size"]:5} overlap {r["overlap_seconds"]*1e3:8.2f} ms '
          f'serial {r["serial_seconds"]*1e3:8.2f} ms ratio {r["ratio"]:.3f} '
          f'(medians {r["serial_median_seconds"]/r["overlap_median_seconds"]:.3f}) '
          f'err {r["max_rel_err"]:.1e} passed {r["passed"]} '
          f'same {r["same_results"]}')
PY
cat "$out/pipeline.err" | head -5 >&3
# The table once more, for people.
timeout 40 "$locus" bench pipeline --device cuda:0 --size 4096 --count 8 \
    --repeat 2 >"$out/pipeline.txt" 2>&1
echo "=== bench pipeline (table) exit $?" >&3
cat "$out/pipeline.txt" >&3
echo "done after $(( $(date +%s) - start )) s" >&3
