#!/bin/sh
# Installs what Locus needs, builds it and runs every test suite (unit, cpu,
# opencl, cuda, numa, cli). Extra arguments go to `meson test`, e.g.
# `./test.sh --suite cpu`. Set LOCUS_WERROR=1 to build with -Werror.
set -eu
cd "$(dirname "$0")"
scripts/install-deps.sh test
[ -x /usr/local/cuda/bin/nvcc ] && PATH="/usr/local/cuda/bin:$PATH"
werror=false
[ "${LOCUS_WERROR:-0}" = 1 ] && werror=true
if [ ! -f build/build.ninja ]; then
    meson setup build -Dwerror="$werror"
else
    meson configure build -Dwerror="$werror" >/dev/null
fi
meson compile -C build
meson test -C build --print-errorlogs "$@"
