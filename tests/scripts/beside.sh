#!/usr/bin/env bash
# beside.sh TIER...: make test's tiers that run beside Molecule, one after the other, each at a
# lower CPU priority (nice 10), so that they take the CPU Molecule's scenarios leave idle (systemd
# boots, package downloads, waits for slurmctld and Prometheus: about a third of a scenario) rather
# than slow the scenarios down. Each tier logs to .cache/tier-<name>.log and records its time as a
# "beside" row (tests/scripts/test_times.py); the first that fails prints its log's end and stops
# the lane.
set -euo pipefail
cd "$(dirname "$0")/../.."
for tier in "$@"; do
  start=$(date +%s)
  log=.cache/tier-$tier.log
  if ! nice -n 10 make --no-print-directory "$tier" >"$log" 2>&1; then
    echo "==> tier $tier FAILED beside Molecule (whole log: $log); its end:" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
  seconds=$(($(date +%s) - start))
  # The unit tier's pytest log gives the table its count of tests passed.
  counted=()
  if [ "$tier" = unit ]; then counted=(.cache/unit.log); fi
  python3 tests/scripts/test_times.py record "${TIMES:-.cache/test-times.tsv}" beside "$tier" "$seconds" "${counted[@]}"
  echo "==> tier $tier passed in $seconds s, beside Molecule (log: $log)"
done
