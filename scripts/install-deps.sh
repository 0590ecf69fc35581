#!/bin/sh
# Installs the Debian/Ubuntu packages Locus needs.
# usage: install-deps.sh [build|test|all]   (default all: what CI needs)
#
# build: what building, installing and running Locus needs, and nothing
#   else (./install.sh): the compiler and meson, hwloc and libnuma, the
#   OpenCL loader and headers with PoCL (an OpenCL device on the CPU),
#   OpenBLAS and oneDNN (the references `locus bench` compares against),
#   and libudev-dev, without which `pkg-config --static --libs locus`
#   cannot link: Debian 12's hwloc.pc lists -ludev in Libs.private.
# test: build, plus what the test suites need (./test.sh): clang-format
#   (the format check), qemu-system-x86 and busybox-static for the numa
#   suite's two-node virtual machine (tests/numa/vm, whose kernel the test
#   fetches with `apt-get download` into the build directory), Open MPI for
#   the MPI examples and the mpi suite (docs/MPI.md), numactl, hwloc and
#   clinfo to look at the machine, and clang with libFuzzer
#   (libclang-rt-dev) and valgrind for CI's fuzz and valgrind stages
#   (docs/RELIABILITY.md), librsvg2-bin, whose rsvg-convert draws the
#   cli-svg-*-render tests' pictures to PNG (docs/PICTURES.md), and cmake
#   and groff-base for the install-cmake and man-pages tests
#   (docs/BUILDING.md), python3-numpy and python3-pytest, so that
#   ./test.sh runs the python suite on Debian's Python, and python3-venv,
#   in whose venv .ci/run installs numpy, pytest and meson-python from
#   PyPI (docs/PYTHON.md; the two pip-install tests need meson-python,
#   and skip without it outside CI).
# The CUDA toolkit is never installed: where /usr/local/cuda/bin/nvcc
# exists, the CUDA module is built as well.
set -eu
build_packages="build-essential meson ninja-build pkg-config python3
  libhwloc-dev libnuma-dev libudev-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
  libopenblas-dev libdnnl-dev gfortran"
test_packages="clang-format qemu-system-x86 busybox-static
  openmpi-bin libopenmpi-dev numactl hwloc clinfo
  clang libclang-rt-dev valgrind librsvg2-bin cmake groff-base
  python3-venv python3-numpy python3-pytest"
case "${1:-all}" in
build) packages=$build_packages ;;
test | all) packages="$build_packages $test_packages" ;;
*)
    echo "install-deps.sh: unknown set '$1' (build, test or all)" >&2
    exit 2
    ;;
esac
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
