#!/bin/sh
# Prepares the CPU BLAS references of `locus bench gemm` (MKL from the PyPI
# `mkl` wheel, a current OpenBLAS from `scipy-openblas32`) for a machine
# that cannot reach PyPI, such as the GPU machine: downloads the two wheels
# with pip, keeps only the shared libraries sgemm and dgemm need, and packs
# them into one xz archive small enough for the device tool's carry limit
# (64 MiB for the tree and everything carried).
#
#   scripts/prepare-references.sh [OUTDIR]      (default build-refs)
#
# OUTDIR/references.tar.xz unpacks into mkl/ and openblas/; on the other
# machine:
#   mkdir -p /tmp/locus-refs && tar -xJf build-refs/references.tar.xz -C /tmp/locus-refs
#   export LOCUS_BENCH_MKL=/tmp/locus-refs/mkl LOCUS_BENCH_OPENBLAS=/tmp/locus-refs/openblas
# OUTDIR/mkl and OUTDIR/openblas hold the same libraries unpacked, for this
# machine.
#
# MKL's wheel is about 1 GB unpacked. libmkl_rt loads, for a cblas_sgemm
# or cblas_dgemm (checked with LD_DEBUG=files): libmkl_core, the threading
# layer (the bench picks GNU's, libmkl_gnu_thread, on the system's
# libgomp), the LP64 interface libmkl_intel_lp64, and one CPU layer: on
# Sapphire Rapids libmkl_avx512, on AMD processors libmkl_def. The vector
# math libraries (libmkl_vml_*) are not needed for BLAS. All CPU layers
# do not fit the limit: MKL_CPU_LAYERS picks them (default "avx512", the
# GPU machine's host; "def" for AMD, "avx2" for older Intel).
#
# Versions: MKL_VERSION and OPENBLAS_VERSION pin them (pip's "==" form);
# by default the newest.
set -eu
out=${1:-build-refs}
layers=${MKL_CPU_LAYERS:-avx512}
mkl_spec=mkl${MKL_VERSION:+==$MKL_VERSION}
openblas_spec=scipy-openblas32${OPENBLAS_VERSION:+==$OPENBLAS_VERSION}

mkdir -p "$out/wheels"
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --dest "$out/wheels" "$mkl_spec" "$openblas_spec"
mkl_wheel=$(ls -t "$out"/wheels/mkl-*.whl | head -1)
openblas_wheel=$(ls -t "$out"/wheels/scipy_openblas32-*.whl | head -1)

rm -rf "$out/mkl" "$out/openblas"
mkdir -p "$out/mkl" "$out/openblas"
# Only the members needed, straight from the wheels (zip files): the
# soname's number changes between MKL releases (.so.2, .so.3).
want="rt core gnu_thread intel_lp64"
for layer in $layers; do want="$want $layer"; done
python3 - "$mkl_wheel" "$out/mkl" $want <<'PY'
import os, re, sys, zipfile
wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        pattern = re.compile(r".*/lib/libmkl_%s\.so\.[0-9]+$" % name)
        members = [m for m in z.namelist() if pattern.match(m)]
        if not members:
            sys.exit("prepare-references: no libmkl_%s in %s" % (name, wheel))
        with z.open(members[0]) as src, open(
                os.path.join(dest, os.path.basename(members[0])), "wb") as dst:
            dst.write(src.read())
PY
python3 - "$openblas_wheel" "$out/openblas" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    # The library and whatever the wheel bundles beside it (older
    # releases carried libgfortran).
    for m in z.namelist():
        if m.startswith("scipy_openblas32/lib/lib") and ".so" in m:
            with z.open(m) as src, open(
                    os.path.join(dest, os.path.basename(m)), "wb") as dst:
                dst.write(src.read())
PY

archive="$out/references.tar.xz"
tar -C "$out" -cf - mkl openblas | xz -9 -T0 >"$archive"
bytes=$(wc -c <"$archive")
echo "prepare-references: $(basename "$mkl_wheel") and $(basename "$openblas_wheel")"
echo "prepare-references: $archive: $((bytes / 1048576)) MiB ($bytes bytes), libraries: $(cd "$out" && ls mkl openblas | grep -v : | tr '\n' ' ')"
if [ "$bytes" -gt $((55 * 1048576)) ]; then
    echo "prepare-references: above 55 MiB: leaves too little of the 64 MiB carry for the tree; use fewer MKL_CPU_LAYERS" >&2
    exit 1
fi
