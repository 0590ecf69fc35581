#!/usr/bin/env bash
# The bash completion (completion/locus.bash) sourced in bash and asked
# as readline would ask it (COMP_LINE, COMP_POINT, COMP_WORDBREAKS's
# default), on the `locus` of this build: commands, bench's subcommands,
# each command's own options, no value offered for an option that takes
# one but has no list, and the devices of --device as `locus info --json`
# lists them at completion time, under a synthetic two-node topology so
# that cpu:numa=1 must come from there; after "cpu:" only the part that
# readline replaces.
# usage: test_completion.sh SOURCE_DIR LOCUS
set -u
source_dir=$1 L=$2
# shellcheck source=../../completion/locus.bash
. "$source_dir/completion/locus.bash"
export LOCUS_TOPOLOGY='synthetic:node:2 core:1 pu:1'
failures=0

# complete LINE: COMPREPLY for the cursor at the end of LINE, one a line.
complete_line() {
    COMP_LINE=$1
    COMP_POINT=${#1}
    read -r -a COMP_WORDS <<<"$1"
    [[ $1 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    _locus
    printf '%s\n' "${COMPREPLY[@]}" | sort
}

# expect LINE has|lacks|is WORDS...: checks COMPREPLY for the line.
expect() {
    local typed=$1 line="$L $1" how=$2 got word
    shift 2
    got=$(complete_line "$line")
    case $how in
    is)
        [[ $got == "$(printf '%s\n' "$@" | sort)" ]] || {
            echo "FAIL: '$line': got [${got//$'\n'/ }], want [$*]"
            failures=$((failures + 1))
            return
        }
        ;;
    has | lacks)
        for word in "$@"; do
            if grep -qxF -- "$word" <<<"$got"; then
                [[ $how == has ]] && continue
            else
                [[ $how == lacks ]] && continue
            fi
            echo "FAIL: '$line': [${got//$'\n'/ }] $how not '$word'"
            failures=$((failures + 1))
            return
        done
        ;;
    esac
    echo "ok: '$typed' -> [${got//$'\n'/ }]"
}

# The devices, read here from the JSON with python.
mapfile -t selectors < <("$L" info --json 2>/dev/null | python3 -c '
import json, sys
info = json.load(sys.stdin)
selectors = [d["selector"] for b in info["backends"] for d in b["devices"]]
selectors += ["cpu:numa=%d" % node["id"] for node in info["nodes"]]
print("\n".join(dict.fromkeys(selectors)))')
[[ " ${selectors[*]} " == *" cpu:numa=1 "* ]] ||
    { echo "FAIL: the synthetic topology gave no node 1: ${selectors[*]}"; exit 1; }

expect "" has info bench numa calibrate help
expect "be" is bench
expect "help ca" is calibrate
expect "bench " is reduce gemm conv sched split first-op pipeline
expect "bench gemm --re" is --repeat
expect "bench sched --" has --op --size --repeat --seed --json --help
expect "bench sched --" lacks --device --svg
expect "numa --" has --latency-bytes --no-measure --pid --json
expect "numa --" lacks --device
expect "info --json " is --json -h --help
expect "bench --size " is
expect "bench --device " is auto all "${selectors[@]}"
expect "calibrate --device " is auto "${selectors[@]}"
expect "bench --device cpu:" is numa=0 numa=1
expect "calibrate --device=cpu:numa=" is 0 1
expect "bench split --devices cpu,cpu:numa=" is 0 1
expect "bench split --devices c" has cpu cpu:numa=0
expect "bench split --devices c" lacks auto all

[[ $failures -eq 0 ]] || { echo "$failures failed"; exit 1; }
echo "completion ok"
