#!/usr/bin/env bash
# tools/bigger_host_run.sh on a fake bundle: flags, the suite's exit status and output directory, the budget's
# timeout, and clear errors for what is missing. Needs no root and no network.
set -uo pipefail
script="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }

help="$("$script" --help)"
check "--help exits 0" "[[ \$? -eq 0 ]]"
for flag in --budget --gpu_min --gpu_timeout --out --bench --gpu; do
  check "--help lists $flag" "grep -q -- '$flag=' <<<\"\$help\""
done
"$script" --bogus >/dev/null 2>"$tmp/err"
check "an unknown flag exits 2" "[[ \$? -eq 2 ]] && grep -q \"unknown flag '--bogus'\" '$tmp/err'"
"$script" --budget=60 >/dev/null 2>"$tmp/err"
check "no suite exits 2" "[[ \$? -eq 2 ]] && grep -q 'no suite' '$tmp/err'"
"$script" --budget=soon -- validate >/dev/null 2>"$tmp/err"
check "a budget that is not a number exits 2" "[[ \$? -eq 2 ]] && grep -q 'not a number' '$tmp/err'"
"$script" --bench="$tmp/none.tar.xz" -- validate >/dev/null 2>"$tmp/err"
check "a missing bundle exits 2 and names it" "[[ \$? -eq 2 ]] && grep -q 'none.tar.xz' '$tmp/err'"

# A fake bench bundle: bench.sh prints its arguments, sleeps when asked, exits 3.
mkdir -p "$tmp/fake/psring-bench"
cat >"$tmp/fake/psring-bench/bench.sh" <<'FAKE'
#!/bin/sh
echo "args: $*"
case "$*" in *--sleep*) sleep 90 ;; esac
exit 3
FAKE
chmod +x "$tmp/fake/psring-bench/bench.sh"
tar cJf "$tmp/bench.tar.xz" -C "$tmp/fake" psring-bench

out="$("$script" --budget=40 --bench="$tmp/bench.tar.xz" --gpu="$tmp/none" --out="$tmp/o1" -- validate --plan=p.json)"
rc=$?
check "the suite's exit status is the script's" "[[ $rc -eq 3 ]]"
check "validate gets --out_dir under --out and a --time_limit (at least 30 s), then its own flags" \
  "grep -q 'args: validate --out_dir=$tmp/o1/validate --time_limit=30s --plan=p.json' '$tmp/o1/validate.txt'"
"$script" --budget=200 --bench="$tmp/bench.tar.xz" --gpu="$tmp/none" --out="$tmp/o4" -- calibrate >/dev/null
check "calibrate's --time_limit is the suite's seconds less a tenth (at least 20 s)" \
  "grep -Eq 'args: calibrate --out_dir=$tmp/o4/calibrate --time_limit=1(79|80)s\$' '$tmp/o4/calibrate.txt'"
out="$("$script" --budget=200 --bench="$tmp/bench.tar.xz" --gpu="$tmp/none" --out="$tmp/o5" \
  --capture=100mbit:10ms,100mbit:40ms -- validate)"
check "two captures after the suite take 90 s more from validate's limit" \
  "grep -Eq '^# validate --time_limit=(89|90)s .*2 capture' <<<\"\$out\""
"$script" --budget=200 --bench="$tmp/bench.tar.xz" --gpu="$tmp/none" --out="$tmp/o6" -- validate --time_limit=5m >/dev/null
check "a --time_limit among the suite's flags wins" \
  "grep -qx 'args: validate --out_dir=$tmp/o6/validate --time_limit=5m' '$tmp/o6/validate.txt'"
check "the suite's output is printed" "grep -q 'args: validate' <<<\"\$out\""
check "a missing runbook bundle is said" "grep -q 'GPU runbook: no bundle' <<<\"\$out\""
"$script" --budget=40 --bench="$tmp/bench.tar.xz" --gpu="$tmp/none" --out="$tmp/o2" -- allreduce_bench >/dev/null
check "allreduce_bench gets no --out_dir" "grep -qx 'args: allreduce_bench' '$tmp/o2/allreduce_bench.txt'"
out="$("$script" --budget=31 --bench="$tmp/bench.tar.xz" --gpu="$tmp/none" --out="$tmp/o3" -- compare --sleep)"
rc=$?
check "a suite past the budget is stopped: exit 124" "[[ $rc -eq 124 ]] && grep -q 'out of its' <<<\"\$out\""
"$script" --budget=40 --gpu_min=20 --bench="$tmp/bench.tar.xz" -- validate >/dev/null 2>"$tmp/err"
check "too little left for the suite exits 2" "[[ \$? -eq 2 ]] && grep -q 'left for validate' '$tmp/err'"
exit "$fail"
