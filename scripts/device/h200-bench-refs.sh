#!/bin/sh
# One call on the H200 machine for the bench references (#24 items 1 and
# 5, #22 item 4): the CPU BLAS references prepared here by
# scripts/prepare-references.sh travel as build-refs/references.tar.xz
# (carry it) and are unpacked under /tmp/locus-refs; then the one
# bandwidth truth (locus numa's matrix and bench reduce's "memory read
# bandwidth", same routine), CPU gemm in f32 and f64 beside MKL and
# OpenBLAS 0.3.34 (PyTorch's torch.mm, which runs MKL, as a cross-check),
# and with CUDA=1 the CUDA references per dtype.
#
#   sh scripts/device/h200-bench-refs.sh           (CPU only: a quick build)
#   CUDA=1 sh scripts/device/h200-bench-refs.sh    (also cuda:0)
#
# SRC=path/to/src.tar.gz builds that tree instead of this one;
# SESSION_BUILD=dir uses that build (of this tree) as it is. Output on
# stdout (pipe it through tee "$OUT/bench-refs.log" to keep it).
set -u
. "$(dirname "$0")/gpu-env.sh"
src=.
if [ -n "${SRC:-}" ]; then
    mkdir -p /tmp/locus-src && tar -xzf "$SRC" -C /tmp/locus-src && src=/tmp/locus-src
fi
refs=/tmp/locus-refs
mkdir -p "$refs"
tar -xJf build-refs/references.tar.xz -C "$refs" || echo "no build-refs/references.tar.xz: MKL and OpenBLAS 0.3.34 will be not found"
export LOCUS_BENCH_MKL="$refs/mkl" LOCUS_BENCH_OPENBLAS="$refs/openblas"
build=${SESSION_BUILD:-/tmp/locus-build}
cuda_option=-Dcuda=disabled
[ "${CUDA:-0}" = 1 ] && cuda_option=
if [ -z "${SESSION_BUILD:-}" ]; then
    meson setup "$build" "$src" -Dbuildtype=release $cuda_option >/dev/null || exit 1
    ninja -C "$build" tools/locus $( [ -z "$cuda_option" ] && echo backends/cuda/locus-cuda.so tools/locus-bench-cub.so tools/locus-bench-cublas.so tools/locus-bench-cudnn.so) >/dev/null ||
        { ninja -C "$build" | tail -30; exit 1; }
fi
locus=$build/tools/locus
export LOCUS_PLUGIN_PATH=$build/backends/cuda
lscpu | grep -E "Model name|^CPU\(s\)|L3"
echo "=== locus numa (bandwidth)"
$locus numa --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["bandwidth"]
print("numa read GB/s median", d["matrix"], "min", d["min"], "max", d["max"], "bytes", d["bytes_per_pair"], "threads", d["threads_per_node"])'
for dtype in f32 f64; do
    echo "=== bench reduce cpu $dtype"
    $locus bench reduce --device cpu --dtype $dtype --size 256M --repeat 10 | grep -E "^reduce"
done
echo "=== locus numa again (the same figure, a second time)"
$locus numa | sed -n '/measured read bandwidth/,/^$/p'
for dtype in f32 f64; do
    echo "=== bench gemm cpu $dtype"
    $locus bench gemm --device cpu --dtype $dtype --size 1024,2048,4096,1000,3000 --repeat 5 | grep -E "^gemm|^reference"
done
echo "=== torch.mm (MKL) cross-check"
python3 - <<'PY' || true
import time, torch
torch.set_num_threads(torch.get_num_threads())
for dtype in (torch.float32, torch.float64):
    for n in (1024, 2048, 4096, 1000, 3000):
        a = torch.rand(n, n, dtype=dtype); b = torch.rand(n, n, dtype=dtype)
        torch.mm(a, b)
        best = min((lambda t0: (torch.mm(a, b), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(5))
        print("torch.mm", dtype, n, "threads", torch.get_num_threads(), "%.1f GFLOP/s" % (2 * n**3 / best / 1e9))
PY
if [ -z "$cuda_option" ]; then
    for dtype in f32 f64 bf16 f16; do
        echo "=== bench gemm cuda:0 $dtype"
        $locus bench gemm --device cuda:0 --dtype $dtype --size 4096,8192 --repeat 10 2>&1 | grep -E "^gemm|not offered|failed"
    done
    for dtype in f32 f64; do
        echo "=== bench reduce cuda:0 $dtype"
        $locus bench reduce --device cuda:0 --dtype $dtype --size 256M --repeat 10 2>&1 | grep -E "^reduce|not offered|failed"
        echo "=== bench conv cuda:0 $dtype"
        $locus bench conv --device cuda:0 --dtype $dtype --size 8,64,56,56,64,3,3,1,1 --repeat 5 2>&1 | grep -E "^conv2d|not offered|failed"
    done
fi
echo done
