#!/bin/sh
# Instructions per small op, counted by callgrind (no wall clock: the
# figure does not depend on the machine's load), for one build of Locus.
#
#   sh scripts/perf/op-instructions.sh BUILD_DIR [SOURCE_DIR] [COUNT]
#
# BUILD_DIR holds runtime/liblocus.so (a release build without -g: with
# debug info callgrind splits a function's inclusive cost by the files its
# inlined lines come from, and the backend column reads short); SOURCE_DIR
# is the tree it was built from (default: this one), whose include/ the
# driver (op_overhead.c, beside this script) is compiled against. For reduce 1024
# and gemm 32 on the cpu, with a record as `locus bench` asks, and for
# reduce 1024 left to the scheduler (auto), it prints instructions per op
# in all, in the CPU backend's op function (the kernel and what it calls)
# and the rest: the runtime's path. Then the costliest functions of that
# path for reduce 1024. Comparing two builds: run it on each.
set -eu
build=$(cd "$1" && pwd)
source=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
count=${3:-2000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -std=c17 -I"$source/include" -I"$build/include" \
    "$(dirname "$0")/op_overhead.c" -o "$work/op_overhead" \
    -L"$build/runtime" -Wl,-rpath,"$build/runtime" -llocus
# Ir of a run, and Ir inclusive in the backend's op function.
count_ir() { # output file, backend function
    total=$(callgrind_annotate "$1" 2>/dev/null |
        awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
    kernel=$(callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
        awk -v f="$2" '$0 ~ (":" f " ") { gsub(",", "", $1); print $1; exit }')
    echo "${total:-0} ${kernel:-0}"
}
# The op once (its first-use costs) against the op 1 + count times: the
# difference over count is one warm op.
run() { # name, entry point, backend function, op, size, device
    name=$1 entry=$2 backend=$3
    for n in 0 "$count"; do
        out="$work/$name.$n.out"
        env -u LOCUS_RECORD valgrind --tool=callgrind \
            --callgrind-out-file="$out" --toggle-collect="$entry" \
            "$work/op_overhead" "$4" "$5" "$n" "$6" >"$work/$name.log" 2>&1 ||
            { cat "$work/$name.log"; exit 1; }
    done
    set -- $(count_ir "$work/$name.0.out" "$backend") \
        $(count_ir "$work/$name.$count.out" "$backend")
    all=$((($3 - $1) / count)) kernel=$((($4 - $2) / count))
    echo "$name: $all instructions per op, $kernel in $backend," \
        "$((all - kernel)) outside it"
}
run reduce-1024-cpu locus_reduce locus__cpu_reduce reduce 1024 cpu
run gemm-32-cpu locus_gemm locus__cpu_gemm gemm 32 cpu
run reduce-1024-auto locus_reduce locus__cpu_reduce reduce 1024 auto
echo "--- reduce 1024 cpu: the costliest functions (self, per op)"
callgrind_annotate "$work/reduce-1024-cpu.$count.out" 2>/dev/null |
    awk -v n=$((count + 1)) '/^-+$/ { s++; next }
        s >= 3 && $1 ~ /^[0-9,]+$/ && shown < 25 {
            c = $1; gsub(",", "", c); $1 = ""; $2 = "";
            printf "%8.1f %s\n", c / n, $0; shown++ }'
