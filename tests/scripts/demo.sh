#!/usr/bin/env bash
# make demo / make demo-down: a simulated GPU cluster in Docker, set up by playbooks/site.yml.
#   demo.sh up [START]   start inventories/demo's hosts as containers (tests/demo/up.yml), apply
#                        site.yml to them, print what the cluster is (tests/demo/summary.yml) and
#                        how long it took; START is when make began (seconds since the epoch).
#   demo.sh down         remove the containers, the repository server and the network.
# make provides the virtualenv, the Docker engine, the base image (MOLECULE_IMAGE) and the stand-in
# repository (GPUSIM_REPO_DIR) first; run it through make.
set -euo pipefail
cd "$(dirname "$0")/../.."

inventory=(-i inventories/demo/hosts.yml -i tests/demo/connection.yml)
state=.cache/demo
mkdir -p "$state"

seconds() { local s=$1; if ((s >= 60)); then printf '%d min %d s' $((s / 60)) $((s % 60)); else printf '%d s' "$s"; fi; }

case "${1:-}" in
up)
  start=${2:-$(date +%s)}
  # Again only on the same platform: another base image (DEMO_DISTRO) recreates every node.
  if [ "$(docker container inspect -f '{{.Config.Image}}' gpuops-demo-head 2>/dev/null)" = "$MOLECULE_IMAGE" ]; then
    run=again
  else
    run=first
  fi
  echo "==> platform ${MOLECULE_DISTRO:-debian12} (base image $MOLECULE_IMAGE)"

  echo "==> starting the demo cluster (log: $state/up.log)"
  t0=$(date +%s)
  ansible-playbook "${inventory[@]}" tests/demo/up.yml >"$state/up.log" 2>&1 ||
    { tail -n 40 "$state/up.log"; echo "ERROR: starting the demo cluster failed; the whole log is $state/up.log" >&2; exit 1; }
  t1=$(date +%s)

  echo "==> ansible-playbook playbooks/site.yml -i inventories/demo (log: $state/site.log)"
  GPUOPS_VALIDATE_REPORT_DIR=$PWD/$state/validate-report ANSIBLE_DISPLAY_SKIPPED_HOSTS=false \
    ansible-playbook "${inventory[@]}" playbooks/site.yml 2>&1 | tee "$state/site.log"
  t2=$(date +%s)

  echo "==> reading the cluster back (log: $state/summary.log)"
  DEMO_SUMMARY=$PWD/$state/summary.txt ansible-playbook "${inventory[@]}" tests/demo/summary.yml >"$state/summary.log" 2>&1 ||
    { tail -n 40 "$state/summary.log"; echo "ERROR: reading the cluster back failed; the whole log is $state/summary.log" >&2; exit 1; }
  t3=$(date +%s)

  # PLAY RECAP lines: "host : ok=N changed=N unreachable=N failed=N skipped=N rescued=N ignored=N"
  recap=$(sed -n '/^PLAY RECAP/,$p' "$state/site.log" | grep -E '^[a-z0-9._-]+ +: ok=' || true)
  changed=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^changed=/) { split($i, kv, "="); n += kv[2] }} END {print n + 0}' <<<"$recap")

  echo
  echo "================================ gpuops.cluster demo ================================"
  cat "$state/summary.txt"
  echo
  echo "== This run =="
  printf '%-12s %6s %8s %8s\n' host tasks changed skipped
  awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
         printf "%-12s %6d %8d %8d\n", $1, v["ok"], v["changed"], v["skipped"] }' <<<"$recap"
  echo "cluster up and nodes ready: $(seconds $((t1 - t0)))"
  if [ "$run" = first ]; then
    echo "site.yml, first run:       $(seconds $((t2 - t1))), $changed changed"
  else
    echo "site.yml, run again:       $(seconds $((t2 - t1))), $changed changed$( ((changed == 0)) && echo ' (idempotent)')"
  fi
  echo "summary:                   $(seconds $((t3 - t2)))"
  echo "make demo in all:          $(seconds $((t3 - start)))"
  echo
  echo "Validation report (site.yml's last step): $PWD/$state/validate-report/validation.html"
  echo "Log in: docker exec -it gpuops-demo-head bash    (then: sinfo; srun --gres=gpu:l40s:2 printenv CUDA_VISIBLE_DEVICES)"
  # The demo's hosts are containers: its connection inventory comes with inventories/demo. From the
  # checkout's root (its ansible.cfg), with the project's virtualenv, in any shell.
  echo "Run site.yml yourself (from any shell):"
  echo "  cd $PWD && .venv/bin/ansible-playbook site.yml -i inventories/demo/hosts.yml -i tests/demo/connection.yml [--check --diff]"
  echo "Again:  make demo        Remove: make demo-down"
  if [ "$run" = again ] && ((changed != 0)); then
    echo "WARNING: site.yml changed $changed things on a converged cluster; $state/site.log says which." >&2
  fi
  ;;
down)
  ansible-playbook "${inventory[@]}" tests/demo/down.yml >"$state/down.log" 2>&1 ||
    { tail -n 40 "$state/down.log"; echo "ERROR: removing the demo cluster failed; see $state/down.log" >&2; exit 1; }
  rm -f "$state/summary.txt"
  echo "==> the demo cluster is removed"
  ;;
*)
  echo "usage: $0 up [START] | down" >&2
  exit 2
  ;;
esac
