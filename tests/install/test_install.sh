#!/bin/sh
# Installs the build into a scratch DESTDIR and uses it as a user would:
# the files land in the usual places; the README example builds with the
# README's own cc lines (locus and locus-static) and with
# `pkg-config --static`, and runs with no LD_LIBRARY_PATH; the MPI
# examples build with docs/MPI.md's own lines and run as two ranks; and
# the installed `locus` loads the modules beside its own liblocus, with no
# LOCUS_PLUGIN_PATH, even where another install sits at the configured
# prefix (./install.sh, then ./test.sh). The caller's LD_LIBRARY_PATH is
# kept after the installed lib for the tool: it may link optional bench
# libraries found through it.
# The man pages, bash completion and the CMake package land where man,
# bash-completion and find_package look.
# usage: test_install.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR MANDIR DATADIR
set -eu
build=$1 source=$2 prefix=$3 libdir=$4 mandir=$5 datadir=$6
. "$source/tests/install/scratch_install.sh"

for f in include/locus/locus.h include/locus/backend.h bin/locus; do
    [ -e "$root/$f" ] || fail "$f not installed"
done
for f in liblocus.so liblocus.a pkgconfig/locus.pc pkgconfig/locus-static.pc; do
    [ -e "$lib/$f" ] || fail "$libdir/$f not installed"
done
# The modules that this build made are installed beside the library.
for m in cuda opencl; do
    if [ -e "$build/backends/$m/locus-$m.so" ]; then
        [ -e "$lib/locus/locus-$m.so" ] || fail "locus-$m.so not installed"
    fi
done
# Every page the build wrote, where `man locus-bench` finds it.
pages=0
for page in "$build"/man/*.1; do
    name=$(basename "$page" .1)
    [ -e "$root/$mandir/man1/$name.1" ] || fail "$mandir/man1/$name.1 not installed"
    pages=$((pages + 1))
done
[ "$pages" -gt 1 ] || fail "the build wrote no man pages"
if command -v man >/dev/null; then
    found=$(MANPATH="$root/$mandir" man -w locus-bench) ||
        fail "man finds no locus-bench under $mandir"
    [ "$found" = "$root/$mandir/man1/locus-bench.1" ] ||
        fail "man -w locus-bench: $found"
fi
completion="$root/$datadir/bash-completion/completions/locus"
[ -e "$completion" ] || fail "$datadir/bash-completion/completions/locus not installed"
if command -v bash >/dev/null; then
    bash -c ". '$completion' && complete -p locus" | grep -q -- '-F _locus' ||
        fail "the installed completion does not complete locus"
fi
for f in LocusConfig.cmake LocusConfigVersion.cmake; do
    [ -e "$lib/cmake/Locus/$f" ] || fail "$libdir/cmake/Locus/$f not installed"
done
# liblocus links no GPU library; only modules do.
if readelf -d "$lib/liblocus.so" | grep -Eq 'libcuda|libcudart|libOpenCL'; then
    fail "liblocus.so links a GPU library"
fi

# The README's example, built with the README's very `cc` lines and run
# with no LD_LIBRARY_PATH: the rpath in locus.pc must find the library
# (scratch_install.sh's pkg-config and run_line run them as written).
python3 "$source/tests/readme/extract_example.py" "$source/README.md" \
    "$scratch/example.c"
# readme_line PACKAGE: the README's cc line for that pkg-config package.
readme_line() {
    grep -m1 -F "    cc -std=c17 example.c \$(pkg-config --cflags --libs $1) " \
        "$source/README.md" | sed 's/^    //'
}
shared_line=$(readme_line locus)
[ -n "$shared_line" ] || fail "README: no cc line with locus"
static_line=$(readme_line locus-static)
[ -n "$static_line" ] || fail "README: no cc line with locus-static"
run_line "$shared_line" || fail "the README example does not build: $shared_line"
readelf -d "$scratch/example" | grep -q 'liblocus\.so' ||
    fail "the README example does not link liblocus.so: $shared_line"
run_line ./example || fail "the README example does not run as built: $shared_line"

# locus-static: liblocus.a inside the program, no liblocus.so needed.
rm -f "$scratch/example"
run_line "$static_line" || fail "the README example does not build: $static_line"
if readelf -d "$scratch/example" | grep -q 'liblocus'; then
    fail "linked with locus-static, the example still needs liblocus.so"
fi
run_line ./example || fail "the statically linked example failed: $static_line"

# pkg-config --static on locus links as well (hwloc's -ludev: libudev-dev).
rm -f "$scratch/example"
# shellcheck disable=SC2016 # run_line expands it
static_flags_line='cc -std=c17 example.c $(pkg-config --static --cflags --libs locus) -o example'
run_line "$static_flags_line" || fail "the example does not link: $static_flags_line"
run_line ./example || fail "the example failed: $static_flags_line"

# The MPI examples, built against the install with docs/MPI.md's very
# lines (-lm among them), and run as two ranks on the CPU.
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mkdir -p "$scratch/examples/mpi"
    cp "$source/examples/mpi/mpi_sum.c" "$source/examples/mpi/mpi_gemm.c" \
        "$scratch/examples/mpi/"
    mpi_lines=$(grep -E '^    mpicc -std=c17 examples/mpi/mpi_(sum|gemm)\.c ' \
        "$source/docs/MPI.md" | sed 's/^    //')
    [ "$(echo "$mpi_lines" | grep -c mpicc)" -eq 2 ] ||
        fail "docs/MPI.md: not the two mpicc lines: $mpi_lines"
    sum_line=$(echo "$mpi_lines" | grep mpi_sum)
    gemm_line=$(echo "$mpi_lines" | grep mpi_gemm)
    run_line "$sum_line" || fail "docs/MPI.md's line fails: $sum_line"
    run_line "$gemm_line" || fail "docs/MPI.md's line fails: $gemm_line"
    for job in "./mpi_sum 100003" "./mpi_gemm 61 33 17"; do
        # shellcheck disable=SC2086
        out=$(cd "$scratch" && OMPI_ALLOW_RUN_AS_ROOT=1 \
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            OMPI_MCA_rmaps_base_oversubscribe=1 LOCUS_BACKENDS=cpu \
            LOCUS_DEVICE=cpu mpirun -np 2 $job 2>&1) ||
            fail "mpirun -np 2 $job: $out"
        [ "$(echo "$out" | grep -c ': ok$')" -eq 2 ] ||
            fail "mpirun -np 2 $job: not two ok lines: $out"
        echo "mpirun -np 2 $job: two ranks ok"
    done
else
    echo "no mpicc or mpirun: the MPI examples were not built against the install"
fi

# The installed tool finds the installed modules by itself.
unset LOCUS_PLUGIN_PATH
info=$(LD_LIBRARY_PATH="$lib${user_ld_library_path:+:$user_ld_library_path}" "$root/bin/locus" info --json) ||
    fail "installed locus info failed"
if [ -e "$lib/locus/locus-opencl.so" ]; then
    echo "$info" | grep -q "$lib/locus/locus-opencl.so" ||
        fail "installed locus did not load the installed opencl module"
fi
echo "install ok: $root"
