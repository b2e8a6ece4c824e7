#!/usr/bin/env bash
# --help on every psring binary (issue 24): exit code 0, the usage on stdout, and every flag the binary
# defines (every flag --helpfull lists outside Abseil's own files) listed; an unknown flag still exits 1 with
# Abseil's error on stderr.
#   tests/help_flags_test.sh BINARY...
set -uo pipefail
dir="${TEST_TMPDIR:-/tmp}"
failures=0

# The flag names of a help text, from "Flags from FILE:" sections whose FILE is not Abseil's (all: every one).
flag_names() {
  awk -v all="$2" '
    /^ *Flags from / { ours = (all == "all") || ($0 !~ /absl/); next }
    ours && match($0, /^ +--[a-z0-9_]+ /) { print substr($0, RSTART, RLENGTH) }
  ' "$1" | tr -d ' -' | sort -u
}

for binary in "$@"; do
  name="$(basename "$binary")"
  timeout 30 "$binary" --help >"$dir/help.out" 2>"$dir/help.err" </dev/null
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $name --help exited $rc (0 expected)"
    failures=$((failures + 1))
    continue
  fi
  if ! grep -q "Flags from" "$dir/help.out"; then
    echo "FAIL: $name --help printed no flags on stdout"
    failures=$((failures + 1))
  fi
  timeout 30 "$binary" --helpfull >"$dir/helpfull.out" 2>&1 </dev/null
  missing="$(comm -23 <(flag_names "$dir/helpfull.out" ours) <(flag_names "$dir/help.out" all))"
  if [ -n "$missing" ]; then
    echo "FAIL: $name --help does not list: $(echo $missing)"
    failures=$((failures + 1))
  fi
  if [ -z "$(flag_names "$dir/helpfull.out" ours)" ]; then
    echo "FAIL: $name --helpfull lists no flag of its own (the check above would pass for nothing)"
    failures=$((failures + 1))
  fi
  timeout 30 "$binary" --no_such_flag_anywhere >"$dir/bad.out" 2>"$dir/bad.err" </dev/null
  rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q "no_such_flag_anywhere" "$dir/bad.err"; then
    echo "FAIL: $name --no_such_flag_anywhere: exit $rc (1 expected) and stderr: $(head -2 "$dir/bad.err")"
    failures=$((failures + 1))
  fi
done
echo "$# binaries, $failures failures"
[ "$failures" -eq 0 ]
