#!/bin/sh
# The CMake package as a CMake user meets it: the consumer project
# (tests/install/cmake_consumer) is configured with find_package(Locus 0.2
# REQUIRED) against a scratch DESTDIR install, built with Locus::locus and
# Locus::locus_static, and both programs run with no LD_LIBRARY_PATH (the
# build tree's RPATH finds liblocus.so). Versions the install does not
# satisfy (the next major, the next minor) must be refused at configure
# time.
# usage: test_cmake.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR CMAKE
set -eu
build=$1 source=$2 prefix=$3 libdir=$4 cmake=$5
. "$source/tests/install/scratch_install.sh"

config="$lib/cmake/Locus"
for f in LocusConfig.cmake LocusConfigVersion.cmake; do
    [ -e "$config/$f" ] || fail "$libdir/cmake/Locus/$f not installed"
done
consumer="$source/tests/install/cmake_consumer"
unset LD_LIBRARY_PATH

# configure NAME [ARGS...]: configures the consumer in $scratch/NAME.
configure() {
    name=$1
    shift
    "$cmake" -S "$consumer" -B "$scratch/$name" -DCMAKE_PREFIX_PATH="$root" \
        -DCMAKE_BUILD_TYPE=Release "$@" >"$scratch/$name.log" 2>&1
}

configure ok || { cat "$scratch/ok.log" >&2; fail "cmake configure"; }
version=$(sed -n 's/^-- Locus \([0-9.]*\) from .*/\1/p' "$scratch/ok.log")
[ -n "$version" ] || fail "the consumer printed no Locus version"
"$cmake" --build "$scratch/ok" >"$scratch/build.log" 2>&1 ||
    { cat "$scratch/build.log" >&2; fail "cmake --build"; }
[ -x "$scratch/ok/consumer_static" ] ||
    fail "no Locus::locus_static target, though liblocus.a is installed"

readelf -d "$scratch/ok/consumer" | grep -q 'NEEDED.*\[liblocus\.so\.0\]' ||
    fail "consumer does not need liblocus.so.0"
if readelf -d "$scratch/ok/consumer_static" | grep -q 'liblocus'; then
    fail "consumer_static still needs liblocus.so"
fi
for program in consumer consumer_static; do
    out=$(LOCUS_BACKENDS=cpu "$scratch/ok/$program" 2>&1) ||
        fail "$program: $out"
    echo "$out"
done

# The next major and the next minor version are not this install.
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
for request in "$((major + 1)).0" "$major.$((minor + 1))"; do
    if configure "refused-$request" -DLOCUS_REQUEST="$request"; then
        fail "find_package(Locus $request) accepted version $version"
    fi
    grep -q "$version" "$scratch/refused-$request.log" ||
        fail "find_package(Locus $request) failed without naming $version"
    echo "find_package(Locus $request): refused"
done
echo "cmake package ok: Locus $version"
