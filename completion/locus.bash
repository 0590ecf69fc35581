# Bash completion for `locus`, installed as
# share/bash-completion/completions/locus (docs/BUILDING.md).
#
# Everything is read from the tool itself at completion time, so that it
# says what the tool says: the commands from `locus --help`, each command's
# options from its --help (an option followed by an upper-case word, as in
# "--size LIST", takes a value), the bench subcommands from the usage of
# `locus bench --help`, and the devices for --device and --devices from
# `locus info --json` (each device's selector, each NUMA node's cpu:numa=N,
# auto, and all for bench), kept for a minute. The `locus` run is the one
# on the command line (./build/tools/locus completes as itself).
#
# Needs no bash-completion library: the words are split from COMP_LINE, so
# that "cuda:0" and "--device=cpu" are one word whatever COMP_WORDBREAKS
# holds, and each candidate is cut to the part readline replaces.

# _locus_help LOCUS WORDS...: the --help text of `locus WORDS...`.
_locus_help() {
    local locus=$1
    shift
    "$locus" "$@" --help 2>/dev/null
}

# _locus_commands LOCUS: the commands of `locus --help`.
_locus_commands() {
    _locus_help "$1" | sed -n '/^commands:$/,/^$/s/^  \([a-z][a-z-]*\)  .*/\1/p'
}

# _locus_bench_subcommands LOCUS: reduce gemm conv sched split first-op
# pipeline, from the lines of the usage that start with "locus bench".
_locus_bench_subcommands() {
    _locus_help "$1" bench |
        sed -n 's/^\(usage:\| \{6\}\) locus bench \([a-z|-]*\) .*/\2/p' | tr '|' '\n'
}

# _locus_options LOCUS WORDS...: one line per option of that command,
# "NAME" or "NAME VALUE" when it takes a value ("-h, --help" gives both
# names).
_locus_options() {
    _locus_help "$@" | sed -n \
        -e 's/^  *\(-[A-Za-z]\), \(--[a-z0-9-]*\)\( [A-Z][A-Z:_]*\)\{0,1\}.*/\1\3\n\2\3/p' \
        -e 's/^  *\(--[a-z0-9-]*\)\( [A-Z][A-Z:_]*\)\{0,1\}\(  .*\)\{0,1\}$/\1\2/p'
}

# _locus_devices LOCUS BENCH: the device selectors (BENCH 1: with "all").
_locus_devices() {
    local locus=$1
    if [[ $locus != "${_locus_devices_key-}" ||
        $((SECONDS - ${_locus_devices_time:-0})) -ge 60 ]]; then
        local json
        json=$("$locus" info --json 2>/dev/null)
        _locus_devices_list=$(
            printf '%s\n' "$json" | grep -o '"selector": *"[^"]*"' |
                sed 's/.*"\([^"]*\)"$/\1/'
            printf '%s\n' "$json" | sed -n '/"nodes": \[/,/^  \]/p' |
                grep -o '"id": *[0-9]*' | sed 's/.*: *\([0-9]*\)/cpu:numa=\1/'
        )
        _locus_devices_key=$locus
        _locus_devices_time=$SECONDS
    fi
    # Each once: a synthetic topology's cpu:numa=N are devices as well.
    {
        printf '%s\n' auto "$_locus_devices_list"
        [[ $2 == 1 ]] && printf '%s\n' all
    } | awk '!seen[$0]++'
}

_locus() {
    COMPREPLY=()
    local line=${COMP_LINE:0:COMP_POINT}
    local -a words
    read -r -a words <<<"$line"
    # The word under the cursor, "" after a blank.
    local cur=""
    if [[ $line != *[[:space:]] && ${#words[@]} -gt 0 ]]; then
        cur=${words[${#words[@]} - 1]}
        unset 'words[${#words[@]}-1]'
    fi
    local locus=${words[0]/#\~/$HOME}
    command -v "$locus" >/dev/null 2>&1 || return 0

    # The command words (locus bench sched) and the word before cur.
    local -a path=()
    local i prev=${words[${#words[@]} - 1]}
    for ((i = 1; i < ${#words[@]}; i++)); do
        [[ ${words[i]} == -* ]] && break
        if [[ ${#path[@]} -eq 0 || (${path[0]} == bench && ${#path[@]} -eq 1) ]]; then
            path+=("${words[i]}")
        fi
    done
    [[ ${path[0]-} == help ]] && path=()
    # Bench's ops (reduce, gemm, conv) share bench's own --help.
    if [[ ${path[0]-} == bench && ${path[1]-} =~ ^(reduce|gemm|conv)$ ]]; then
        path=(bench)
    fi

    local -a candidates=()
    local head="" value_option=""
    if [[ $cur == --*=* ]]; then
        value_option=${cur%%=*}
        head=${cur%%=*}=
    elif [[ $prev == -* && $cur != -* ]]; then
        value_option=$prev
    fi
    if [[ -n $value_option ]]; then
        # Only an option that takes a value gets its value completed.
        if ! _locus_options "$locus" "${path[@]}" | grep -qx -- "$value_option [A-Z:_]*"; then
            value_option=""
            head=""
        fi
    fi

    if [[ -n $value_option ]]; then
        local value=${cur#"$head"}
        case $value_option in
        --device)
            mapfile -t candidates < <(_locus_devices "$locus" \
                "$([[ ${path[0]-} == bench ]] && echo 1)")
            ;;
        --devices)
            # A comma list of devices (no auto): the item being typed.
            [[ $value == *,* ]] && head+=${value%,*},
            mapfile -t candidates < <(_locus_devices "$locus" 0 | grep -vx auto)
            ;;
        --svg)
            mapfile -t candidates < <(compgen -f -- "$value")
            ;;
        *)
            return 0
            ;;
        esac
    elif [[ ${#words[@]} -eq 1 && $cur != -* ]]; then
        mapfile -t candidates < <(_locus_commands "$locus")
    elif [[ ${words[1]-} == help && ${#words[@]} -eq 2 ]]; then
        mapfile -t candidates < <(_locus_commands "$locus")
    elif [[ ${words[1]-} == bench && ${#words[@]} -eq 2 && $cur != -* ]]; then
        mapfile -t candidates < <(_locus_bench_subcommands "$locus")
    elif [[ ${#words[@]} -eq 1 ]]; then
        candidates=(--help --version)
    else
        mapfile -t candidates < <(_locus_options "$locus" "${path[@]}" | cut -d' ' -f1)
    fi

    # Keep those that extend what is typed, less the part before the last
    # character readline breaks words at (':' and '=' by default), which
    # it does not replace.
    local full typed=$cur cut=0
    local breaks=${COMP_WORDBREAKS-$' \t\n"\'><=;|&(:'}
    for ((i = ${#typed} - 1; i >= 0; i--)); do
        if [[ $breaks == *"${typed:i:1}"* ]]; then
            cut=$((i + 1))
            break
        fi
    done
    for full in "${candidates[@]}"; do
        full=$head$full
        [[ -n $full && $full == "$typed"* ]] && COMPREPLY+=("${full:cut}")
    done
    return 0
}
complete -o default -F _locus locus
