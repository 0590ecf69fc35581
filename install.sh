#!/bin/sh
# Installs what Locus needs, builds it, installs it under PREFIX (default
# ~/.local) and runs the main job: `locus info`, `locus calibrate` (the
# scheduler's figures of each device, kept in ~/.cache/locus) and a checked
# gemm benchmark on the default device selection (LOCUS_DEVICE, else auto).
set -eu
cd "$(dirname "$0")"
prefix="${PREFIX:-$HOME/.local}"
scripts/install-deps.sh build
[ -x /usr/local/cuda/bin/nvcc ] && PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f build/build.ninja ]; then
    meson setup build --prefix "$prefix" -Dbuildtype=release
else
    meson configure build --prefix "$prefix" >/dev/null
fi
meson compile -C build
meson install -C build --quiet
"$prefix/bin/locus" info
# The scheduler's figures of every device, measured once and cached
# (docs/SCHEDULER.md): without them an op given no device decides on
# nominal figures, or a short probe of the CPU, and warns once.
if ! "$prefix/bin/locus" calibrate; then
    echo "install.sh: locus calibrate failed (above); ops will use nominal" \
        "figures until it is run" >&2
fi
"$prefix/bin/locus" bench gemm --size 256,512,1024
libdir=$(meson introspect build --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"))')
cat <<EOT

Locus is installed under $prefix. To use it from a shell, add:
    export PATH="$prefix/bin:\$PATH"
    export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
EOT
