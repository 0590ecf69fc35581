#!/bin/sh
# test_error_stop PROGRAM: it must stop with status 1 and say where and why.
out=$("$1" 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: exit status $rc, not 1"; exit 1; }
echo "$out" | grep -q '^locus: locus_reduce: buffer too small' ||
    { echo "FAIL: no 'locus: locus_reduce: buffer too small...' line"; exit 1; }
