#!/usr/bin/env bash
# make test's tiers before Molecule, in groups, one group after the other:
#   tiers.sh "lint sanity" "unit galaxy" core-matrix
# The tiers of a group run side by side: each is mostly one process, and the machine has two or
# more cores. Each logs to .cache/tier-<name>.log, printed in the group's order when the group ends;
# a failed tier fails the run once its group has ended, its log printed with the others. A group of
# one tier prints as it goes.
# TIMES (tests/scripts/test_times.py), when set, gets a tier row per group (its wall time, which the
# total counts) and, in a group of several, a beside row per tier (its own time).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .cache

record() {
  [ -z "${TIMES:-}" ] || python3 tests/scripts/test_times.py record "$TIMES" "$@"
}
# The log a tier's passed-tests count comes from (make unit writes pytest's output there).
count_log() {
  if [ "$1" = unit ]; then echo .cache/unit.log; fi
}

for group in "$@"; do
  read -r -a names <<<"$group"
  start=$(date +%s)
  if [ "${#names[@]}" = 1 ]; then
    make --no-print-directory "${names[0]}"
    # shellcheck disable=SC2046 # no log is no argument
    record tier "${names[0]}" $(($(date +%s) - start)) $(count_log "${names[0]}")
    continue
  fi
  pids=()
  for name in "${names[@]}"; do
    (
      begun=$(date +%s)
      rc=0
      make --no-print-directory "$name" >".cache/tier-$name.log" 2>&1 || rc=$?
      echo $(($(date +%s) - begun)) >".cache/tier-$name.time"
      exit "$rc"
    ) &
    pids+=("$!")
  done
  failed=()
  for i in "${!names[@]}"; do
    name=${names[$i]}
    wait "${pids[$i]}" || failed+=("$name")
    cat ".cache/tier-$name.log"
    # shellcheck disable=SC2046 # no log is no argument
    record beside "$name" "$(cat ".cache/tier-$name.time")" $(count_log "$name")
  done
  record tier "${group// / + } (side by side)" $(($(date +%s) - start))
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "ERROR: make ${failed[*]} failed (output above; .cache/tier-<name>.log)" >&2
    exit 1
  fi
done
