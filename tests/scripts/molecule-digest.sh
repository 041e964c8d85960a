#!/usr/bin/env bash
# Print what made a Molecule run fail, from its log: each failed Ansible task (its name, the
# failure and the first lines of its message) and pytest's failures with their assertion lines.
# make molecule calls it last, so the reason is in the final lines of a long CI log.
set -euo pipefail
log=$1
[ -f "$log" ] || exit 0
echo "==> why it failed (the whole log: $log)"
# Strip colours and Molecule's box-drawing gutter first.
sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^ *│ \{0,1\}//' "$log" | awk '
  /^TASK \[/ { task = $0 }
  /^(fatal|failed): \[/ { print task; print; more = 4; next }
  more > 0 { print "    " $0; more--; next }
  /glob failed/ { next }
  /^FAILED |^E  |^=+ .*[0-9]+ failed|^(CRITICAL|ERROR) / { print }
' | cut -c1-240 | tail -n 40
