#!/bin/sh
# One call on the H200 machine for a whole session's GPU work, when the
# device time allows one call only: one release build (oneDNN from the
# carried .devdeps, as h200-conv-net.sh unpacks it), the cuda suite and
# the conv2d_layer tests on CUDA and on every OpenCL device (PoCL and
# NVIDIA's), `bench conv --net` on cuda:0 (batch 1, 32) and the cpu
# (batch 1), then the optional scripts of the session where present
# (h200-python.sh, h200-pipeline.sh), each under its own limit.
#
#   run (carry build-dev, .devdeps, build-pywheels): tar the tree into
#   build-dev, then
#   sh scripts/device/h200-session.sh
#
# $OUT/session.log is the summary; each part's files beside it.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps
exec 3>&1 >"$out/session.log" 2>&1
root=$(pwd)
. "$(dirname "$0")/devdeps-env.sh"
. "$root/scripts/device/gpu-env.sh"
export PATH=/usr/local/cuda/bin:$PATH
build=/tmp/locus-build
meson setup "$build" -Dbuildtype=release >/dev/null || { echo "setup failed" >&3; exit 1; }
grep -E "dnnl|cudnn" "$build/meson-logs/meson-log.txt" | grep -iE "found" | head -4 >&3
timeout 200 ninja -C "$build" >/dev/null ||
    { ninja -C "$build" 2>&1 | grep -E "error|FAILED" | head -20 >&3; exit 1; }
echo "built $(date +%T)" >&3
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
export LOCUS_OPENCL_CACHE_DIR=/tmp/locus-cl-cache
locus="$build/tools/locus"

echo "=== conv2d_layer tests" >&3
for t in test_cuda_conv_layer test_opencl_conv_layer; do
    [ -x "$build/tests/gpu/$t" ] || { echo "$t not built" >&3; continue; }
    timeout 60 "$build/tests/gpu/$t" >"$out/$t.txt" 2>&1
    echo "$t exit $?" >&3
    grep -E "FAIL|skip|record|ran" "$out/$t.txt" | head -12 >&3
done
echo "=== cuda suite" >&3
timeout 150 meson test -C "$build" --no-rebuild --print-errorlogs --suite cuda \
    >"$out/cuda-suite.txt" 2>&1
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" >&3
grep -E ' (FAIL|TIMEOUT) ' "$build/meson-logs/testlog.txt" >&3
cp "$build/meson-logs/testlog.txt" "$out/testlog-cuda.txt"

net_bench() { # device batch net limit
    name="conv-net-$3-$(echo "$1" | tr ':' '-')-b$2"
    timeout "$4" "$locus" bench conv --net "$3" --batch "$2" --device "$1" \
        --repeat 5 >"$out/$name.txt" 2>&1
    echo "=== $3 batch $2 on $1: exit $?" >&3
    grep -iE "whole|network|not offered|FAIL" "$out/$name.txt" | head -6 >&3
}
for net in resnet50 mobilenetv2; do
    net_bench cuda:0 1 $net 30
    net_bench cuda:0 32 $net 45
    net_bench cpu 1 $net 30
done
for part in h200-python.sh h200-pipeline.sh; do
    [ -f "$root/scripts/device/$part" ] || continue
    mkdir -p "$out/${part%.sh}"
    SESSION_BUILD="$build" OUT="$out/${part%.sh}" timeout 100 sh "$root/scripts/device/$part" \
        >"$out/${part%.sh}/stdout.txt" 2>&1
    echo "=== $part exit $?" >&3
    tail -q -n 15 "$out/${part%.sh}"/*.log "$out/${part%.sh}/stdout.txt" >&3
done
echo "done $(date +%T)" >&3
