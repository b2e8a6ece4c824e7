#!/usr/bin/env bash
# PSRING_SKIP_WITHOUT_GPU: a skip normally, a failing test binary with PSRING_REQUIRE_GPU=1.
set -uo pipefail
probe="$1"

out=$(env -u PSRING_REQUIRE_GPU "$probe" 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q "SKIPPED" <<<"$out"; then
  echo "FAIL: without PSRING_REQUIRE_GPU the probe should skip and exit 0 (rc $rc):"; echo "$out"; exit 1
fi
# The log says plainly that nothing ran, since Bazel will show PASSED (issue 24).
if ! grep -q "^psring: 1 of 1 tests SKIPPED, not run on this host" <<<"$out"; then
  echo "FAIL: the log should end with the psring skip summary:"; echo "$out"; exit 1
fi

out=$(PSRING_REQUIRE_GPU=1 "$probe" 2>&1)
rc=$?
if [[ $rc -eq 0 ]] || ! grep -q "PSRING_REQUIRE_GPU=1 but this GPU test cannot run" <<<"$out" \
    || ! grep -q "no usable GPU: the probe never has one" <<<"$out"; then
  echo "FAIL: with PSRING_REQUIRE_GPU=1 the probe should fail with the reason (rc $rc):"; echo "$out"; exit 1
fi
echo "PASS: skip without PSRING_REQUIRE_GPU, failure (rc $rc) with it"
