#!/bin/sh
# CPU GEMM on the 16-core host at 1, 4, 8 and 16 threads beside MKL and
# OpenBLAS 0.3.34 at the same thread count (the bench gives each
# reference the device's worker count, LOCUS_THREADS): tells a loss in
# the micro-kernel (already there at 1 thread) from one in the parallel
# driver (growing with threads), for #22 and #24. Needs the references
# of scripts/prepare-references.sh (carry build-refs/references.tar.xz)
# and a build: SESSION_BUILD=dir, or a CPU-only release build of this
# tree. Output on stdout.
set -u
refs=/tmp/locus-refs
mkdir -p "$refs"
tar -xJf build-refs/references.tar.xz -C "$refs" ||
    echo "no build-refs/references.tar.xz: MKL and OpenBLAS 0.3.34 will be not found"
export LOCUS_BENCH_MKL="$refs/mkl" LOCUS_BENCH_OPENBLAS="$refs/openblas"
build=${SESSION_BUILD:-/tmp/locus-cpu-build}
if [ -z "${SESSION_BUILD:-}" ]; then
    meson setup "$build" -Dbuildtype=release -Dcuda=disabled >/dev/null || exit 1
    ninja -C "$build" tools/locus >/dev/null || { ninja -C "$build" | tail -30; exit 1; }
fi
locus=$build/tools/locus
lscpu | grep -E "Model name|^CPU\(s\)|Thread|L2|L3"
for dtype in f32 f64; do
    for threads in 1 4 8 16; do
        sizes=2048,4096
        [ "$threads" = 1 ] && sizes=1024,2048
        echo "=== gemm cpu $dtype threads $threads"
        LOCUS_THREADS=$threads timeout 120 "$locus" bench gemm --device cpu \
            --dtype $dtype --size $sizes --repeat 3 | grep -E "^gemm|^reference"
    done
done
echo done
