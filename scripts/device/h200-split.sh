#!/bin/sh
# The multi-device gemm split (locus_gemm_split, `locus bench split`) on an
# H200 machine, best on nvidia-h200-x2: two GPUs, a GPU with the CPU, and
# CUDA with NVIDIA's OpenCL on one GPU, each against every single device,
# data starting on the host. Output: $OUT/split.log.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /tmp/icd
exec 3>&1 >"$out/split.log" 2>&1
cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null
echo libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd XDG_CACHE_HOME=/tmp/locus-cache
build=/tmp/locus-split-build
[ -f "$build/build.ninja" ] || meson setup "$build" -Dbuildtype=release || exit 1
ninja -C "$build" tools/locus backends/cuda/locus-cuda.so \
    backends/opencl/locus-opencl.so || exit 1
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
locus="$build/tools/locus"
nvidia-smi -L
"$locus" calibrate >&3
for devices in cuda:0,cuda:1 cuda:0,cpu cuda:0,opencl:1; do
    "$locus" info --json | grep -q "\"selector\": \"${devices#*,}\"" ||
        continue
    echo "=== $devices" >&3
    timeout 200 "$locus" bench split --size 2048,4096,8192 \
        --devices "$devices" >&3
done
