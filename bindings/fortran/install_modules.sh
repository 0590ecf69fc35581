#!/bin/sh
# meson install script: copies the Fortran .mod files that meson wrote
# somewhere under the build folder of bindings/fortran into
# $DESTDIR$MESON_INSTALL_PREFIX/INSTALL_DIR.
# usage: install_modules.sh BUILD_DIR INSTALL_DIR MODULE.mod...
set -eu
build=$1 dir=$2
shift 2
case $dir in
/*) target="${DESTDIR:-}$dir" ;;
*) target="${DESTDIR:-}$MESON_INSTALL_PREFIX/$dir" ;;
esac
mkdir -p "$target"
for module in "$@"; do
    found=$(find "$build" -name "$module" | head -1)
    [ -n "$found" ] || { echo "install_modules.sh: no $module in $build" >&2; exit 1; }
    install -m 644 "$found" "$target/$module"
    echo "Installing $module to $target"
done
