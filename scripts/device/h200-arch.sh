#!/bin/sh
# One call on the H200 machine for the architecture work (#21): build this
# tree and, when build-before/src.tar.gz is carried, the tree before it;
# run the unit, cuda, opencl (PoCL and NVIDIA's OpenCL) and concurrency
# suites on this tree; then the per-op overhead and small-op benches of
# both builds, alternated, so that "no slower" is read from one run.
# Results in $OUT/arch.log (the suites' logs in $OUT/testlog-*.txt).
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec 3>&1 >"$out/arch.log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
build() { # source dir, build dir
    meson setup "$2" "$1" -Dbuildtype=release >/dev/null &&
        ninja -C "$2" >/dev/null || { ninja -C "$2" | tail -30 >&3; return 1; }
}
build . /tmp/locus-build || exit 1
if [ -f build-before/src.tar.gz ]; then
    mkdir -p /tmp/locus-before-src
    tar -xzf build-before/src.tar.gz -C /tmp/locus-before-src
    build /tmp/locus-before-src /tmp/locus-before || echo "before: no build" >&3
fi
summary() {
    grep -E '^(Ok|Fail|Skipped|Timeout):' /tmp/locus-build/meson-logs/testlog.txt |
        sed "s/^/$1 /" >&3
    grep -E ' (FAIL|TIMEOUT) ' /tmp/locus-build/meson-logs/testlog.txt >&3
    cp /tmp/locus-build/meson-logs/testlog.txt "$out/testlog-$1.txt"
}
LOCUS_PLUGIN_PATH=/tmp/locus-build/backends/cuda:/tmp/locus-build/backends/opencl \
    meson test -C /tmp/locus-build --no-rebuild --print-errorlogs \
    --suite unit --suite cuda --suite opencl --suite concurrency
summary all
LOCUS_TEST_OPENCL=opencl:1 meson test -C /tmp/locus-build --no-rebuild \
    --print-errorlogs --suite opencl
summary nvidia-opencl
bench() { # build, arguments
    b=$1
    shift
    echo "=== $(basename "$b"): locus bench $*" >&3
    LOCUS_PLUGIN_PATH="$b/backends/cuda:$b/backends/opencl" timeout 90 \
        "$b/tools/locus" bench "$@" 2>&1 | grep -E "^(reduce|gemm|conv2d) " >&3
}
for round in 1 2; do
    for b in /tmp/locus-before /tmp/locus-build; do
        [ -x "$b/tools/locus" ] || continue
        bench "$b" reduce --device cuda:0 --size 1024 --repeat 200
        bench "$b" reduce --device cpu --size 1024 --repeat 200
        bench "$b" gemm --device cpu --size 32,64 --repeat 200
    done
done
echo done >&3
