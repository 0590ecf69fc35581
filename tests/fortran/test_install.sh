#!/bin/sh
# The Fortran module as a user meets it: after a scratch DESTDIR install,
# consumer.f90 is compiled with `$FC $(pkg-config --cflags --libs
# locus-fortran)`, finding locus.mod in <includedir>/locus, and runs with
# no LD_LIBRARY_PATH.
# usage: test_install.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR FC
set -eu
build=$1 source=$2 prefix=$3 libdir=$4 fc=$5
. "$source/tests/install/scratch_install.sh"

for module in locus.mod locus_c.mod; do
    [ -e "$root/include/locus/$module" ] ||
        fail "$module not installed in include/locus"
done
[ -e "$lib/pkgconfig/locus-fortran.pc" ] || fail "no locus-fortran.pc"
cp "$source/tests/fortran/consumer.f90" "$scratch/"
run_line "$fc consumer.f90 -o consumer \$(pkg-config --cflags --libs locus-fortran)" ||
    fail "building consumer.f90 against the install"
out=$(LOCUS_BACKENDS=cpu "$scratch/consumer" 2>&1) || fail "consumer: $out"
echo "$out"
echo "$out" | grep -q 'c = *23.0 *34.0 *31.0 *46.0' || fail "consumer printed: $out"
echo "fortran module installed: ok"
