# Sourced by the H200 scripts: the environment every GPU run there needs.
# NVIDIA's OpenCL library has no ICD file on that machine
# (shared/DESIGN.md), so one is written beside the system's; cuDNN's
# headers come from PyTorch's wheel where the system has none.
mkdir -p /tmp/icd
cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null
echo libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn; do
    [ -f "$d/include/cudnn.h" ] && export LOCUS_CUDNN_ROOT="$d"
done
