#!/bin/sh
# One call on the H200 machine for the CUDA conv2d_layer (issue #23 item
# 2, CUDA): builds the cuda module and its tests, runs the cuda suite
# (cuda_conv_layer is the shared layer test, cuda_conv_layer_paths the
# CUDA paths' own), then times each path on ResNet-50 and MobileNetV2
# shapes at batch 1 and 32 (scripts/device/conv_layer_bench.c: auto and
# im2col, median wall time of 20 calls, GFLOP/s and, for depthwise, GB/s),
# and `locus bench conv --net resnet50|mobilenetv2` on cuda:0 at batch 1
# and 32 beside cuDNN (each layer with cudnnFind's fastest algorithm; the
# whole network's conv time and its ratio).
#
#   run: sh scripts/device/h200-conv-layer.sh
#
# Expected: about three minutes with the build; every step is capped so a
# stuck one cannot pass the call's limit. Everything goes to
# $OUT/conv-layer.log; the suite's log and the JSON documents beside it.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
log="$out/conv-layer.log"
exec 3>&1 >"$log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
export PATH=/usr/local/cuda/bin:$PATH

nvidia-smi -L; git log --oneline -1 2>/dev/null
build=/tmp/locus-build
meson setup "$build" -Dbuildtype=release >/dev/null || exit 1
targets="backends/cuda/locus-cuda.so tools/locus tools/locus-bench-cudnn.so"
for t in reduce gemm conv conv_layer coherence half f64 probe; do
    targets="$targets tests/gpu/test_cuda_$t"
done
targets="$targets tests/gpu/test_cuda_conv_layer_paths tests/gpu/test_device_f64"
timeout 200 ninja -C "$build" $targets >/dev/null ||
    { timeout 60 ninja -C "$build" $targets 2>&1 | grep -B2 -A10 error | head -60 | tee /dev/fd/3; exit 1; }
echo "build done" >&3
export LOCUS_PLUGIN_PATH="$build/backends/cuda"

echo "=== meson test --suite cuda"
timeout 120 meson test -C "$build" --suite cuda --no-rebuild --print-errorlogs
echo "suite exit $?"
cp "$build/meson-logs/testlog.txt" "$out/cuda-testlog.txt" 2>/dev/null
grep -E "^ *[0-9]+/[0-9]+ " "$log" | tail -12 >&3

echo "=== conv_layer_bench (cuda:0)"
cc -std=c17 -O2 -Iinclude -I"$build/include" scripts/device/conv_layer_bench.c \
    -L"$build/runtime" -llocus -Wl,-rpath,"$build/runtime" -o /tmp/conv_layer_bench &&
    timeout 60 /tmp/conv_layer_bench | tee /dev/fd/3
echo "bench exit $?"

locus="$build/tools/locus"
for net in resnet50 mobilenetv2; do
    for batch in 1 32; do
        name="conv-net-$net-cuda-b$batch"
        echo "=== $net batch $batch on cuda:0"
        timeout 30 "$locus" bench conv --net "$net" --batch "$batch" \
            --device cuda:0 --repeat 5 --json >"$out/$name.json"
        echo "exit $?"
        python3 - "$out/$name.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    ref = r["reference"]
    print("  %-24s x%-2d %10s %-18s err %-8.2g ref %10s ratio %s" % (
        r["layer"], r["count"],
        "%.4g ms" % (r["seconds"] * 1e3) if r["seconds"] else "-",
        (r["algorithm"] or (r["reason"] or ""))[:18], r["max_rel_err"],
        "%.4g ms" % (ref["seconds"] * 1e3) if ref else "-",
        "%.2f" % r["ratio"] if r["ratio"] else "-"))
for n in d["networks"]:
    print("%s whole network: locus %.4g ms (%d convs), cuDNN %.4g ms (%d), "
          "ratio %s, passed %s" % (
        sys.argv[1].split("/")[-1], n["locus_seconds"] * 1e3,
        n["locus_convs"], n["reference_seconds"] * 1e3,
        n["reference_convs"], "%.3f" % n["ratio"] if n["ratio"] else "-",
        n["passed"]))
PY
    done
done
grep "whole network" "$log" >&3
echo done >&3
