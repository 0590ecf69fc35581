# Sourced by the install tests: installs the build into a new scratch
# DESTDIR, removed on exit, and sets
#   scratch  the scratch folder
#   root     the installed prefix inside it ($scratch$prefix)
#   lib      its libdir
# and fail(). The caller sets build, prefix and libdir first.
# shellcheck shell=sh
# shellcheck disable=SC2154,SC2034 # build, prefix, libdir: the caller's; user_ld_library_path: for it
fail() { echo "FAIL: $*" >&2; exit 1; }

scratch=$(mktemp -d /tmp/locus-install-XXXXXX)
# shellcheck disable=SC2064 # the folder is known now
trap "rm -rf '$scratch'" EXIT
meson install -C "$build" --destdir "$scratch" --quiet --no-rebuild \
    >"$scratch/install.log" 2>&1 ||
    { cat "$scratch/install.log" >&2; fail "meson install"; }
rm -f "$scratch/install.log"
root="$scratch$prefix"
lib="$root/$libdir"

# The .pc files name the real prefix; a pkg-config first on PATH
# ($scratch/bin) points its output at the scratch root, so that documented
# command lines run as written. run_line then runs one such line in a
# folder (default $scratch) with that PATH, no LD_LIBRARY_PATH and
# PKG_CONFIG_PATH at the scratch install.
real_pkg_config=$(command -v pkg-config) || fail "no pkg-config"
mkdir "$scratch/bin"
# shellcheck disable=SC2016 # the wrapper expands them, not this shell
printf '#!/bin/sh\nset -e\nout=$("%s" "$@")\necho "$out" | sed "s|%s|%s|g"\n' \
    "$real_pkg_config" "$prefix" "$root" >"$scratch/bin/pkg-config"
chmod +x "$scratch/bin/pkg-config"
export PKG_CONFIG_PATH="$lib/pkgconfig"
user_ld_library_path=${LD_LIBRARY_PATH:-}
unset LD_LIBRARY_PATH
# run_line LINE [FOLDER]
run_line() {
    (cd "${2:-$scratch}" && PATH="$scratch/bin:$PATH" sh -eu -c "$1")
}
