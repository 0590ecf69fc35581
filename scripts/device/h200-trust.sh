#!/bin/sh
# One call on the H200 machine for the trust work (#19): build, the unit,
# cuda, opencl (PoCL and NVIDIA's OpenCL) and concurrency suites, then the
# reduce and gemm benchmarks that show the IEEE and BLAS fixes cost
# nothing on ordinary data. Results go to $OUT/trust.log (the suites'
# logs to $OUT/testlog-*.txt).
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
exec 3>&1 >"$out/trust.log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
build=/tmp/locus-build
meson setup "$build" -Dbuildtype=release >/dev/null || exit 1
ninja -C "$build" >/dev/null || { ninja -C "$build" | tail -30 >&3; exit 1; }
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
summary() {
    grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" |
        sed "s/^/$1 /" >&3
    grep -E ' (FAIL|TIMEOUT) ' "$build/meson-logs/testlog.txt" >&3
    cp "$build/meson-logs/testlog.txt" "$out/testlog-$1.txt"
}
meson test -C "$build" --no-rebuild --print-errorlogs --suite unit \
    --suite cuda --suite opencl --suite concurrency
summary all
LOCUS_TEST_OPENCL=opencl:1 meson test -C "$build" --no-rebuild \
    --print-errorlogs --suite opencl
summary nvidia-opencl
bench() {
    echo "=== locus bench $*" >&3
    timeout 90 "$locus" bench "$@" 2>&1 | grep -E "^(reduce|gemm|conv2d) " >&3
}
bench reduce --device cuda:0 --size 1048576,16777216,268435456
bench reduce --device opencl:1 --size 1048576,16777216,268435456
bench gemm --device cuda:0 --size 1024,4096
bench gemm --device opencl:1 --size 1024,4096
echo done >&3
