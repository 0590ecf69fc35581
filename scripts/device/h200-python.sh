#!/bin/sh
# One call on the H200 machine (no network): the Python package
# (docs/PYTHON.md) built and installed with pip into a fresh venv over
# PyTorch's (numpy and torch with CUDA), then the python suite's pytest
# files run from the installed package on every device, cuda:0 and
# NVIDIA's OpenCL included: torch CUDA tensors through DLPack
# (test_dlpack_cuda.py: locus_buffer_wrap_device, in place on cuda:0),
# and the conv reference cross-check LOCUS_TEST_CONV_REFERENCE=both
# (numpy's float64 reference against torch's on every case). First, from
# the build itself, before the pip install: tests/gpu's
# test_cuda_wrap_device (the C side of locus_buffer_wrap_device on
# cudaMalloc memory) and test_dlpack_cuda.py from the source tree
# (PYTHONPATH, LIBLOCUS_PATH). Under 100 s with SESSION_BUILD.
#
# Carry build-pywheels (the wheels of meson-python, meson, ninja and
# pytest, which that machine lacks; made here with
#   pip download -d build-pywheels --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 --platform any \
#       meson-python meson ninja pytest
# ). Output in $OUT/python.log and $OUT/junit-*.xml.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec >"$out/python.log" 2>&1
# shellcheck disable=SC1091
. scripts/device/gpu-env.sh
export PATH="/usr/local/cuda/bin:$PATH"
base_python=/opt/torch/.venv/bin/python
[ -x "$base_python" ] || base_python=python3
"$base_python" -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())" ||
    { echo "no numpy/torch in $base_python"; exit 1; }

# The CUDA and OpenCL modules of this tree (the bundled wheel has the CPU
# backend only and finds these through LOCUS_PLUGIN_PATH).
# SESSION_BUILD: a release build already made in the same call (h200-session.sh).
build=${SESSION_BUILD:-/tmp/locus-python-build}
[ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dbuildtype=release >"$out/setup.log" 2>&1 ||
    { tail -20 "$out/setup.log"; exit 1; }
ninja -C "$build" backends/cuda/locus-cuda.so backends/opencl/locus-opencl.so \
    tests/gpu/test_cuda_wrap_device >"$out/ninja.log" 2>&1 ||
    { tail -30 "$out/ninja.log"; exit 1; }
liblocus=$(find "$build/runtime" -maxdepth 1 -type f -name 'liblocus.so.0.*.*' | head -1)
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
export XDG_CACHE_HOME=/tmp/locus-python-cache

venv=/tmp/locus-python-venv
rm -rf "$venv"
"$base_python" -m venv "$venv" || exit 1
# torch's venv's packages (numpy, torch) seen from the new one.
"$base_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch-venv.pth"
"$venv/bin/python" -m pip install -q --no-index --find-links build-pywheels \
    meson-python meson ninja pytest || { echo "carry build-pywheels"; exit 1; }

status=0
echo "== test_cuda_wrap_device (C, $build)"
timeout 30 "$build/tests/gpu/test_cuda_wrap_device" || status=1
echo "== test_dlpack_cuda from the source tree ($liblocus)"
(cd tests/python && PYTHONPATH="$(cd ../../bindings/python && pwd)" \
    LIBLOCUS_PATH="$liblocus" timeout 60 "$venv/bin/python" -m pytest -q -rs \
    -s -p no:cacheprovider --junitxml="$out/junit-dlpack-tree.xml" \
    test_dlpack_cuda.py) || status=1
PATH="$venv/bin:$PATH" "$venv/bin/python" -m pip install -q \
    --no-build-isolation --no-index -Cbuild-dir=/tmp/locus-python-pybuild \
    ./bindings/python >"$out/pip.log" 2>&1 || { tail -40 "$out/pip.log"; exit 1; }

cd tests/python || exit 1
env -u PYTHONPATH -u LIBLOCUS_PATH "$venv/bin/python" -c \
    "import locus; print(locus.__file__, locus.library_path); c = locus.Context(); print(c.devices); print(c.backends())"
for name in test_dlpack_cuda test_api test_gemm test_conv_reference; do
    echo "== $name"
    env -u PYTHONPATH -u LIBLOCUS_PATH LOCUS_TEST_CONV_REFERENCE=both \
        "$venv/bin/python" -m pytest -q -rs -s -p no:cacheprovider \
        --junitxml="$out/junit-$name.xml" "$name.py" || status=1
done
echo "status $status"
exit $status
