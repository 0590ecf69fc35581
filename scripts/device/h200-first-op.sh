#!/bin/sh
# The first op of a fresh process on the H200 machine (issue #20 item 6,
# docs/PERFORMANCE.md "First op of a fresh process"): builds in
# /tmp/locus-build, runs the calibration unit tests, then `locus bench
# first-op` with the CUDA and OpenCL modules loaded. Results go to $OUT:
# run.log, info.txt, first-op.txt, first-op.json.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec 3>&1 >"$out/run.log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
build=/tmp/locus-build
[ -f "$build/build.ninja" ] || meson setup "$build" -Dbuildtype=release || exit 1
ninja -C "$build" || exit 1
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
nproc; nvidia-smi -L
meson test -C "$build" --no-rebuild --print-errorlogs unit-first_op \
    unit-calibration unit-hostile_files | tail -12
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" >&3
"$locus" info >"$out/info.txt" 2>&1
ops=reduce:1000,reduce:1M,reduce:64M,gemm:256,gemm:1024,gemm:4096,conv:56
"$locus" bench first-op --repeat 3 --op "$ops" --json >"$out/first-op.json"
"$locus" bench first-op --repeat 3 --op "$ops" >"$out/first-op.txt"
cat "$out/first-op.txt" >&3
