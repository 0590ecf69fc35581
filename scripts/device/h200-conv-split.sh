#!/bin/sh
# One call on the H200 machine for the CUDA conv's batch-1 k split (#23
# item 4) and the depthwise strip kernel: a release build, the cuda
# suite; a what-if build whose split sums one partial product too few and
# whose strip kernel steps one input row per output row at stride 2, whose
# cuda_conv and cuda_conv_layer_paths must both fail (the tests can see
# both); then `locus bench conv --net` on cuda:0 at batch 1
# and 32 (h200-conv-net.sh with PARTS, "cuda1 cuda32" unless set; the
# same build).
#
#   run: OUT=$OUT sh scripts/device/h200-conv-split.sh
#
# Summary on stdout; the logs in $OUT/conv-split.log and $OUT/conv-net.log.
# About three minutes.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec 3>&1 >"$out/conv-split.log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
build=/tmp/locus-build
broken=/tmp/locus-broken
tree=/tmp/locus-broken-tree
rm -rf "$tree" "$broken"
mkdir -p "$tree"
tar --exclude='./build*' -cf - . | tar -xf - -C "$tree"
sed -i 's/plan.chunks(), plan.stride/plan.chunks() - 1, plan.stride/' \
    "$tree/backends/cuda/gemm.cu"
grep -c 'plan.chunks() - 1' "$tree/backends/cuda/gemm.cu" >&3
sed -i 's/            h += Stride;/            h += 1;/' "$tree/backends/cuda/conv_layer.cu"
grep -c '            h += 1;' "$tree/backends/cuda/conv_layer.cu" >&3
meson setup "$build" -Dbuildtype=release >/dev/null || exit 1
meson setup "$broken" "$tree" -Dbuildtype=release >/dev/null || exit 1
ninja -C "$broken" backends/cuda/locus-cuda.so tests/gpu/test_cuda_conv \
    tests/gpu/test_cuda_conv_layer_paths \
    >"$out/broken-build.txt" 2>&1 &
broken_pid=$!
timeout 300 ninja -C "$build" >/dev/null ||
    { ninja -C "$build" 2>&1 | tail -30 >&3; exit 1; }
echo "built: $(date +%T)" >&3
timeout 200 meson test -C "$build" --no-rebuild --print-errorlogs --suite cuda
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" >&3
grep -E ' (FAIL|TIMEOUT) ' "$build/meson-logs/testlog.txt" >&3
grep -E 'worst relative error' "$build/meson-logs/testlog.txt" >&3
wait "$broken_pid" && echo "broken build done" >&3
timeout 100 meson test -C "$broken" --no-rebuild cuda_conv \
    cuda_conv_layer_paths >/dev/null
grep -E '^(Ok|Fail):' "$broken/meson-logs/testlog.txt" | sed 's/^/broken /' >&3
grep -E ' (OK|FAIL) ' "$broken/meson-logs/testlog.txt" | sed 's/^/broken /' >&3
grep -m3 -E '^FAIL' "$broken/meson-logs/testlog.txt" | cut -c1-200 >&3
PARTS=${PARTS:-cuda1 cuda32} sh "$(dirname "$0")/h200-conv-net.sh"
echo "done $(date +%T)" >&3
