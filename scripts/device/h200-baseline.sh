#!/bin/sh
# One call on the H200 machine for the figures of a session's start: one
# release build (oneDNN from the carried .devdeps), then the bench
# references (h200-bench-refs.sh with CUDA: the one bandwidth truth, CPU
# gemm f32/f64 beside MKL and OpenBLAS 0.3.34, torch.mm, cuda:0 per
# dtype), the CPU's `bench conv --net` at batch 1 and 8, and as many
# `bench sched` runs as the time left allows (RUN_SECONDS, default 540).
#
#   run (carry build-dev, .devdeps, build-refs/references.tar.xz): tar the
#   tree into build-dev/head.tar.gz, then sh scripts/device/h200-baseline.sh
#
# $OUT/baseline.log is the summary; each part's output beside it.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps
start=$(date +%s)
left() { echo $((${RUN_SECONDS:-540} - ($(date +%s) - start))); }
exec 3>&1 >"$out/baseline.log" 2>&1
root=$(pwd)
. "$(dirname "$0")/devdeps-env.sh"
. "$root/scripts/device/gpu-env.sh"
export PATH=/usr/local/cuda/bin:$PATH
build=/tmp/locus-build
meson setup "$build" -Dbuildtype=release >/dev/null || { echo "setup failed" >&3; exit 1; }
timeout 240 ninja -C "$build" >/dev/null ||
    { ninja -C "$build" 2>&1 | grep -E "error|FAILED" | head -20 >&3; exit 1; }
echo "built after $(( $(date +%s) - start )) s" >&3
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
export LOCUS_OPENCL_CACHE_DIR=/tmp/locus-cl-cache XDG_CACHE_HOME=/tmp/locus-cache
locus="$build/tools/locus"

CUDA=1 SESSION_BUILD="$build" timeout 200 sh "$root/scripts/device/h200-bench-refs.sh" \
    >"$out/bench-refs.log" 2>&1
echo "=== bench refs exit $? after $(( $(date +%s) - start )) s" >&3
grep -E "^(gemm|reduce|reference|numa|torch)|GB/s|Model name" "$out/bench-refs.log" | head -90 >&3

for net in resnet50 mobilenetv2; do
    for batch in 1 8; do
        name="conv-net-$net-cpu-b$batch"
        timeout 40 "$locus" bench conv --net $net --batch $batch --device cpu \
            --repeat 5 >"$out/$name.txt" 2>&1
        echo "=== $name exit $?" >&3
        grep -iE "whole|ratio \(|not offered|FAIL" "$out/$name.txt" | head -4 >&3
    done
done

"$locus" calibrate --json >"$out/calibrate.json" 2>"$out/calibrate.err"
echo "=== calibrated after $(( $(date +%s) - start )) s" >&3
run=1
while [ "$(left)" -gt 60 ]; do
    timeout "$(( $(left) - 10 ))" "$locus" bench sched --json >"$out/sched-$run.json" 2>"$out/sched-$run.err"
    echo "=== sched run $run exit $? after $(( $(date +%s) - start )) s" >&3
    python3 - "$out/sched-$run.json" <<'PY' >&3 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    if r["regret"] > 1.25:
        print(f'  {r["op"]:7} {r["shape"]:26} {r["start"]:9} {r["device"]:9} '
              f'{r["seconds"]*1e3:9.3f} ms  best {r["reference"]["name"]:9} '
              f'{r["reference"]["seconds"]*1e3:9.3f} ms  regret {r["regret"]:.2f}')
print("summary", d["summary"])
PY
    run=$((run + 1))
done
echo "done after $(( $(date +%s) - start )) s" >&3
