#!/usr/bin/env bash
# lowest-priority.sh PGID_FILE COMMAND...: run COMMAND in a session of its own at the lowest CPU
# priority, and write its process group's id to PGID_FILE (kill -- -ID stops all of it). make test
# runs the core matrix this way beside Molecule: it takes the CPU the scenarios leave idle.
# nice alone is not enough where the kernel schedules by session (sched_autogroup, as on CI's
# machines): a session's processes share one group, which claims its fair share against the scenario
# containers' cgroups whatever its processes' nice; the group's own nice (/proc/self/autogroup)
# lowers that too.
set -euo pipefail
pgid_file=${1:?usage: lowest-priority.sh PGID_FILE COMMAND...}
shift
# shellcheck disable=SC2016 # expanded by the inner bash
exec setsid --wait bash -c '
  echo $$ >"$0"
  if [ -w /proc/self/autogroup ]; then
    echo 19 >/proc/self/autogroup || echo "note: the session group kept its priority" >&2
  fi
  exec nice -n 19 "$@"' "$pgid_file" "$@"
