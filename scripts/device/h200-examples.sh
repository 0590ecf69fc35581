#!/bin/sh
# One call on the H200 machine: the examples (examples/, docs/BUILDING.md)
# on a GPU, built in the build tree with the CUDA and OpenCL modules and
# run with the arguments of their top comments and with their defaults,
# LOCUS_DEVICE unset (the default device, the cost model's choice), then
# under LOCUS_DEVICE=cuda:0. queue.c must find a GPU there and overlap it
# with the CPU. Output in $OUT/examples.log.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec >"$out/examples.log" 2>&1
# shellcheck disable=SC1091
. scripts/device/gpu-env.sh
export PATH="/usr/local/cuda/bin:$PATH"
build=/tmp/locus-examples-build
meson setup "$build" -Dbuildtype=release -Dtests=false || exit 1
ninja -C "$build" examples/example_gemm examples/example_conv \
    examples/example_wrap examples/example_queue \
    backends/cuda/locus-cuda.so backends/opencl/locus-opencl.so || exit 1
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
export XDG_CACHE_HOME=/tmp/locus-examples-cache
nvidia-smi -L
status=0
for device in "" cuda:0; do
    for run in "gemm 300 200 100" "gemm" "conv 2 16 20 32" "conv" \
        "wrap 100003" "wrap" "queue 256 100003" "queue 4096 268435456"; do
        # shellcheck disable=SC2086 # the words of one run
        set -- $run
        name=$1
        shift
        echo "== LOCUS_DEVICE=$device ./$name $*"
        LOCUS_DEVICE=$device "$build/examples/example_$name" "$@" ||
            { echo "FAILED: $name $*"; status=1; }
    done
done
echo "status $status"
exit $status
