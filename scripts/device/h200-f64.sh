#!/bin/sh
# One call on the H200 machine for the CUDA f64 work (#22 item 1): build,
# the cuda suite (cuda_f64, and the cross-device f64 test where it is
# registered) and every f64 test the build lists, then the benches: each
# DGEMM kernel beside cuBLAS DGEMM at 4096 and 8192 and the f64 reduce
# beside CUB at 2^24 and 2^28 (scripts/device/f64_bench.cu, in one
# process), and `locus bench --dtype f64` on cuda:0 where the tool takes
# --dtype. Results: $OUT/f64.log (summary), $OUT/f64-bench.txt,
# $OUT/testlog-*.txt. Under 8 minutes.
#
# `h200-f64.sh dgemm`: only the bench's DGEMM part (f64_bench --dgemm:
# every kernel checked on odd shapes, the pipelined variants timed beside
# AUTO and cuBLAS at 4096 and 8192 in each transpose, a closing table),
# no meson build or tests: about 2-3 minutes.
#
# `h200-f64.sh sustained`: cuBLAS and AUTO back to back in two-second
# windows at 8192 and 4096 NN, each window's SM clock, power and
# clock-event reasons from nvidia-smi beside its TFLOP/s: about a minute.
#
# `h200-f64.sh groups`: what-if benches of the DGEMM kernels' tile groups
# (LOCUS_DGEMM_GROUP_ROWS 4, 8 (the library's), 16, 32), each run with
# `--dgemm-large` (AUTO beside cuBLAS, interleaved, 4096 NN and 8192 NN
# and TT), twice in turn: about 3 minutes.
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
mode=${1:-all}
exec 3>&1 >"$out/f64.log" 2>&1
. "$(dirname "$0")/gpu-env.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
build=/tmp/locus-build
export PATH=/usr/local/cuda/bin:$PATH
# One .cu of the standalone bench to OBJ in the background (its pid is
# appended to $pids), with any further nvcc arguments (what-if defines);
# nvcc's messages in OBJ.txt.
compile_cu() {
    cu_src=$1 cu_obj=$2
    shift 2
    timeout 300 nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 "$@" \
        -I"$root/backends/cuda" -I"$root/include" -c "$root/$cu_src" \
        -o "$cu_obj" >"$cu_obj.txt" 2>&1 &
    pids="$pids $!"
}
# The standalone bench compiles beside the build (its own nvcc), one nvcc
# a file in parallel (the DGEMM kernel files are the slow ones).
build_bench() {
    rm -f /tmp/f64_bench
    objs=""
    pids=""
    for src in scripts/device/f64_bench.cu backends/cuda/gemm_f64.cu \
        backends/cuda/gemm_f64_pipe.cu backends/cuda/reduce_f64.cu \
        backends/cuda/reduce.cu; do
        obj=/tmp/f64_bench_$(basename "$src" .cu).o
        compile_cu "$src" "$obj"
        objs="$objs $obj"
    done
    ok=1
    for pid in $pids; do wait "$pid" || ok=0; done
    cat /tmp/f64_bench_*.o.txt
    # shellcheck disable=SC2086
    [ "$ok" = 1 ] && nvcc -o /tmp/f64_bench $objs -lcublas ||
        echo "bench build failed"
}
if [ "$mode" = groups ]; then
    echo "group builds: $(date +%T)" >&3
    pids=""
    for src in scripts/device/f64_bench.cu backends/cuda/reduce_f64.cu \
        backends/cuda/reduce.cu; do
        compile_cu "$src" "/tmp/f64_groups_$(basename "$src" .cu).o"
    done
    for rows in 4 8 16 32; do
        for src in gemm_f64 gemm_f64_pipe; do
            compile_cu "backends/cuda/$src.cu" \
                "/tmp/f64_groups_${src}_$rows.o" \
                -DLOCUS_DGEMM_GROUP_ROWS=$rows
        done
    done
    for pid in $pids; do wait "$pid"; done
    cat /tmp/f64_groups_*.txt >"$out/f64-groups-build.txt"
    for rows in 4 8 16 32; do
        nvcc -o /tmp/f64_groups_$rows /tmp/f64_groups_f64_bench.o \
            /tmp/f64_groups_reduce_f64.o /tmp/f64_groups_reduce.o \
            /tmp/f64_groups_gemm_f64_$rows.o \
            /tmp/f64_groups_gemm_f64_pipe_$rows.o -lcublas ||
            echo "group $rows: link failed" >&3
    done
    echo "built: $(date +%T)" >&3
    for pass in 1 2; do
        for rows in 4 8 16 32; do
            [ -x /tmp/f64_groups_$rows ] || continue
            timeout 100 /tmp/f64_groups_$rows --dgemm-large \
                >"$out/f64-groups-$rows-$pass.txt" 2>&1
            echo "=== group rows $rows, pass $pass: exit $?" >&3
            grep -E "FAIL|failures|^table" \
                "$out/f64-groups-$rows-$pass.txt" >&3
        done
    done
    echo "done $(date +%T)" >&3
    exit 0
