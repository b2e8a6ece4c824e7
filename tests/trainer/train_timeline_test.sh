#!/usr/bin/env bash
# //trainer:train --timeline writes one trace-event JSON file with a span per step for compute, the exchange
# and the optimizer, and fails on a path it cannot write (below a regular file) with an error naming it.
set -uo pipefail
train="$1"
out="${TEST_TMPDIR}/train.json"
if ! "$train" --dataset=synthetic --max_steps=3 --timeline="$out" >"${TEST_TMPDIR}/log" 2>&1; then
  cat "${TEST_TMPDIR}/log"
  echo "FAIL: train --timeline exited with an error"
  exit 1
fi
status=0
grep -q '"traceEvents"' "$out" || { echo "FAIL: no traceEvents in $out"; status=1; }
for name in 'forward+backward' 'exchange' 'optimizer'; do
  n=$(grep -o "\"name\": *\"$name\"" "$out" | wc -l)
  if [ "$n" -ne 3 ]; then
    echo "FAIL: $n '$name' spans for 3 steps in $out"
    status=1
  fi
done
bad="${out}/t.json"
if "$train" --dataset=synthetic --max_steps=1 --timeline="$bad" >"${TEST_TMPDIR}/log" 2>&1; then
  echo "FAIL: train accepted an unwritable --timeline"
  status=1
elif ! grep -qF "$bad" "${TEST_TMPDIR}/log"; then
  cat "${TEST_TMPDIR}/log"
  echo "FAIL: the error does not name the timeline path"
  status=1
fi
exit $status
