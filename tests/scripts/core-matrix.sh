#!/usr/bin/env bash
# make core-matrix: ansible-test sanity and the unit tests on each ansible-core given (the supported
# cores other than requirements.txt's pin, which make sanity and make unit run), each in
# .cache/core-<version> with a Python that core supports, the cores side by side. The unit tests'
# own packages come at requirements.txt's pins.
#   core-matrix.sh 2.19.14 2.20.10
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
[ "$#" -gt 0 ] || { echo "usage: core-matrix.sh ANSIBLE_CORE_VERSION..." >&2; exit 2; }
unit_packages=$(grep -E '^(pytest|hypothesis|PyYAML|jmespath|kubernetes|matplotlib|networkx)==' requirements.txt)
# One core's sanity and unit tests; prints its result line last. The cores' ansible-test runs take
# turns (a lock): on one Python they share ansible-test's requirement virtualenvs
# (~/.ansible/test/venv), and two creating one at once broke it on a cold machine ("does not have
# pip available"). The first core runs its sanity first, the others their unit tests first.
run_core() {
  local core=$1 first=$2 start venv
  start=$(date +%s)
  if [ "$first" = sanity ]; then
    flock .cache/core-sanity.lock env ANSIBLE_CORE="$core" tests/scripts/sanity.sh
  fi
  venv=.cache/core-$core
  # The core's virtualenv as sanity.sh makes it (nothing to do where it is current), without its sanity run.
  ANSIBLE_CORE=$core SANITY_VENV_ONLY=1 tests/scripts/sanity.sh
  if [ "$(cat "$venv/.unit" 2>/dev/null)" != "$unit_packages" ]; then
    echo "==> the unit tests' packages into $venv"
    # shellcheck disable=SC2086 # one requirement per word
    tests/scripts/venv-install.sh "$venv" $unit_packages
    echo "$unit_packages" >"$venv/.unit"
  fi
  echo "==> pytest (unit) on ansible-core $core"
  PATH="$top/$venv/bin:$PATH" "$venv/bin/python" -m pytest -q -rf tests/unit |
    grep -Ev '^[.sxF]+ +\[ *[0-9]+%\]$'
  if [ "$first" != sanity ]; then
    flock .cache/core-sanity.lock env ANSIBLE_CORE="$core" tests/scripts/sanity.sh
  fi
  echo "ansible-core $core ($("$venv/bin/python" --version)): sanity and unit passed in $(($(date +%s) - start)) s"
}

# The cores side by side (each is mostly one process, and this tier runs before Molecule, on a
# machine with two or more cores), each logging to .cache/core-<version>.log, printed when all end.
pids=()
first=sanity
for core in "$@"; do
  run_core "$core" "$first" >".cache/core-$core.log" 2>&1 &
  first=unit
  pids+=("$!")
done
rc=0
for i in "${!pids[@]}"; do
  core=${*:i+1:1}
  if wait "${pids[$i]}"; then
    tail -n 1 ".cache/core-$core.log"
  else
    cat ".cache/core-$core.log"
    echo "ERROR: ansible-core $core failed (above; log: .cache/core-$core.log)" >&2
    rc=1
  fi
done
exit "$rc"
