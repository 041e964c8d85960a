#!/usr/bin/env bash
# make install-matrix: the version contract as a user meets it. For each community bundle given
# (the `ansible` package of each supported ansible-core), in a clean virtualenv that holds that
# bundle and nothing else, with the oldest Python its core supports:
#   1. ansible-galaxy collection install --offline of the built tarball (galaxy.yml's dependency
#      floors must be met by what the bundle carries; nothing is fetched);
#   2. ansible-playbook site.yml -i inventories/hk --syntax-check and --list-hosts, from a copy of
#      the checkout's inventory and root site.yml, with the collection taken from that install only;
#      no "does not support Ansible version" warning (meta/runtime.yml's range);
#   3. every argument the roles and playbooks pass to a dependency's module is one that module, at
#      the bundle's version, accepts (tests/scripts/dependency_args.py).
#   install-matrix.sh 12.3.0 13.8.0 14.5.0
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
[ "$#" -gt 0 ] || { echo "usage: install-matrix.sh ANSIBLE_BUNDLE_VERSION..." >&2; exit 2; }
out=.cache/install-matrix
mkdir -p "$out"
rm -f "$out"/gpuops-cluster-*.tar.gz
.venv/bin/ansible-galaxy collection build --force --output-path "$out" >/dev/null
tarball=$(ls "$out"/gpuops-cluster-*.tar.gz)

one() {
  local bundle=$1 core_minor venv python work start
  start=$(date +%s)
  core_minor=$((${bundle%%.*} + 7)) # ansible 12 is the bundle of ansible-core 2.19, 13 of 2.20, ...
  # The oldest Python the core runs its controller on, where the machine has it (core-python.sh):
  # 3.11, Debian 12's, for 2.19; 3.12 after.
  python=$(tests/scripts/core-python.sh "2.$core_minor.0")
  venv=.cache/bundle-$bundle
  if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "ansible==$bundle $python" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    tests/scripts/venv-install.sh "$venv" "ansible==$bundle"
    echo "ansible==$bundle $python" >"$venv/.stamp"
  fi
  work=$(mktemp -d)
  # A user's directory: the root site.yml, the reference inventory, nothing of the project's
  # ansible.cfg (whose collections path would reach the checkout).
  cp site.yml "$work/"
  cp -r inventories "$work/"
  mkdir -p "$work/playbooks"
  # The root site.yml imports playbooks/site.yml: from an install, the collection's own copy.
  printf -- '---\n- name: The collection'"'"'s site.yml\n  ansible.builtin.import_playbook: gpuops.cluster.site\n' \
    >"$work/playbooks/site.yml"
  (
    cd "$work"
    unset ANSIBLE_CONFIG
    export ANSIBLE_COLLECTIONS_PATH="$work/collections" ANSIBLE_NOCOLOR=1 PATH="$top/$venv/bin:$PATH"
    ansible-galaxy collection install --offline -p "$work/collections" "$top/$tarball" >install.log 2>&1 || {
      cat install.log
      echo "ERROR: ansible $bundle: the built tarball does not install offline (above)" >&2
      exit 1
    }
    for how in --syntax-check --list-hosts; do
      if ! ansible-playbook site.yml -i inventories/hk "$how" >"play$how.log" 2>&1; then
        cat "play$how.log"
        echo "ERROR: ansible $bundle: ansible-playbook site.yml -i inventories/hk $how failed (above)" >&2
        exit 1
      fi
      if grep -i "does not support Ansible version" "play$how.log"; then
        echo "ERROR: ansible $bundle: ansible-core warns that gpuops.cluster does not support it (meta/runtime.yml)" >&2
        exit 1
      fi
    done
    grep -q hk-gpu01 play--list-hosts.log || { cat play--list-hosts.log; echo "ERROR: hk-gpu01 is not listed" >&2; exit 1; }
    "$top/$venv/bin/python" "$top/tests/scripts/dependency_args.py" "$top"
  ) || { rm -rf "$work"; return 1; }
  rm -rf "$work"
  echo "ansible $bundle (ansible-core $("$venv/bin/ansible" --version | head -1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+'), $("$venv/bin/python" --version)):" \
    "offline install, site.yml parsed, dependency arguments accepted, in $(($(date +%s) - start)) s"
}

pids=()
for bundle in "$@"; do
  one "$bundle" >"$out/$bundle.log" 2>&1 &
  pids+=("$!")
done
rc=0
for i in "${!pids[@]}"; do
  bundle=${*:i+1:1}
  if wait "${pids[$i]}"; then
    tail -n 1 "$out/$bundle.log"
  else
    cat "$out/$bundle.log"
    echo "ERROR: the community bundle ansible $bundle failed (above; log: $out/$bundle.log)" >&2
    rc=1
  fi
done
exit "$rc"
