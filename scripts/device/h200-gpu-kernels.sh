#!/bin/sh
# One call on the H200 machine for the GPU kernels (issues 4 and 5): build,
# the cuda suite, the opencl suite on PoCL and on NVIDIA's OpenCL, then
# every CUDA benchmark beside its vendor reference (CUB, cuBLAS in each
# math mode, cuDNN at batch 32, a raw launch for the per-op overhead) and
# the NVIDIA OpenCL benchmarks beside CLBlast and the CUDA kernels. With
# `profile` as the first argument, also Nsight Compute's summary of one
# fp32 and one tf32 GEMM kernel at 4096^3. Carry .devdeps (libclblast1, see
# h200-measure.sh) for the CLBlast reference. Results go to $OUT/gpu.log.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps
exec 3>&1 >"$out/gpu.log" 2>&1
for deb in .devdeps/*.deb; do [ -f "$deb" ] && dpkg -x "$deb" /opt/deps; done
deps=/opt/deps/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$deps:$deps/openblas-pthread"
. "$(dirname "$0")/gpu-env.sh"
build=/tmp/locus-build
meson setup "$build" -Dbuildtype=release >/dev/null || exit 1
ninja -C "$build" >/dev/null || { ninja -C "$build" | tail -30 >&3; exit 1; }
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"

summary() { grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" | sed "s/^/$1 /" >&3; }
meson test -C "$build" --no-rebuild --print-errorlogs --suite cuda --suite opencl
summary "cuda+opencl(PoCL)"
LOCUS_TEST_OPENCL=opencl:1 meson test -C "$build" --no-rebuild --print-errorlogs --suite opencl
summary "opencl(NVIDIA)"
for t in gemm conv; do "$build/tests/gpu/test_cuda_$t" 2>&1 | tail -4 >&3; done

bench() {
    echo "=== locus bench $*" >&3
    timeout 90 "$locus" bench "$@" 2>&1 | grep -E "^(reduce|gemm|conv2d) " >&3
}
conv32="--size 32,64,56,56,64,3,3,1,1 --size 32,64,56,56,256,1,1,1,0 --size 32,3,224,224,64,7,7,2,3 --size 32,256,14,14,256,3,3,1,1"
bench reduce --device cuda:0 --size 1048576,16777216,268435456,1073741824
for run in 1 2 3; do bench reduce --device cuda:0 --size 1024 --repeat 200; done
for math in fp32 tf32 3xtf32; do
    bench gemm --device cuda:0 --size 1024,2048,4096,8192 --math "$math"
done
for algo in auto im2col implicit winograd; do bench conv --device cuda:0 $conv32 --algo "$algo"; done
bench reduce --device opencl:1 --size 1048576,16777216,268435456
bench gemm --device opencl:1 --size 1024,4096,8192
bench conv --device opencl:1 $conv32
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