fi
if [ "$mode" = sustained ]; then
    # Who holds the clock: cuBLAS and AUTO in windows of two seconds in
    # turn (f64_bench --dgemm-sustained), nvidia-smi sampling the SM clock,
    # power and clock-event reasons every 100 ms beside them; each window's
    # means in $out/f64-sustained.txt and on the summary.
    build_bench >"$out/f64-bench-build.txt" 2>&1
    [ -x /tmp/f64_bench ] || { tail -30 "$out/f64-bench-build.txt" >&3; exit 1; }
    fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu
    reasons=clocks_event_reasons.active
    nvidia-smi --query-gpu=$reasons --format=csv >/dev/null 2>&1 ||
        reasons=clocks_throttle_reasons.active
    nvidia-smi --query-gpu=$fields,$reasons --format=csv,noheader,nounits \
        -lms 100 >"$out/f64-smi.csv" 2>&1 &
    smi=$!
    timeout 120 /tmp/f64_bench --dgemm-sustained >"$out/f64-sustained.txt" 2>&1
    echo "f64_bench --dgemm-sustained exit $?" >&3
    kill "$smi"
    python3 - "$out/f64-sustained.txt" "$out/f64-smi.csv" <<'PY' >&3
import sys, time, datetime
samples = []
for line in open(sys.argv[2]):
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f")
        samples.append((time.mktime(t.timetuple()) * 1000 + t.microsecond / 1000,
                        float(f[1]), float(f[2]), float(f[3]), float(f[4]), f[5]))
    except (ValueError, IndexError):
        pass
for line in open(sys.argv[1]):
    if not line.startswith("window"):
        continue
    w = line.split()
    start, end = float(w[w.index("start") + 1]), float(w[w.index("end") + 1])
    inside = [s for s in samples if start + 200 <= s[0] <= end]
    if not inside:
        print(line.strip(), " (no samples)")
        continue
    mean = lambda i: sum(s[i] for s in inside) / len(inside)
    reasons = sorted({s[5] for s in inside})
    print("%s | SM %.0f MHz (min %.0f) mem %.0f power %.0f W temp %.0f C "
          "reasons %s n %d" % (line.strip(), mean(1), min(s[1] for s in inside),
          mean(2), mean(3), mean(4), "/".join(reasons), len(inside)))
PY
    exit 0
fi
if [ "$mode" = dgemm ]; then
    # The DGEMM variants alone: no meson build, no tests, no reduce.
    echo "bench build: $(date +%T)" >&3
    build_bench >"$out/f64-bench-build.txt" 2>&1
    echo "built: $(date +%T)" >&3
    if [ -x /tmp/f64_bench ]; then
        timeout 200 /tmp/f64_bench --dgemm >"$out/f64-bench.txt" 2>&1
        echo "f64_bench --dgemm exit $?" >&3
        grep -E "FAIL|^best|^table|failures|^device" "$out/f64-bench.txt" >&3
    else
        tail -30 "$out/f64-bench-build.txt" >&3
    fi
    echo "done $(date +%T)" >&3
    exit 0
fi
( build_bench >"$out/f64-bench-build.txt" 2>&1 ) &
bench_build=$!
# A build left by an earlier script on a warm machine is reused.
[ -f "$build/build.ninja" ] ||
    meson setup "$build" -Dbuildtype=release >/dev/null ||
    { echo "setup failed" >&3; exit 1; }
timeout 270 ninja -C "$build" >/dev/null || { ninja -C "$build" 2>&1 | tail -30 >&3; exit 1; }
echo "built: $(date +%T)" >&3
locus="$build/tools/locus"
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"
summary() {
    grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" |
        sed "s/^/$1 /" >&3
    grep -E ' (FAIL|TIMEOUT) ' "$build/meson-logs/testlog.txt" >&3
    cp "$build/meson-logs/testlog.txt" "$out/testlog-$1.txt"
}
timeout 150 meson test -C "$build" --no-rebuild --print-errorlogs --suite cuda
summary cuda
f64_tests=$(meson test -C "$build" --list 2>/dev/null | grep -i f64 |
    sed 's/.* \/ //' | tr '\n' ' ')
echo "f64 tests: $f64_tests" >&3
if [ -n "$f64_tests" ]; then
    # shellcheck disable=SC2086
    timeout 90 meson test -C "$build" --no-rebuild --print-errorlogs $f64_tests
    summary f64
fi
grep -E "cuda_f64|device_f64" "$build/meson-logs/testlog.txt" | head -5 >&3
wait "$bench_build"
if [ -x /tmp/f64_bench ]; then
    echo "=== f64_bench" >&3
    timeout 120 /tmp/f64_bench >"$out/f64-bench.txt" 2>&1
    echo "f64_bench exit $?" >&3
    grep -E "FAIL|4096 4096 4096 pad 0|8192|reduce|failures|^device|^table" \
        "$out/f64-bench.txt" >&3
else
    tail -20 "$out/f64-bench-build.txt" >&3
fi
if "$locus" bench --help 2>&1 | grep -q -- --dtype; then
    for op in "gemm --size 4096,8192" "reduce --size 16777216,268435456"; do
        echo "=== locus bench $op --dtype f64" >&3
        # shellcheck disable=SC2086
        timeout 60 "$locus" bench $op --device cuda:0 --dtype f64 2>&1 |
            grep -E "^(reduce|gemm) |rror" >&3
    done
else
    echo "locus bench takes no --dtype yet: f64_bench's figures only" >&3
fi
echo "done $(date +%T)" >&3
