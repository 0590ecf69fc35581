#!/bin/sh
# One call on the H200 machine for the half-precision GEMM and conv2d on
# CUDA (#22 item 2): build, the cuda suite (test_cuda_half among it), then
# bf16 and f16 GEMM at 4096 and 8192 in the four layouts (nt, nn, tn, tt)
# on cuda:0 beside cublasGemmEx (bf16 or f16 in, f32 out,
# CUBLAS_COMPUTE_32F) in the same process
# (half_gemm_bench.cu, which calls the backend's kernels directly and
# checks each result against cuBLAS's). Results in $OUT/half.log, the
# bench's JSON lines in $OUT/half-bench.jsonl, the suite's log in
# $OUT/testlog-cuda.txt. Well under 6 minutes: the build is most of it.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec 3>&1 >"$out/half.log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
build=/tmp/locus-build
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >&3
meson setup "$build" -Dbuildtype=release >/dev/null || exit 1
ninja -C "$build" >/dev/null || { ninja -C "$build" | tail -30 >&3; exit 1; }
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
# test_cuda_half first, on its own and bounded (a kernel that hangs must
# not eat the call): the kernels the records named, the worst errors.
echo "=== test_cuda_half" >&3
timeout 90 "$build/tests/gpu/test_cuda_half" >"$out/test_cuda_half.txt" 2>&1
half_rc=$?
echo "test_cuda_half exit $half_rc" >&3
tail -40 "$out/test_cuda_half.txt" >&3
# The whole cuda suite (the f32 and f64 tests too), unless the half test
# hung, then without it.
if [ "$half_rc" -eq 124 ]; then
    meson test -C "$build" --no-rebuild --print-errorlogs cuda_probe \
        cuda_reduce cuda_gemm cuda_conv cuda_coherence
else
    meson test -C "$build" --no-rebuild --print-errorlogs --suite cuda
fi
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" |
    sed 's/^/cuda suite /' >&3
grep -E ' (FAIL|TIMEOUT|SKIP) ' "$build/meson-logs/testlog.txt" >&3
cp "$build/meson-logs/testlog.txt" "$out/testlog-cuda.txt"

echo "=== half gemm bench (locus kernels beside cublasGemmEx)" >&3
nvcc=/usr/local/cuda/bin/nvcc
bench=/tmp/half-bench
mkdir -p "$bench"
flags="-O3 -I$root/include -I$root/backends/cuda"
$nvcc $flags -gencode arch=compute_90a,code=sm_90a \
    -c "$root/backends/cuda/gemm_half_wgmma.cu" -o "$bench/wgmma.o" &&
    $nvcc $flags -gencode arch=compute_90,code=sm_90 \
        -c "$root/backends/cuda/gemm_half_mma.cu" -o "$bench/mma.o" &&
    $nvcc $flags -DLOCUS_CUDA_WGMMA=1 -gencode arch=compute_90,code=sm_90 \
        "$root/scripts/device/half_gemm_bench.cu" "$bench/wgmma.o" \
        "$bench/mma.o" -lcublas -o "$bench/half_gemm_bench" ||
    { echo "bench build failed" >&3; exit 1; }
# Odd shapes through every kernel against cuBLAS (the mma.sync fallback
# too, which the API does not reach on this GPU), then the figures.
timeout 60 "$bench/half_gemm_bench" check >"$out/half-check.jsonl"
echo "check exit $?" >&3
cat "$out/half-check.jsonl" >&3
timeout 150 "$bench/half_gemm_bench" 4096 8192 >"$out/half-bench.jsonl"
echo "bench exit $?" >&3
cat "$out/half-bench.jsonl" >&3
echo done >&3
