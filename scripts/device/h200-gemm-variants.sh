#!/bin/sh
# What-if builds of the CPU GEMM's worker grid and cache blocking on the
# 16-core host (#22, #24): each variant edits a copy of this tree
# (backends/cpu/gemm.c's choose_grid, gemm_blocking.c's sizes), rebuilds
# only the CPU backend and the tool, and benches f32 and f64 at 2048 and
# 4096 with 16 and 4 workers. The system's OpenBLAS is the only reference
# (the bench's MKL and OpenBLAS 0.3.34 are left out to keep the call
# short: the variants are compared with each other, in one run).
# Output on stdout.
set -u
copy=/tmp/locus-variants
rm -rf "$copy" && mkdir -p "$copy" && cp -r backends include runtime tools tests \
    examples bindings meson.build meson_options.txt "$copy"/ 2>/dev/null
cp -r cmake man completion docs "$copy"/ 2>/dev/null
build=/tmp/locus-variants-build
meson setup "$build" "$copy" -Dbuildtype=release -Dcuda=disabled -Dopencl=disabled -Dtests=false \
    >/dev/null 2>&1 || meson setup "$build" "$copy" -Dbuildtype=release \
    -Dcuda=disabled >/dev/null || exit 1
for i in 0 2 3; do
    f=/sys/devices/system/cpu/cpu0/cache/index$i/size
    [ -f "$f" ] && echo "cache index$i: $(cat $f)"
done
variant() { # name python-edit
    name=$1
    (cd "$copy" && python3 -c "$2") || { echo "=== $name: edit failed"; return; }
    ninja -C "$build" tools/locus >/dev/null 2>&1 || { echo "=== $name: build failed"; ninja -C "$build" tools/locus | tail -5; return; }
    for threads in 16 4; do
        for dtype in f32 f64; do
            sizes=2048,4096
            [ "$threads" = 4 ] && sizes=4096
            LOCUS_THREADS=$threads timeout 60 "$build/tools/locus" bench gemm --device cpu \
                --dtype $dtype --size $sizes --repeat 3 |
                grep -E "^gemm" | sed "s/^/$name t$threads /"
        done
    done
}
edit() { # file old new
    printf 'p="%s"\ns=open(p).read()\nold="""%s"""\nnew="""%s"""\nassert old in s, "no match in "+p\nopen(p,"w").write(s.replace(old,new))\n' "$1" "$2" "$3"
}
rows_first=$(edit backends/cpu/gemm.c '    group->col_ways = 1;
    for (int ways' '    group->col_ways = 1;
    if (row_panels >= (size_t)group->ranks)
        return;
    for (int ways')
variant base "pass"
variant rows "$rows_first"
variant rows-mc-l2 "$(edit backends/cpu/gemm_blocking.c 'b.mc = clamp_size(l3_share / 4' 'b.mc = clamp_size(l2 / 2')"
variant rows-mc-l2-nc2048 "$(edit backends/cpu/gemm_blocking.c '8192 / nr * nr);
    return' '2048 / nr * nr);
    return')"
variant rows-mc-l2-nc2048-kc3q "$(edit backends/cpu/gemm_blocking.c 'l1 / 2 / (mr * elem_size)' 'l1 * 3 / 4 / (mr * elem_size)')"
echo done
