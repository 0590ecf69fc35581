#!/bin/sh
# Installs the Debian/Ubuntu packages Locus builds and tests with. The CUDA
# toolkit is not among them: where /usr/local/cuda/bin/nvcc exists, the CUDA
# module is built as well. qemu-system-x86 and busybox-static are for the
# numa suite's two-node virtual machine (tests/numa/vm), whose kernel is not
# installed here: the test fetches linux-image-amd64 with `apt-get download`
# into the build directory. clang (with libFuzzer in libclang-rt-dev) and
# valgrind are for CI's fuzz and valgrind stages (docs/RELIABILITY.md).
# openmpi-bin and libopenmpi-dev build the MPI examples and run the mpi
# suite (docs/MPI.md).
set -eu
packages="build-essential meson ninja-build pkg-config python3
  libhwloc-dev hwloc libnuma-dev numactl
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  clang-format qemu-system-x86 busybox-static libopenblas-dev libdnnl-dev
  clang libclang-rt-dev valgrind openmpi-bin libopenmpi-dev"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
echo "installing:$missing" >&2
$sudo apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
