#!/usr/bin/env bash
# Hostile and absurd flags (issue 13, findings 4-6) on the real binaries: each must end within 30 s with exit
# code 1 and an error naming what is wrong, before anything large is allocated: never std::bad_alloc
# (SIGABRT, 134), an OOM kill (137), a hang (124) or a silent start. No case opens a network connection
# (servers are refused before they listen; workers before they connect).
#   tests/hostile_flags_test.sh TRAIN RING_WORKER PS_SERVER PS_WORKER
set -uo pipefail
train="$1" ring_worker="$2" ps_server="$3" ps_worker="$4"
log="${TEST_TMPDIR:-/tmp}/hostile_flags.log"
failures=0
cases=0

# expect SUBSTRING BINARY ARGS...: exit code 1 within 30 s, SUBSTRING in the output.
expect() {
  local want="$1"
  shift
  cases=$((cases + 1))
  timeout 30 "$@" >"$log" 2>&1 </dev/null
  local rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAIL: exit code $rc (1 expected; 124 = hang, 134 = abort, 137 = killed): $*"
    tail -3 "$log"
    failures=$((failures + 1))
  elif ! grep -qF -- "$want" "$log"; then
    echo "FAIL: the error does not say '$want': $*"
    tail -3 "$log"
    failures=$((failures + 1))
  fi
}

syn=(--dataset=synthetic --max_steps=2)
expect "--batch_size=100000000" "$train" "${syn[@]}" --batch_size=100000000
expect "fewer than one batch" "$train" "${syn[@]}" --batch_size=1048576
expect "--synthetic_samples=100000000000" "$train" "${syn[@]}" --synthetic_samples=100000000000
expect "choose smaller --hidden" "$train" "${syn[@]}" --hidden=100000,100000
expect "--hidden=0" "$train" "${syn[@]}" --hidden=0
expect "--lr=inf" "$train" "${syn[@]}" --lr=inf
expect "--lr=1e+30" "$train" "${syn[@]}" --lr=1e30
expect "--momentum=1" "$train" "${syn[@]}" --momentum=1
expect "--weight_decay=nan" "$train" "${syn[@]}" --weight_decay=nan
expect "--max_steps=-5" "$train" --dataset=synthetic --max_steps=-5
# 8192 samples of a 1,000,000-wide layer: ~98 GB of batch buffers, while the model itself (~9.5 GB with its
# gradients and momentum) passes the model-size limit. Only meaningful where 98 GB exceed the memory.
mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
if [ "${mem_kb:-0}" -gt 0 ] && [ "$mem_kb" -lt 90000000 ]; then
  expect "--batch_size=8192 with --hidden=1000000" "$train" "${syn[@]}" --synthetic_samples=8192 \
    --batch_size=8192 --hidden=1000000
fi

expect "above the limit" "$ring_worker" --rank=0 --world_size=1 --model_bytes=1000000000000
expect "--model_bytes >= 4" "$ring_worker" --rank=0 --world_size=1 --model_bytes=3
expect "--timeout=nan" "$ring_worker" --rank=0 --world_size=2 --timeout=nan
expect "--timeout=-1" "$ring_worker" --rank=0 --world_size=2 --timeout=-1
expect "out of range" "$ring_worker" --rank=5 --world_size=2

expect "--workers=2000000000" "$ps_server" --port=0 --workers=2000000000
expect "--step_timeout=nan" "$ps_server" --port=0 --workers=1 --step_timeout=nan
expect "--port=99999" "$ps_server" --port=99999 --workers=1
# Issue 22: tokens of at least 16 bytes, and never in clear off loopback without --insecure.
expect "has 5 bytes; use at least 16 random bytes" "$ps_server" --port=0 --workers=1 --auth_token=short
expect "--insecure on a trusted network" "$ps_server" --port=0 --workers=1 --bind_addr=0.0.0.0 \
  --auth_token=0123456789abcdef
expect "give --tls_ca" "$ps_worker" --servers=192.0.2.1:1 --rank=0 --world_size=1 --model_bytes=1024 \
  --auth_token=0123456789abcdef

ps=(--servers=127.0.0.1:1 --rank=0 --world_size=1)
expect "above the limit" "$ps_worker" "${ps[@]}" --model_bytes=1000000000000
expect "--timeout=nan" "$ps_worker" "${ps[@]}" --model_bytes=1024 --timeout=nan
expect "--push_window_bytes=-1" "$ps_worker" "${ps[@]}" --model_bytes=1024 --push_window_bytes=-1

echo "$cases cases, $failures failed"
[ "$failures" -eq 0 ]
