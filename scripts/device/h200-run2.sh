#!/bin/sh
# One call on the H200 machine for a session's second round, when several
# pieces of work need the GPU and the device time allows one call: one
# release build of this tree (oneDNN from the carried .devdeps) and, when
# build-dev/before.tar.gz is carried, a build of that tree beside it (for
# the per-op overhead, #21); then each part while time is left
# (RUN_SECONDS, default 560), each under its own limit:
#   f64     scripts/device/h200-f64.sh's bench (DGEMM variants, #22)
#   overhead  the per-op benches of both builds, alternated (#21)
#   pipeline  scripts/device/h200-pipeline.sh (#25 item 2)
#   python  scripts/device/h200-python.sh (#26 item 3)
#   depthwise  scripts/device/h200-depthwise.sh (CPU depthwise tests, MobileNetV2, #23)
#   net     bench conv --net resnet50 on the cpu, batch 1 and 8 (#23)
#   bandwidth  locus numa's read bandwidth and bench reduce's on the cpu (#24 item 5)
#   sched   three bench sched runs (#25 item 1)
# PARTS="f64 sched" picks some. $OUT/run2.log is the summary.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out" /opt/deps
start=$(date +%s)
left() { echo $((${RUN_SECONDS:-560} - ($(date +%s) - start))); }
elapsed() { echo "$(( $(date +%s) - start )) s"; }
exec 3>&1 >"$out/run2.log" 2>&1
root=$(pwd)
. "$(dirname "$0")/devdeps-env.sh"
. "$root/scripts/device/gpu-env.sh"
export PATH=/usr/local/cuda/bin:$PATH
parts=${PARTS:-f64 overhead pipeline python depthwise net bandwidth sched}
want() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
build=/tmp/locus-build
# A warm machine keeps the last call's build: ninja brings it up to date.
[ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dbuildtype=release >/dev/null || { echo "setup failed" >&3; exit 1; }
timeout 240 ninja -C "$build" >/dev/null ||
    { ninja -C "$build" 2>&1 | grep -E "error|FAILED" | head -20 >&3; exit 1; }
echo "built after $(elapsed)" >&3
before=/tmp/locus-before
if want overhead && [ -f "$root/build-dev/before.tar.gz" ]; then
    mkdir -p /tmp/locus-before-src
    tar -xzf "$root/build-dev/before.tar.gz" -C /tmp/locus-before-src
    ( { [ -f "$before/build.ninja" ] ||
        meson setup "$before" /tmp/locus-before-src -Dbuildtype=release >/dev/null; } &&
        nice timeout 200 ninja -C "$before" >"$out/before-build.txt" 2>&1 ) &
    before_pid=$!
fi
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
export LOCUS_OPENCL_CACHE_DIR=/tmp/locus-cl-cache XDG_CACHE_HOME=/tmp/locus-cache
locus="$build/tools/locus"
part() { # name script limit
    [ -f "$root/scripts/device/$2" ] || { echo "=== $1: no $2" >&3; return; }
    limit=$3
    [ "$(left)" -lt "$limit" ] && limit=$(( $(left) - 5 ))
    [ "$limit" -lt 20 ] && { echo "=== $1 skipped: no time" >&3; return; }
    mkdir -p "$out/$1"
    SESSION_BUILD="$build" OUT="$out/$1" timeout "$limit" sh "$root/scripts/device/$2" \
        >"$out/$1/stdout.txt" 2>&1
    echo "=== $1 exit $? after $(elapsed)" >&3
    tail -q -n 25 "$out/$1"/*.log "$out/$1/stdout.txt" 2>/dev/null | head -60 >&3
}
want f64 && part f64 h200-f64.sh 200
if want overhead && [ -n "${before_pid:-}" ]; then
    wait "$before_pid"
    echo "=== overhead (before build: $( [ -x $before/tools/locus ] && echo ok || echo failed)) after $(elapsed)" >&3
    for round in 1 2; do
        for b in $before $build; do
            [ -x "$b/tools/locus" ] || continue
            for args in "reduce --device cuda:0 --size 1024" "reduce --device cpu --size 1024" \
                "gemm --device cpu --size 32,64"; do
                # shellcheck disable=SC2086
                LOCUS_PLUGIN_PATH="$b/backends/cuda" timeout 60 "$b/tools/locus" bench $args \
                    --repeat 200 2>&1 | grep -E "^(reduce|gemm) " | sed "s|^|$(basename $b) |" >&3
            done
        done
    done
fi
want pipeline && part pipeline h200-pipeline.sh 150
want python && part python h200-python.sh 100
want depthwise && part depthwise h200-depthwise.sh 90
if want net; then
    for net in resnet50; do
        for batch in 1 8; do
            [ "$(left)" -lt 40 ] && break
            name="conv-net-$net-cpu-b$batch"
            timeout 40 "$locus" bench conv --net $net --batch $batch --device cpu \
                --repeat 5 >"$out/$name.txt" 2>&1
            echo "=== $name exit $?" >&3
            grep -iE "whole|ratio \(|not offered|FAIL" "$out/$name.txt" | head -4 >&3
        done
    done
fi
if want bandwidth && [ "$(left)" -gt 100 ]; then
    echo "=== bandwidth after $(elapsed)" >&3
    "$locus" numa | sed -n '/measured read bandwidth/,/^$/p' >&3
    for dtype in f32 f64; do
        timeout 40 "$locus" bench reduce --device cpu --dtype $dtype --size 256M \
            --repeat 10 2>&1 | grep -E "^reduce" >&3
    done
    "$locus" numa | sed -n '/measured read bandwidth/,/^$/p' >&3
fi
if want sched && [ "$(left)" -gt 70 ]; then
    "$locus" calibrate >/dev/null 2>&1
    for run in 1 2 3; do
        [ "$(left)" -lt 35 ] && break
        timeout "$(( $(left) - 5 ))" "$locus" bench sched --json >"$out/sched-$run.json" 2>/dev/null
        echo "=== sched run $run exit $? after $(elapsed)" >&3
        python3 - "$out/sched-$run.json" <<'PY' >&3 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    if r["regret"] > 1.25:
        print(f'  {r["op"]:7} {r["shape"]:26} {r["start"]:9} {r["device"]:9} '
              f'{r["seconds"]*1e3:9.3f} ms  best {r["reference"]["name"]:9} '
              f'{r["reference"]["seconds"]*1e3:9.3f} ms  regret {r["regret"]:.2f}'
              f'  elsewhere {r["auto_runs_elsewhere"]}')
print("summary", d["summary"])
PY
    done
fi
echo "done after $(elapsed)" >&3
