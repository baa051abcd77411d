#!/usr/bin/env bash
# Runs setup_failure_probe (a suite whose SetUpTestSuite fails) and checks that the run fails
# loudly: exit status non-zero, the setup failure named, and no "[  SKIPPED ]" line that CTest
# would count as a skip. Usage: setup_failure_fails_test.sh PATH/TO/setup_failure_probe
set -uo pipefail
probe=$1
output=$("$probe" 2>&1)
status=$?
echo "$output"
if [ "$status" -eq 0 ]; then
  echo "FAIL: the probe exited 0 although its suite setup failed"; exit 1
fi
if grep -qF '[  SKIPPED ]' <<<"$output"; then
  echo "FAIL: the probe printed [  SKIPPED ] (CTest would report a skip)"; exit 1
fi
if ! grep -qF 'SetUpTestSuite of BrokenSetupTest failed' <<<"$output"; then
  echo "FAIL: the probe did not name the failed suite setup"; exit 1
fi
echo "PASS: a failed SetUpTestSuite fails the run (exit $status)"
