#!/bin/sh
# SPDX-License-Identifier: MIT
# fetch-testdata.sh [-o DIR] [--github-url URL] [--hf-url URL] [--manifest FILE]
#
# Download the third-party test files of scripts/testdata.manifest (real PyTorch memory
# snapshots from public GitHub repositories, config.json files of public Hugging Face models)
# from their sources at the pinned revisions, check each one's sha256, and derive the two
# re-pickled variants.  Into DIR: $GPUMEM_TESTDATA when set, else build/testdata, where the
# tests look (tests/needs.sh).  Files already there with the right sha256 are kept.
#
#   --github-url URL  base of raw GitHub files (default https://raw.githubusercontent.com):
#                     URL/OWNER/REPO/COMMIT/PATH
#   --hf-url URL      base of the Hugging Face Hub (default https://huggingface.co):
#                     URL/MODEL/resolve/REVISION/PATH; $HF_TOKEN is sent when set (gated
#                     models: Llama, Gemma, Mistral ask you to accept their licence first)
# Both may be file:// URLs of a local mirror with the same layout (tests/testdata/ does that).
#   --manifest FILE   another list in the format of scripts/testdata.manifest
# Exit status: 0 every file present and checked, 1 a download or a check failed, 64 usage.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
manifest=$root/scripts/testdata.manifest
dest=${GPUMEM_TESTDATA:-$root/build/testdata}
github=https://raw.githubusercontent.com
hf=https://huggingface.co

usage() { sed -n '3,/^set -eu/{/^#/s/^# \{0,1\}//p}' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
    -o | --output) [ $# -ge 2 ] || { usage >&2; exit 64; }; dest=$2; shift 2 ;;
    --github-url) [ $# -ge 2 ] || { usage >&2; exit 64; }; github=${2%/}; shift 2 ;;
    --hf-url) [ $# -ge 2 ] || { usage >&2; exit 64; }; hf=${2%/}; shift 2 ;;
    --manifest) [ $# -ge 2 ] || { usage >&2; exit 64; }; manifest=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "fetch-testdata.sh: unknown argument '$1'" >&2; usage >&2; exit 64 ;;
    esac
done
for tool in curl sha256sum python3; do
    command -v "$tool" >/dev/null 2>&1 || { echo "fetch-testdata.sh: '$tool' is needed (scripts/install-deps.sh)" >&2; exit 1; }
done

mkdir -p "$dest/snapshots" "$dest/configs"
dest=$(cd "$dest" && pwd)
part=$(mktemp "$dest/.fetch-XXXXXX")
trap 'rm -f "$part"' EXIT INT TERM

sha() { sha256sum "$1" | cut -d' ' -f1; }

# derive HOW FROM OUT: the variants made from a checked file (only plain data is unpickled)
derive() {
    python3 - "$1" "$2" "$3" <<'PY'
import pickle, sys
how, src, out = sys.argv[1:4]
data = open(src, "rb").read()
class PlainData(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("%s.%s: not plain data" % (module, name))
if how == "pickle-protocol-2":      # re-pickled by CPython's pickle.dump(protocol=2)
    import io
    res = pickle.dumps(PlainData(io.BytesIO(data)).load(), protocol=2)
elif how == "proto-byte-5":         # the same bytes with PROTO 5 (what Python 3.14 writes)
    res = bytearray(data)
    res[1] = 5
    res = bytes(res)
else:
    sys.exit("unknown derivation '%s'" % how)
open(out, "wb").write(res)
PY
}

fetched=0 kept=0 failed=0
while read -r file want kind a b c; do
    case $file in '' | '#'*) continue ;; esac
    out=$dest/$file
    if [ -f "$out" ] && [ "$(sha "$out")" = "$want" ]; then
        kept=$((kept + 1))
        continue
    fi
    case $kind in
    github) url=$github/$a/$b/$c ;;
    huggingface) url=$hf/$a/resolve/$b/$c ;;
    derive) url="$b ($a)" ;;
    *) echo "fetch-testdata.sh: $file: unknown source '$kind' in $manifest" >&2; exit 1 ;;
    esac
    ok=1
    if [ "$kind" = derive ]; then
        derive "$a" "$dest/$b" "$part" || ok=0
    elif [ "$kind" = huggingface ] && [ -n "${HF_TOKEN:-}" ]; then
        curl -fsSL --retry 2 -H "Authorization: Bearer $HF_TOKEN" -o "$part" "$url" || ok=0
    else
        curl -fsSL --retry 2 -o "$part" "$url" || ok=0
    fi
    if [ $ok = 0 ]; then
        echo "FAILED $file: could not get $url" >&2
        [ "$kind" = huggingface ] && [ -z "${HF_TOKEN:-}" ] &&
            echo "       (a gated model? accept its licence on huggingface.co and set HF_TOKEN)" >&2
        failed=$((failed + 1))
        continue
    fi
    got=$(sha "$part")
    if [ "$got" != "$want" ]; then
        echo "FAILED $file: sha256 $got, expected $want (from $url)" >&2
        failed=$((failed + 1))
        continue
    fi
    mv "$part" "$out"
    chmod 0644 "$out"
    part=$(mktemp "$dest/.fetch-XXXXXX")
    echo "ok $file"
    fetched=$((fetched + 1))
done <"$manifest"

echo "$dest: $fetched fetched, $kept already present, $failed failed"
[ $failed = 0 ]
