#!/bin/sh
# The installed examples as a user meets them: every example of the source
# tree's examples/ is installed under share/doc/locus/examples (and nothing
# else is), and each is built and run in a copy of that folder with the
# very commands its top comment gives ("$ " lines, example_commands.py),
# against a scratch DESTDIR install, with no LD_LIBRARY_PATH. The
# installed modules are loaded (LOCUS_PLUGIN_PATH at the scratch install),
# so that the examples meet the devices this build serves. The MPI
# examples need mpicc and mpirun; without them they are listed as not
# run.
# usage: test_examples.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR DATADIR
set -eu
build=$1 source=$2 prefix=$3 libdir=$4 datadir=$5
. "$source/tests/install/scratch_install.sh"

installed="$root/$datadir/doc/locus/examples"
[ -d "$installed" ] || fail "$datadir/doc/locus/examples not installed"
want=$(cd "$source/examples" && find . -name '*.c' | sort)
got=$(cd "$installed" && find . -type f | sort)
[ "$want" = "$got" ] ||
    fail "installed examples differ from examples/: want
$want
got
$got"

cp -r "$installed" "$scratch/examples"
export LOCUS_PLUGIN_PATH="$lib/locus"
# Open MPI refuses root (CI) without these, and two ranks on fewer cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
have_mpi=false
command -v mpicc >/dev/null && command -v mpirun >/dev/null && have_mpi=true

ran=0
for example in $want; do
    folder="$scratch/examples/$(dirname "$example")"
    commands=$(python3 "$source/tests/install/example_commands.py" \
        "$folder/$(basename "$example")") || fail "$example: no commands"
    case $example in
    ./mpi/*)
        if [ "$have_mpi" = false ]; then
            echo "$example: not run (no mpicc or mpirun)"
            continue
        fi
        ;;
    esac
    echo "$commands" | while IFS= read -r command; do
        echo "$example: \$ $command"
        run_line "$command" "$folder" || fail "$example: $command"
    done
    ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || fail "no example ran"
echo "examples ok: $ran run"
