#!/usr/bin/env bash
# Record real Slurm outputs as parser fixtures: capture.sh RELEASE NAME COMMAND...
# writes RELEASE/NAME.txt: "# $ COMMAND", "# exit N", then stdout and "# stderr" with stderr.
set -uo pipefail
release=$1 name=$2; shift 2
mkdir -p "$(dirname "$0")/$release"
out=$(mktemp) err=$(mktemp)
"$@" >"$out" 2>"$err"; status=$?
{ printf '# $ %s\n# exit %d\n' "$*" "$status"; cat "$out"; printf '# stderr\n'; cat "$err"; } \
    > "$(dirname "$0")/$release/$name.txt"
rm -f "$out" "$err"
