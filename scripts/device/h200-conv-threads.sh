#!/bin/sh
# One call on the H200 machine's 16-core host for #23's CPU figures: how
# the conv layers of MobileNetV2 and ResNet-50 at batch 1 scale with the
# worker count. `LOCUS_THREADS=T locus bench conv --net NAME --batch 1
# --device cpu --repeat 10 --json` for T = 16, 8, 4 (oneDNN beside, at the
# same thread count: the bench gives it the device's workers). Carry
# .devdeps (Debian's libdnnl, as h200-conv-net.sh). Summary on stdout;
# every JSON document in one archive, $OUT/conv-threads.tgz. About two
# minutes.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps /tmp/conv-threads
exec 3>&1 >"$out/conv-threads.log" 2>&1
. "$(dirname "$0")/devdeps-env.sh"
build=/tmp/locus-cpu-build
[ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dbuildtype=release -Dcuda=disabled \
        -Dopencl=disabled >/dev/null || exit 1
ninja -C "$build" tools/locus >/dev/null || { ninja -C "$build" | tail -20 >&3; exit 1; }
echo "built $(date +%T)" >&3
for net in mobilenetv2 resnet50; do
    for t in 16 8 4; do
        json=/tmp/conv-threads/$net-t$t.json
        LOCUS_THREADS=$t timeout 60 "$build/tools/locus" bench conv --net $net \
            --batch 1 --device cpu --repeat 10 --json >"$json"
        python3 - "$json" "$net" "$t" <<'PY' >&3
import json, sys
d = json.load(open(sys.argv[1]))
n = d["networks"][0]
print("%s T=%s: locus %.3f ms, onednn %.3f ms, ratio %.3f" % (
    sys.argv[2], sys.argv[3], n["locus_seconds"] * 1e3,
    n["reference_seconds"] * 1e3, n["ratio"] or 0))
PY
    done
done
tar czf "$out/conv-threads.tgz" -C /tmp conv-threads
echo "done $(date +%T)" >&3
