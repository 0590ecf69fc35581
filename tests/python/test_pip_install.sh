#!/bin/sh
# pip install of the Python package (bindings/python) into a fresh venv,
# built against a scratch install of this build (-Dliblocus=system, found
# by pkg-config), then `import locus` and a gemm from outside the source
# tree. Offline: the venv sees the build dependencies (meson-python,
# meson, ninja, numpy) of the Python that has them ($LOCUS_TEST_PYTHON,
# else python3) through a .pth file naming that Python's site-packages
# (--system-site-packages would show the base interpreter's, not a
# venv's), and pip runs with --no-build-isolation --no-index, so nothing
# is fetched.
# With MODE "bundled", the default build instead: liblocus compiled from
# the source tree into the package (locus/_liblocus.so), as a plain
# `pip install ./bindings/python` does; with "root", that build from the
# tree's root, as `pip install .` there does (pyproject.toml hands it to
# bindings/python).
# usage: test_pip_install.sh BUILD SOURCE PREFIX LIBDIR [system|bundled|root]
set -eu
build=$1 source=$2 prefix=$3 libdir=$4 mode=${5:-system}
python=${LOCUS_TEST_PYTHON:-python3}
if ! "$python" -c "import mesonpy, numpy" 2>/dev/null; then
    echo "$python lacks meson-python or numpy (docs/PYTHON.md, Tests)"
    [ "${CI:-}" = true ] && { echo "CI=true: .ci/run installs them"; exit 1; }
    echo "skipped: meson-python or numpy absent"
    exit 77
fi
# shellcheck source=../install/scratch_install.sh
. "$source/tests/install/scratch_install.sh"
"$python" -m venv "$scratch/venv" || fail "python -m venv"
venv_python="$scratch/venv/bin/python"
package="$source/bindings/python" liblocus=$mode
[ "$mode" = root ] && package="$source" liblocus=bundled
"$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    >"$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/build-deps.pth"
# The venv's bin first: meson-python runs the meson and ninja it finds.
PATH="$scratch/venv/bin:$(dirname "$python"):$scratch/bin:$PATH" \
    "$venv_python" -m pip install -q --no-build-isolation --no-index \
    -Csetup-args=-Dliblocus="$liblocus" \
    -Cbuild-dir="$scratch/pybuild" "$package" \
    >"$scratch/pip.log" 2>&1 || { cat "$scratch/pip.log" >&2; fail "pip install"; }
cd "$scratch"
env -u PYTHONPATH -u LIBLOCUS_PATH LOCUS_PLUGIN_PATH="$lib/locus" \
    "$venv_python" - "$root" "$liblocus" <<'PY' || fail "import locus from the venv"
import os
import sys
import numpy as np
import locus

root, mode = sys.argv[1:]
if mode == "system":
    assert locus.library_path.startswith(root), locus.library_path
else:
    assert locus.library_path == os.path.join(
        os.path.dirname(locus.__file__), "_liblocus.so"), locus.library_path
assert "site-packages" in locus.__file__, locus.__file__
with locus.Context() as ctx:
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    c = ctx.gemm(a, a.T)
    assert np.array_equal(c, a @ a.T), c
    print("import locus:", locus.version(), locus.library_path,
          [d.selector for d in ctx.devices])
PY
echo "pip install of $package ($liblocus liblocus): ok"
