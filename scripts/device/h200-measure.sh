#!/bin/sh
# One call on the H200 machine: build Locus there, run every suite it can
# (cuda and both OpenCL platforms included), and take the figures that
# docs/PERFORMANCE.md and docs/NUMA.md report. OpenBLAS and oneDNN are not
# on that image: Debian 12's packages travel in .devdeps/ (apt-get download
# libopenblas0-pthread libopenblas-pthread-dev libopenblas0 libopenblas-dev
# libdnnl2 libdnnl-dev libgfortran5 libquadmath0 libclblast1) and are
# unpacked under /opt/deps, never over /; LD_LIBRARY_PATH below is how
# `locus bench` finds libclblast.so.1, which it loads with dlopen (its
# other needs, libOpenCL.so.1 and libstdc++, are on the image). Results go
# to $OUT (at most 8 files).
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps
log="$out/run.log"
exec 3>&1 >"$log" 2>&1
for deb in .devdeps/*.deb; do dpkg -x "$deb" /opt/deps; done
deps=/opt/deps/usr
export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu:$deps/lib/x86_64-linux-gnu/openblas-pthread"
export LIBRARY_PATH="$LD_LIBRARY_PATH"
export C_INCLUDE_PATH="$deps/include:$deps/include/x86_64-linux-gnu/openblas-pthread"
mkdir -p /opt/deps/pc
sed "s|/usr/|$deps/|g" "$deps/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig/openblas.pc" >/opt/deps/pc/openblas.pc
export PKG_CONFIG_PATH=/opt/deps/pc
. "$(dirname "$0")/gpu-env.sh"

nproc; lscpu | head -20; nvidia-smi -L
build=/tmp/locus-build
meson setup "$build" -Dbuildtype=release || exit 1
ninja -C "$build" || exit 1
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"

# In order of what matters most, each written out as soon as it exists: a
# call cut short by its time limit still returns what came before.
"$locus" info --json >"$out/info.json"
"$locus" info
"$locus" numa --json >"$out/numa.json"
"$locus" numa
meson test -C "$build" --no-rebuild --print-errorlogs \
    --suite unit --suite cpu --suite opencl --suite cuda --suite numa --suite cli
cp "$build/meson-logs/testlog.json" "$out/testlog.json"
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" >&3
timeout 60 "$locus" bench gemm --device cpu --size 1024,2048,4096 --json >"$out/bench-gemm.json"
timeout 40 "$locus" bench reduce --device cpu --size 268435456 --json >"$out/bench-reduce.json"
timeout 60 "$locus" bench conv --device cpu --json >"$out/bench-conv.json"
echo "cpu benches done" >&3
# The cuda suite's own output (measured error of each math mode).
for t in cuda_reduce cuda_gemm cuda_conv cuda_coherence; do
    "$build/tests/gpu/test_$t" 2>&1 | tail -40
done

# CUDA benchmarks (issue 4), each beside its vendor reference (CUB,
# cuBLAS, cuDNN, a raw launch). Tables and one stderr line per result go
# to run.log as they come; the JSON documents go, each after a "# command"
# line, into bench-cuda.json (the 8th and last file $OUT may hold).
# Each command is capped at 30 s.
cj="$out/bench-cuda.json"
bench_limit=30
: >"$cj"
cuda_bench() {
    echo "# locus bench $*" >>"$cj"
    echo "=== locus bench $*"
    timeout "$bench_limit" "$locus" bench "$@" --json >>"$cj"
    echo "exit $?"
}
conv32="--size 32,64,56,56,64,3,3,1,1 --size 32,64,56,56,256,1,1,1,0 --size 32,3,224,224,64,7,7,2,3 --size 32,256,14,14,256,3,3,1,1"
cuda_bench reduce --device cuda:0 --size 1048576,16777216,268435456,1073741824
cuda_bench reduce --device cuda:0 --size 1024 --repeat 200
echo "cuda reduce done" >&3
cuda_bench gemm --device cuda:0 --size 1024,4096,8192 --math fp32
cuda_bench gemm --device cuda:0 --size 1024,4096,8192 --math tf32
cuda_bench gemm --device cuda:0 --size 1024,4096,8192 --math 3xtf32
cuda_bench conv --device cuda:0 $conv32
cuda_bench conv --device cuda:0 $conv32 --algo implicit
echo "cuda benches done" >&3

# OpenCL benchmarks (issue 5) on NVIDIA's OpenCL (opencl:1 here; opencl:0 is
# PoCL), each beside Locus's own cuda:0 kernels ("locus cuda:0"), and gemm
# also beside CLBlast's SGEMM on the same device ("clblast sgemm"), into the
# same file. The opencl op tests run on NVIDIA too. Capped at 30 s each, the
# gemm at 60 s: CLBlast compiles its kernels in the warm-up.
LOCUS_TEST_OPENCL=opencl:1 meson test -C "$build" --no-rebuild \
    --print-errorlogs --suite opencl | tail -12
cuda_bench reduce --device opencl:1 --size 16777216,268435456
bench_limit=60
cuda_bench gemm --device opencl:1 --size 1024,2048,4096
bench_limit=30
cuda_bench conv --device opencl:1 --size 32,64,56,56,64,3,3,1,1 --size 32,256,14,14,256,3,3,1,1
echo "done" >&3
