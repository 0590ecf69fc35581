#!/bin/sh
# One call on the H200 machine for issue #23 item 4: `locus bench conv
# --net` for ResNet-50 and MobileNetV2, each layer beside its vendor
# library: cuda:0 (cuDNN, cudnnFind's fastest algorithm) at batch 1 and
# 32, the cpu (oneDNN) at batch 1 and 8, and NVIDIA's OpenCL GPU (beside
# cuDNN on the same GPU) at batch 1 when that device is there.
#
#   run (carry .devdeps): sh scripts/device/h200-conv-net.sh
#   PARTS="cuda1 opencl" sh scripts/device/h200-conv-net.sh: only those
#   (cuda1, cuda32, cpu1, cpu8, opencl; all by default)
#
# oneDNN is not on that image: Debian 12's libdnnl2 and libdnnl-dev travel
# in .devdeps/ as for h200-measure.sh and are unpacked under /opt/deps
# (without them the cpu rows say "oneDNN not built in"). Five timed runs
# per layer; each bench is capped (50 s at most), so a stuck one cannot
# take the call past its limit; expected: about two minutes in all with
# the build. The tables go to $OUT/conv-net.log, each JSON document to its
# own file.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps
log="$out/conv-net.log"
exec 3>&1 >"$log" 2>&1
. "$(dirname "$0")/devdeps-env.sh"
. "$(dirname "$0")/gpu-env.sh"

nproc; nvidia-smi -L
build=/tmp/locus-build
# A build left by an earlier script in the same call is reused.
[ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dbuildtype=release >/dev/null || exit 1
grep -E "dnnl|cudnn" "$build/meson-logs/meson-log.txt" | grep -iE "found|YES|NO" | head -5
ninja -C "$build" tools/locus backends/cuda/locus-cuda.so \
    backends/opencl/locus-opencl.so tools/locus-bench-cudnn.so >/dev/null ||
    { ninja -C "$build" 2>&1 | tail -30; exit 1; }
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
"$locus" info | head -20

# One bench: the table in the log, the JSON document in its own file.
net_bench() { # device batch net limit
    name="conv-net-$3-$(echo "$1" | tr ':' '-')-b$2"
    echo "=== $3 batch $2 on $1"
    timeout "$4" "$locus" bench conv --net "$3" --batch "$2" --device "$1" \
        --repeat 5 --json >"$out/$name.json"
    echo "exit $?"
    python3 - "$out/$name.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    ref = r["reference"]
    print("  %-24s x%-2d %10s %-18s err %-8.2g ref %-40s %10s ratio %s" % (
        r["layer"], r["count"],
        "%.4g ms" % (r["seconds"] * 1e3) if r["seconds"] else "-",
        r["algorithm"] or (r["reason"] or "")[:18], r["max_rel_err"],
        (ref["name"] if ref else (r["reference_reason"] or ""))[:40],
        "%.4g ms" % (ref["seconds"] * 1e3) if ref else "-",
        "%.2f" % r["ratio"] if r["ratio"] else "-"))
for n in d["networks"]:
    print("  whole network on %s: locus %.4g ms (%d convs), reference %.4g ms "
          "(%d), ratio %s over %d convs, complete %s, passed %s" % (
        n["device"], n["locus_seconds"] * 1e3, n["locus_convs"],
        n["reference_seconds"] * 1e3, n["reference_convs"],
        "%.3f" % n["ratio"] if n["ratio"] else "-", n["both_convs"],
        n["complete"], n["passed"]))
PY
    echo "$3 b$2 $1 done" >&3
}

parts=${PARTS:-cuda1 cuda32 cpu1 cpu8 opencl}
wanted() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
for net in resnet50 mobilenetv2; do
    wanted cuda1 && net_bench cuda:0 1 $net 25
    wanted cuda32 && net_bench cuda:0 32 $net 40
done
for net in resnet50 mobilenetv2; do
    wanted cpu1 && net_bench cpu 1 $net 25
    wanted cpu8 && net_bench cpu 8 $net 50
done
# NVIDIA's OpenCL GPU, when the OpenCL backend sees it.
ocl=$("$locus" info --json | python3 -c '
import json, sys
for b in json.load(sys.stdin)["backends"]:
    for d in b["devices"]:
        if b["name"] == "opencl" and "NVIDIA" in d["vendor"]:
            print(d["selector"]); sys.exit(0)' 2>/dev/null)
if ! wanted opencl; then
    :
elif [ -n "$ocl" ]; then
    for net in resnet50 mobilenetv2; do net_bench "$ocl" 1 $net 25; done
else
    echo "no NVIDIA OpenCL device"
fi
tail -5 "$log" >&3
echo done >&3
