#!/bin/sh
# The scheduler's figures on the H200 machine (issue 7, docs/SCHEDULER.md):
# each device's calibration, the regret of the automatic choice over a size
# sweep, the multi-device gemm split against each single device, and the
# MPI examples under mpirun. Builds in /tmp/locus-build unless
# h200-measure.sh already did in this machine's life. Results go to $OUT:
# run.log, calibrate.json, sched.json, split.json. `sched-only` as the
# first argument stops after the regret benchmark.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec 3>&1 >"$out/run.log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
# The tool links the bench's references (OpenBLAS, oneDNN): h200-measure.sh
# unpacked them under /opt/deps; unpack them here when it did not run.
if [ ! -d /opt/deps/usr ]; then
    mkdir -p /opt/deps
    for deb in .devdeps/*.deb; do dpkg -x "$deb" /opt/deps; done
fi
deps=/opt/deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$deps:$deps/openblas-pthread"
build=/tmp/locus-build
[ -f "$build/build.ninja" ] || meson setup "$build" -Dbuildtype=release || exit 1
ninja -C "$build" || exit 1
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
export XDG_CACHE_HOME=/tmp/locus-cache
nproc; nvidia-smi -L

meson test -C "$build" --no-rebuild --print-errorlogs --suite unit \
    --suite cuda --suite concurrency | tail -30
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" >&3

"$locus" calibrate --json >"$out/calibrate.json"
"$locus" calibrate --cached
echo "calibrated" >&3
timeout 420 "$locus" bench sched --json >"$out/sched.json"
echo "sched exit $?" >&3
python3 - "$out/sched.json" <<'PY' >&3
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print(f'{r["op"]:7} {r["shape"]:26} {r["start"]:9} {r["device"]:9} '
          f'{r["seconds"]*1e3:9.3f} ms  best {r["reference"]["name"]:9} '
          f'{r["reference"]["seconds"]*1e3:9.3f} ms  regret {r["regret"]:.2f}'
          f'  elsewhere {r["auto_runs_elsewhere"]}')
print("summary", d["summary"])
PY

LOCUS_LOG=info timeout 60 "$locus" bench sched --op gemm --size 64 --size 2048 \
    --repeat 1 2>&1 | grep "auto:" | head -4 >&3

[ "${1:-}" = sched-only ] && exit 0
# The split (locus_gemm_split) against each single device, data on the host.
timeout 240 "$locus" bench split --size 2048,4096,8192 --devices cuda:0,cpu \
    --json >"$out/split.json"
echo "split exit $?" >&3
timeout 120 "$locus" bench split --size 4096,8192 --devices cuda:0,opencl:1 >&3 2>&1
python3 - "$out/split.json" <<'PY' >&3
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print(r.get("shape"), r.get("device"), r.get("rows"), "split",
          r.get("seconds"), "best single", r.get("best_single"),
          "ratio", r.get("ratio"))
PY
echo done >&3
