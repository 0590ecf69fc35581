#!/bin/sh
# One short call on the H200 machine for work on the CUDA GEMM kernels:
# build, run the cuda suite's gemm and conv tests (every math mode against
# float64), then `locus bench gemm` in each mode beside cuBLAS and
# `locus bench conv` (batch 32) beside cuDNN, and, with
# `profile` as the first argument, Nsight Compute's summary of one fp32
# and one tf32 kernel at 4096^3. Needs no .devdeps (cuBLAS is on the image).
# Results go to $OUT.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
log="$out/gemm.log"
exec 3>&1 >"$log" 2>&1
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn; do
    [ -f "$d/include/cudnn.h" ] && export LOCUS_CUDNN_ROOT="$d"
done
build=/tmp/locus-build
meson setup "$build" -Dbuildtype=release || exit 1
ninja -C "$build" || exit 1
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
meson test -C "$build" --no-rebuild --print-errorlogs cuda_gemm cuda_conv cuda_coherence
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" >&3
"$build/tests/gpu/test_cuda_gemm" 2>&1 | tail -4 >&3
for math in fp32 tf32 3xtf32; do
    echo "=== gemm $math" >&3
    timeout 60 "$locus" bench gemm --device cuda:0 --size 1024,2048,4096,8192 \
        --math "$math" 2>&1 | grep -E "^gemm|^op|^---" >&3
done
conv32="--size 32,64,56,56,64,3,3,1,1 --size 32,64,56,56,256,1,1,1,0 --size 32,3,224,224,64,7,7,2,3 --size 32,256,14,14,256,3,3,1,1"
for algo in im2col implicit; do
    echo "=== conv $algo" >&3
    timeout 60 "$locus" bench conv --device cuda:0 $conv32 --algo "$algo" \
        2>&1 | grep -E "^conv|^op|^---" >&3
done
if [ "${1:-}" = profile ] && command -v ncu >/dev/null; then
    for math in fp32 tf32; do
        timeout 120 ncu --launch-skip 3 --launch-count 1 \
            --section SpeedOfLight --section WarpStateStats \
            --section LaunchStats --section Occupancy \
            "$locus" bench gemm --device cuda:0 --size 4096 --math "$math" \
            --repeat 3 >"$out/ncu-$math.txt" 2>&1
    done
fi
echo done >&3
