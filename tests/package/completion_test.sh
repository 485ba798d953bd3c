#!/bin/sh
# SPDX-License-Identifier: MIT
# completion_test.sh BUILD - the generated shell completions (BUILD/completions, made by
# scripts/gen-completions.py from the binary's option tables) complete what the binary takes.
# bash: the script is sourced and _gpumem called with COMP_WORDS as bash would fill them:
# commands, snapshot subcommands, each command's options, a choice's values, GPU and model
# names from the catalogs, files for a FILE, nothing for a number, the program after "--".
# zsh: the script's syntax (zsh -n), then _gpumem run with the completion functions it calls
# replaced by ones that print what they were given (_describe, _arguments), as zsh would call it.
set -u
BUILD=$(cd "$1" && pwd)
bash_script=$BUILD/completions/gpumem.bash
zsh_script=$BUILD/completions/_gpumem
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
[ -f "$bash_script" ] && [ -f "$zsh_script" ] || { echo "FAIL no completions in $BUILD/completions"; exit 1; }

# complete WORD... : what _gpumem offers for the last word (COMP_CWORD = the last index)
cat >"$work/complete.bash" <<EOF2
. '$bash_script'
COMP_WORDS=("\$@")
COMP_CWORD=\$((\${#COMP_WORDS[@]} - 1))
_gpumem
printf '%s\n' "\${COMPREPLY[@]}" | sort -u
EOF2
c() { (cd "$work" && bash "$work/complete.bash" "$@"); }
expect() {  # expect "WORDS" WANT... : each WANT is offered
    words=$1
    shift
    got=$(c $words "" 2>&1)
    for w in "$@"; do
        echo "$got" | grep -qx -- "$w" || fail "bash: '$words <TAB>' lacks '$w' (got: $(echo "$got" | tr '\n' ' ' | cut -c1-200))"
    done
}
prefix() {  # prefix "WORDS" CUR WANT...: completing CUR gives exactly WANT...
    words=$1 cur=$2
    shift 2
    got=$(c $words "$cur" 2>&1 | tr '\n' ' ')
    [ "$got" = "$* " ] || fail "bash: '$words $cur<TAB>' gave '$got', expected '$* '"
}
: >"$work/run.pickle"
mkdir "$work/outdir"
prefix "gpumem" "est" estimate
prefix "gpumem snapshot" "pe" peak
prefix "gpumem estimate" "--prec" --precision
prefix "gpumem estimate --precision" "bf" bf16 bf16-mixed
prefix "gpumem estimate --gpu" "H1" H100-80GB H100-NVL
prefix "gpumem estimate" "gpt-neo" gpt-neox-20b
prefix "gpumem snapshot peak" "--fo" --folded
prefix "gpumem snapshot peak" "ru" run.pickle
prefix "gpumem snapshot report x.pickle -o" "ou" outdir
prefix "gpumem snapshot peak --top" "" ""
prefix "gpumem watch --" "basenam" basename
prefix "gpumem estimate --color" "n" never
prefix "gpumem estimate --optimizer" "adamw" adamw adamw-8bit
expect "gpumem" estimate calibrate snapshot environment watch measure sweep sheet version
expect "gpumem snapshot" info stats trace peak categories leaks diff oom replay report plot example
expect "gpumem estimate" llama-3-8b meta-llama/Meta-Llama-3-8B run.pickle
# every option of every command, as --list-options gives it
for cmd in estimate calibrate environment watch measure sweep sheet version "snapshot peak" "snapshot replay"; do
    for opt in $("$GPUMEM" $cmd --list-options | cut -f1); do
        got=$(c gpumem $cmd "$opt" | tr '\n' ' ')
        case " $got" in *" $opt "*) ;; *) fail "bash: '$cmd $opt' not completed (got: $got)" ;; esac
    done
done

# zsh
if command -v zsh >/dev/null 2>&1; then
    zsh -n "$zsh_script" || fail "zsh -n: $zsh_script"
    cat >"$work/complete.zsh" <<EOF2
_describe() { print -r -- "describe \$2"; print -rl -- \${(P)\${@[-1]}} }
_arguments() { print -r -- "arguments"; print -rl -- "\$@" }
words=("\$@")
CURRENT=\${#words}
. '$zsh_script'
EOF2
    z() { zsh -f "$work/complete.zsh" "$@" 2>&1; }
    z gpumem "" | grep -q '^estimate:predict peak GPU memory' || fail "zsh: no commands with their summary: $(z gpumem '' | head -3)"
    z gpumem snapshot "" | grep -q '^peak:' || fail "zsh: no snapshot subcommands"
    out=$(z gpumem estimate --prec)
    echo "$out" | grep -q '^arguments$' || fail "zsh: estimate options not given to _arguments: $(echo "$out" | head -3)"
    echo "$out" | grep -q '^--precision\[training precision (default bf16-mixed)\]:value:(fp32 fp16-mixed bf16-mixed bf16)$' ||
        fail "zsh: --precision and its choices"
    echo "$out" | grep -q '^--gpu\[.*\]:NAME:(\$_gpumem_gpus)$' || fail "zsh: --gpu completes the GPU catalog"
    echo "$out" | grep -q '^\*:model or file:_gpumem_model_or_file$' || fail "zsh: estimate's MODEL"
    out=$(z gpumem snapshot peak --fo)
    echo "$out" | grep -q '^--folded\[' || fail "zsh: snapshot peak's --folded"
    echo "$out" | grep -q '^(--top -n)--top\[' && echo "$out" | grep -q '^(--top -n)-n\[' ||
        fail "zsh: -n and --top, either one once"
    echo "$out" | grep -q '^\*:file:_files$' || fail "zsh: snapshot peak's FILE"
    n=$(z gpumem estimate -- | grep -c '^--\|^(--')
    m=$("$GPUMEM" estimate --list-options | wc -l)
    [ "$n" -ge "$m" ] || fail "zsh: $n option specs for estimate, --list-options has $m"
else
    echo "zsh is not installed (Debian: zsh): its completion is not checked"
fi

[ $fails = 0 ] && echo "ok: bash and zsh completions complete what the option tables hold"
exit $((fails > 0))
