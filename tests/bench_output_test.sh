#!/usr/bin/env bash
# What the Google Benchmark suites print (issue 24), checked on tiny cases (the figures themselves are not
# checked: they depend on the machine): trainer_bench without Google Benchmark's "Library was built as DEBUG"
# line, and without a GPU its CUDA cases skipped with one plain line; ps_bench without one "registered at
# version 0" line per server, and with its own target's check line.
#   tests/bench_output_test.sh TRAINER_BENCH PS_BENCH
set -uo pipefail
trainer_bench="$1" ps_bench="$2"
dir="${TEST_TMPDIR:-/tmp}"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

timeout 120 "$trainer_bench" --benchmark_filter='cpu/256,256/b128' --benchmark_min_time=0.001 \
  --torch_compare=false >"$dir/tb.out" 2>"$dir/tb.err" </dev/null
rc=$?
[ "$rc" -eq 0 ] || fail "trainer_bench exited $rc: $(tail -3 "$dir/tb.err")"
grep -q "Run on" "$dir/tb.err" || fail "trainer_bench printed no benchmark context (Run on ...)"
grep -q "built as DEBUG" "$dir/tb.out" "$dir/tb.err" && fail "trainer_bench still prints 'Library was built as DEBUG'"
grep -q "TrainStep/cpu/256,256/b128" "$dir/tb.err" "$dir/tb.out" || fail "trainer_bench ran no case"
# A CUDA case on a host without a GPU: one plain line, not CUDA's "driver version is insufficient".
timeout 120 "$trainer_bench" --benchmark_filter='cuda/256,256/b128' --benchmark_min_time=0.001 \
  --torch_compare=false >"$dir/tbc.out" 2>"$dir/tbc.err" </dev/null
if grep -q "ERROR OCCURRED" "$dir/tbc.out" "$dir/tbc.err"; then
  grep -q "driver version is insufficient" "$dir/tbc.out" "$dir/tbc.err" &&
    fail "trainer_bench prints CUDA's error text on a host without a GPU: $(grep -h 'ERROR OCCURRED' "$dir/tbc.out")"
  grep -Eq "no GPU on this host|no usable GPU" "$dir/tbc.out" "$dir/tbc.err" ||
    fail "trainer_bench's skipped CUDA case does not say why: $(grep -h 'ERROR OCCURRED' "$dir/tbc.out")"
fi

# Two sizes x two shard counts x one rank count: 4 fresh servers, 6 registrations; then the 64M ratio pass.
timeout 240 "$ps_bench" --min_bytes=4K --max_bytes=16K --factor=4 --shards=1,2 --ranks=2 \
  --socket_bytes=64M >"$dir/pb.out" 2>"$dir/pb.err" </dev/null
rc=$?
[ "$rc" -eq 0 ] || fail "ps_bench exited $rc: $(tail -3 "$dir/pb.err")"
grep -q "registered at version" "$dir/pb.err" "$dir/pb.out" && fail "ps_bench prints 'registered at version' lines"
grep -Eq '^# check ps push-pull vs plain socket S=64M: [0-9.]+x \(>= 0\.8x at 64M\): (PASS|FAIL)$' "$dir/pb.out" ||
  fail "ps_bench has no PASS/FAIL line for its 64M target: $(grep -i 'plain socket' "$dir/pb.out" | tail -2)"
[ "$failures" -eq 0 ] && echo "PASS" || echo "$failures failures"
[ "$failures" -eq 0 ]
