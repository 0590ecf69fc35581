#!/bin/sh
# One call on the H200 machine for conv2d_layer (issue #23 item 2): builds
# the CUDA and OpenCL modules and runs tests/gpu/test_device_conv_layer.c
# as built for each backend. The OpenCL test checks every OpenCL device in
# one run (PoCL's CPU device and NVIDIA's H200), f32 and f64, auto and
# im2col, the depthwise, direct and grouped-im2col kernels; the CUDA one
# cuda:0 (and any other cuda device). Then the OpenCL one again with
# LOCUS_OPENCL_TUNING=gpu (PoCL on the GPU variant of gemm.cl, as NVIDIA
# runs it). Output in $OUT/conv-layer.log; the last line is the status.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec >"$out/conv-layer.log" 2>&1
# shellcheck disable=SC1091
. scripts/device/gpu-env.sh
export PATH="/usr/local/cuda/bin:$PATH"
build=/tmp/locus-conv-layer-build
meson setup "$build" -Dbuildtype=debugoptimized || exit 1
ninja -C "$build" tests/gpu/test_opencl_conv_layer \
    tests/gpu/test_cuda_conv_layer backends/cuda/locus-cuda.so \
    backends/opencl/locus-opencl.so || exit 1
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
export LOCUS_OPENCL_CACHE_DIR=/tmp/locus-conv-layer-cache
nvidia-smi -L
status=0
for run in opencl cuda; do
    echo "== test_${run}_conv_layer"
    "$build/tests/gpu/test_${run}_conv_layer" || { echo "FAILED: $run"; status=1; }
done
echo "== test_opencl_conv_layer, LOCUS_OPENCL_TUNING=gpu"
LOCUS_OPENCL_TUNING=gpu "$build/tests/gpu/test_opencl_conv_layer" ||
    { echo "FAILED: opencl gpu tuning"; status=1; }
echo "status $status"
exit $status
