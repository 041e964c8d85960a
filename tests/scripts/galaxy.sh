#!/usr/bin/env bash
# make galaxy: what Galaxy, Automation Hub and the docsite run on the collection, run here on the
# built tarball, in an environment that has ansible-core and only the collections galaxy.yml
# declares:
#   1. ansible-galaxy collection install --offline: the declared dependencies, at their lower
#      bounds or later, are what the environment holds (else the install refuses);
#   2. galaxy-importer (tests/galaxy-importer.cfg: Automation Hub's rules, offline), 0 warnings;
#   3. antsibull-docs lint-collection-docs --plugin-docs, 0 errors.
# The environment (.cache/galaxy-venv) is apart from the project's .venv, whose ansible bundle
# carries every community collection: here a module of an undeclared collection does not resolve,
# and galaxy-importer's ansible-lint says so.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
venv=.cache/galaxy-venv
bundle=$(.venv/bin/python -c 'import ansible_collections; print(list(ansible_collections.__path__)[0])')
core=$(grep -E '^ansible-core==' requirements.txt)
want="$core $(sha256sum tests/requirements-galaxy.txt | cut -c1-16)"
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> creating $venv: $core and tests/requirements-galaxy.txt"
  rm -rf "$venv"
  "$(tests/scripts/core-python.sh "${core#ansible-core==}")" -m venv "$venv"
  tests/scripts/venv-install.sh "$venv" "$core" -r tests/requirements-galaxy.txt
  echo "$want" >"$venv/.stamp"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# The declared dependencies, taken from the ansible bundle the project tests with (Galaxy cannot
# be reached): each into the environment's own collection tree with the collections they depend on
# in turn (their MANIFEST.json; community.general 13 needs community.library_inventory_filtering_v1),
# and nothing else.
deps=$("$venv/bin/python" -c '
import yaml
for name in (yaml.safe_load(open("galaxy.yml")).get("dependencies") or {}):
    print(name)')
# shellcheck disable=SC2086 # one collection per word
needed=$("$venv/bin/python" - "$bundle" $deps <<'EOF'
import json, sys
bundle, todo, seen = sys.argv[1], list(sys.argv[2:]), []
while todo:
    name = todo.pop(0)
    if name in seen:
        continue
    seen.append(name)
    try:
        with open(f"{bundle}/{name.replace('.', '/')}/MANIFEST.json") as f:
            todo += list(json.load(f)["collection_info"].get("dependencies") or {})
    except OSError:
        pass  # reported below
print(" ".join(seen))
EOF
)
rm -rf "$site/ansible_collections"
for name in $needed; do
  src="$bundle/${name//.//}"
  [ -f "$src/MANIFEST.json" ] || {
    echo "ERROR: galaxy.yml's dependencies need $name (declared, or a dependency of one declared), which the" \
      "project's ansible bundle (requirements.txt) lacks." >&2
    exit 1
  }
  mkdir -p "$site/ansible_collections/${name%%.*}"
  cp -a "$src" "$site/ansible_collections/${name//.//}"
done

export PATH="$top/$venv/bin:$PATH"
# Nothing but the environment's own tree and the paths below: no user or system collections.
export ANSIBLE_COLLECTIONS_PATH="$top/.cache/galaxy-collections"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=true
unset ANSIBLE_CONFIG

echo "==> ansible-galaxy collection build"
rm -rf build && mkdir -p build
ansible-galaxy collection build --output-path build . >/dev/null
tarball=$(ls build/gpuops-cluster-*.tar.gz)

echo "==> ansible-galaxy collection install --offline $tarball (its dependencies from this environment)"
rm -rf "$ANSIBLE_COLLECTIONS_PATH"
mkdir -p "$ANSIBLE_COLLECTIONS_PATH"
# The resolver sees the dependencies installed in the environment's tree and takes them only if they
# meet galaxy.yml's bounds; offline, it has nowhere else to look.
ansible-galaxy collection install --offline -p "$ANSIBLE_COLLECTIONS_PATH" "$tarball" 2>&1 | sed 's/^/    /'
for name in $deps; do
  echo "    $name $(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["collection_info"]["version"])' \
    "$site/ansible_collections/${name//.//}/MANIFEST.json") (galaxy.yml: $(python -c 'import sys, yaml
print(yaml.safe_load(open("galaxy.yml"))["dependencies"][sys.argv[1]])' "$name"))"
done

echo "==> galaxy-importer $tarball (tests/galaxy-importer.cfg)"
log=$top/.cache/galaxy-importer.log
# It writes importer_result.json (the page Galaxy would show) into its working folder.
(cd .cache && GALAXY_IMPORTER_CONFIG="$top/tests/galaxy-importer.cfg" python -m galaxy_importer.main "$top/$tarball") >"$log" 2>&1 || {
  cat "$log"
  echo "ERROR: galaxy-importer failed (above)" >&2
  exit 1
}
grep -q "Importer processing completed successfully" "$log"
if grep -E '^(WARNING|ERROR)' "$log"; then
  echo "ERROR: galaxy-importer warned (above; whole log: $log). Galaxy and Automation Hub show these on the collection's page." >&2
  exit 1
fi
echo "    no warnings ($(grep -c '^Loading ' "$log") contents loaded)"

echo "==> antsibull-docs lint-collection-docs --plugin-docs"
antsibull-docs lint-collection-docs --plugin-docs "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/gpuops/cluster"
