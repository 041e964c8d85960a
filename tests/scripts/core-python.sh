#!/usr/bin/env bash
# core-python.sh VERSION: print a Python interpreter that ansible-core VERSION runs its controller
# on (2.19: 3.11 to 3.13; 2.20 and 2.21: 3.12 to 3.14): the oldest it supports where the machine has
# it (python3.11 for 2.19, so the tests run where a Debian 12 controller does; python3.12 after),
# else python3 where it is recent enough, else python3.13 or python3.12 from the PATH or from
# pyenv's versions; an error naming what to install.
set -euo pipefail
core=${1:?usage: core-python.sh ANSIBLE_CORE_VERSION}
minor=$(echo "$core" | cut -d. -f2)
need=11
[ "$minor" -ge 20 ] && need=12

fits() {
  "$1" -c "import sys; sys.exit(not ((3, $need) <= sys.version_info[:2] <= (3, 13)))" >/dev/null 2>&1
}
candidates=("python3.$need" python3 python3.13 python3.12)
if command -v pyenv >/dev/null 2>&1; then
  candidates+=("$(pyenv root)"/versions/3.1[23]*/bin/python3.1[23])
fi
for python in "${candidates[@]}"; do
  if fits "$python"; then
    command -v "$python"
    exit 0
  fi
done
echo "ERROR: ansible-core $core needs Python 3.$need to 3.13, and none was found (tried ${candidates[*]})." \
  "Install one (apt-get install python3.12, or pyenv install 3.12) and run again." >&2
exit 1
