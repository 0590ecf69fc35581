#!/bin/sh
# Installs the build into a scratch DESTDIR and uses it as a user would:
# the files land in the usual places, the README example builds with
# pkg-config against the installed headers and library, and the installed
# `locus` finds its modules with no LOCUS_PLUGIN_PATH (through the modules
# folder beside the installed liblocus, since a DESTDIR install is not at
# its prefix). The caller's LD_LIBRARY_PATH is kept after the installed
# lib: the tool may link optional bench libraries found through it.
# usage: test_install.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR
set -eu
build=$1 source=$2 prefix=$3 libdir=$4
scratch=$(mktemp -d /tmp/locus-install-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

meson install -C "$build" --destdir "$scratch" --quiet --no-rebuild \
    >"$scratch.log" 2>&1 || { cat "$scratch.log" >&2; fail "meson install"; }
rm -f "$scratch.log"
root="$scratch$prefix"
lib="$root/$libdir"
for f in include/locus/locus.h include/locus/backend.h bin/locus; do
    [ -e "$root/$f" ] || fail "$f not installed"
done
for f in liblocus.so liblocus.a pkgconfig/locus.pc; do
    [ -e "$lib/$f" ] || fail "$libdir/$f not installed"
done
# The modules that this build made are installed beside the library.
for m in cuda opencl; do
    if [ -e "$build/backends/$m/locus-$m.so" ]; then
        [ -e "$lib/locus/locus-$m.so" ] || fail "locus-$m.so not installed"
    fi
done
# liblocus links no GPU library; only modules do.
if readelf -d "$lib/liblocus.so" | grep -Eq 'libcuda|libcudart|libOpenCL'; then
    fail "liblocus.so links a GPU library"
fi

# The README's example, built the way the README says.
python3 "$source/tests/readme/extract_example.py" "$source/README.md" \
    "$scratch/example.c"
export PKG_CONFIG_PATH="$lib/pkgconfig"
# The .pc file names the real prefix; point it at the scratch root.
flags=$(pkg-config --cflags --libs locus | sed "s|$prefix|$root|g")
# shellcheck disable=SC2086
cc -std=c17 "$scratch/example.c" $flags -o "$scratch/example" ||
    fail "the README example does not build with pkg-config"
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$scratch/example" || fail "the README example failed"

# The installed tool finds the installed modules by itself.
unset LOCUS_PLUGIN_PATH
info=$(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$root/bin/locus" info --json) ||
    fail "installed locus info failed"
if [ -e "$lib/locus/locus-opencl.so" ]; then
    echo "$info" | grep -q "$lib/locus/locus-opencl.so" ||
        fail "installed locus did not load the installed opencl module"
fi
echo "install ok: $root"
