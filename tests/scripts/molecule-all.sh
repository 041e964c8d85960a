#!/usr/bin/env bash
# make molecule: run Molecule scenarios, MOLECULE_JOBS at a time (default 2), the longest first.
#   molecule-all.sh SCENARIO[@DISTRO]...
# A scenario runs on the base image of MOLECULE_IMAGE, or with @DISTRO on that platform's image
# (tests/image/build.sh: debian12, debian13, ubuntu2204, ubuntu2404), which must be built; its log
# is then .cache/molecule/SCENARIO@DISTRO.log. One scenario never runs on two platforms at once
# (its containers and network carry the scenario's name): a lock per scenario holds the later run,
# and the queue takes each scenario's platforms in rounds, so that they are far apart.
# Each scenario logs to .cache/molecule/<name>.log. With one job the log is also printed as it
# goes; with more, each scenario prints one line when it ends, and a failed one its digest
# (tests/scripts/molecule-digest.sh: failed tasks and tests). TIMES, when set, gets one row per
# scenario (tests/scripts/test_times.py).
#
# Two at a time: a scenario leaves the CPU idle about a third of its time (systemd boots, package
# downloads, waits for slurmctld, Prometheus and job accounting), and every scenario has its own
# Docker network, containers and Molecule state, so two do not meet.
set -euo pipefail
cd "$(dirname "$0")/../.."

jobs=${MOLECULE_JOBS:-2}
mkdir -p .cache/molecule

# Longest first, so the last scenario to start is a short one (times from a cold make test).
order=(site slurm_cluster mig fleet nvidia_driver k8s_node slurm rack ofed container_toolkit nccl secure_boot driver_upgrade dcgm
  gpu_facts preflight gpusim os_tuning)
# A scenario on several platforms: its first platform in the first round, its second in the
# second, and so on, so that its runs are far apart in the queue (they cannot overlap, below).
for want in "$@"; do
  [[ " ${order[*]} " == *" ${want%@*} "* ]] || order+=("${want%@*}")
done
scenarios=()
for round in $(seq 0 $(($# - 1))); do
  for s in "${order[@]}"; do
    n=0
    for want in "$@"; do
      if [ "${want%@*}" = "$s" ]; then
        [ "$n" = "$round" ] && scenarios+=("$want")
        n=$((n + 1))
      fi
    done
  done
done

[ "${#scenarios[@]}" -gt 1 ] || jobs=1

# Molecule's step lines ("site ➜ converge: Executing" on a terminal, "[site > converge] Executing"
# in a plain locale, as in CI) with the seconds since the scenario began
# ("[+312s] "), from which test_times.py reads each step's time.
stamp() {
  local start=$1 line now
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line == *"➜ "*"Executing"* || $line == *"INFO"*" > "*"] Executing"* ]]; then
      printf -v now '%(%s)T' -1
      line="[+$((now - start))s] $line"
    fi
    printf '%s\n' "$line"
  done
}
export -f stamp

run_one() {
  set -o pipefail
  local s=${1%@*} log=.cache/molecule/$1.log start rc=0
  if [ "$1" != "$s" ]; then
    export MOLECULE_DISTRO=${1#*@}
    MOLECULE_IMAGE=$(tests/image/build.sh --print-tag) || return 1
    export MOLECULE_IMAGE
  fi
  # One platform at a time per scenario: its containers and network carry the scenario's name.
  exec {lock}>".cache/molecule/$s.lock"
  flock "$lock"
  start=$(date +%s)
  echo "==> molecule test -s $s on $MOLECULE_IMAGE (log: $log)"
  # Molecule runs without the lock's descriptor, so that nothing it leaves behind holds the lock.
  if [ "$MOLECULE_JOBS_N" = 1 ]; then
    molecule test -s "$s" {lock}>&- 2>&1 | stamp "$start" | tee "$log" || rc=$?
  else
    molecule test -s "$s" {lock}>&- 2>&1 | stamp "$start" >"$log" || rc=$?
  fi
  local took=$(($(date +%s) - start))
  if [ "$rc" != 0 ]; then
    echo "==> scenario $1 FAILED after ${took}s"
    tests/scripts/molecule-digest.sh "$log" | tee "${log%.log}.why"
    # make test's report prints the reasons again after its table: the last lines of a CI log.
    if [ -n "${TIMES:-}" ]; then
      python3 tests/scripts/test_times.py record "$TIMES" failed "$1" "$took" "${log%.log}.why"
    fi
    return 1
  fi
  echo "==> scenario $1 passed in ${took}s"
  if [ -n "${TIMES:-}" ]; then
    python3 tests/scripts/test_times.py record "$TIMES" scenario "$1" "$took" "$log"
  fi
}
export -f run_one
export MOLECULE_JOBS_N=$jobs

# xargs runs up to $jobs at a time and exits non-zero if any scenario failed (after the others end).
# shellcheck disable=SC2016  # $1 is the inner bash's argument, expanded there
printf '%s\n' "${scenarios[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}
