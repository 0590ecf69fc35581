#!/bin/sh
# One call on the H200 machine's 16-core host for the CPU depthwise
# kernels (issue #23; docs/PERFORMANCE.md, "Whole networks' conv layers"):
# a CPU-only release build with oneDNN, the depthwise tests (the host's
# AVX-512 and AVX2 kernels), `locus numa`'s read bandwidth, then
# MobileNetV2 at batch 1 and 8 beside oneDNN, with each dw layer's GB/s
# (the bench's bytes, input + output + filter + bias, over the best time).
#
#   run (carry .devdeps): sh scripts/device/h200-depthwise.sh
#
# .devdeps holds Debian 12's libdnnl2 and libdnnl-dev as for
# h200-conv-net.sh. About a minute with the build. Everything goes to
# $OUT/depthwise.log, the JSON documents to their own files.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps
log="$out/depthwise.log"
exec 3>&1 >"$log" 2>&1
. "$(dirname "$0")/devdeps-env.sh"

nproc; grep -m1 "model name" /proc/cpuinfo
# SESSION_BUILD: a release build of this tree made earlier in the call.
build=${SESSION_BUILD:-/tmp/locus-build-dw}
[ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dbuildtype=release -Dcuda=disabled >/dev/null || exit 1
grep -E "dnnl" "$build/meson-logs/meson-log.txt" | grep -iE "found|YES|NO" | head -3
ninja -C "$build" tools/locus tests/cpu/test_cpu_depthwise \
    tests/cpu/test_cpu_conv_layer >/dev/null ||
    { ninja -C "$build" 2>&1 | tail -30; exit 1; }
locus="$build/tools/locus"
for t in test_cpu_depthwise test_cpu_conv_layer; do
    timeout 120 "$build/tests/cpu/$t" >"$out/$t.txt" 2>&1
    echo "$t exit $?"
    tail -3 "$out/$t.txt"
done
"$locus" numa 2>&1 | sed -n '/measured read bandwidth/,/^$/p'

for batch in 1 8; do
    name="dw-mobilenetv2-cpu-b$batch"
    echo "=== mobilenetv2 batch $batch on cpu"
    timeout 60 "$locus" bench conv --net mobilenetv2 --batch "$batch" \
        --device cpu --repeat 10 --json >"$out/$name.json"
    echo "exit $?"
    python3 - "$out/$name.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
dw = 0.0
for r in d["results"]:
    ref = r["reference"]
    s, rs = r["seconds"], ref["seconds"] if ref else None
    is_dw = r["dims"]["groups"] > 1
    if is_dw and s:
        dw += r["count"] * s
    print("  %-22s x%-2d %-18s %9s %-10s %6s GB/s | onednn %9s %6s GB/s ratio %s" % (
        r["layer"], r["count"], r["algorithm"] or "-",
        "%.4g ms" % (s * 1e3) if s else "-",
        "" if r["passed"] else "FAILED",
        "%.0f" % (r["bytes"] / s / 1e9) if s and is_dw else "",
        "%.4g ms" % (rs * 1e3) if rs else "-",
        "%.0f" % (r["bytes"] / rs / 1e9) if rs and is_dw else "",
        "%.2f" % r["ratio"] if r["ratio"] else "-"))
print("  dw layers' sum of count x time: %.4g ms" % (dw * 1e3))
for n in d["networks"]:
    print("  whole network: locus %.4g ms, onednn %.4g ms, ratio %s, passed %s"
          % (n["locus_seconds"] * 1e3, n["reference_seconds"] * 1e3,
             "%.3f" % n["ratio"] if n["ratio"] else "-", n["passed"]))
PY
    echo "mobilenetv2 b$batch done" >&3
done
tail -4 "$log" >&3
echo done >&3
