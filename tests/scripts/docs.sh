#!/usr/bin/env bash
# make docs: the collection's docsite, built from what a user reads: the guides (README.md and
# docs/, through myst-parser) and antsibull-docs' pages of every module, filter and role (each role's
# argument specs), with Sphinx treating every warning as an error. Then a headless Chromium renders
# the index and one role's page, and tests/docsite/render_check.py checks the pictures and the pages
# as rendered. The site: .cache/docs/html/index.html.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
venv=.cache/docs-venv
core=$(grep -E '^ansible-core==' requirements.txt)
want="$core $(sha256sum tests/requirements-docs.txt | cut -c1-16)"
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> creating $venv: $core and tests/requirements-docs.txt"
  rm -rf "$venv"
  "$(tests/scripts/core-python.sh "${core#ansible-core==}")" -m venv "$venv"
  tests/scripts/venv-install.sh "$venv" "$core" -r tests/requirements-docs.txt
  echo "$want" >"$venv/.stamp"
fi
export PATH="$top/$venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$top/.collections" ANSIBLE_CONFIG="$top/ansible.cfg"
start=$(date +%s)
src=.cache/docs/src
html=.cache/docs/html
rm -rf .cache/docs
mkdir -p "$src"
chmod og-w "$src" # antsibull-docs wants its destination writable by itself only
echo "==> antsibull-docs collection gpuops.cluster"
antsibull-docs --config-file tests/docsite/antsibull-docs.cfg collection --use-current --dest-dir "$src" \
  gpuops.cluster
python tests/docsite/prepare.py "$top" "$src"
echo "==> sphinx-build (warnings are errors)"
sphinx-build -b html -c tests/docsite -W --keep-going -q "$src" "$html"
pages=$(find "$html" -name '*.html' | wc -l)
echo "docsite: $pages pages in $(($(date +%s) - start)) s: $html/index.html"

# The pictures: the index, and a role page with its argument spec's table.
tests/scripts/ensure-chromium.sh
role_page=$html/collections/gpuops/cluster/nvidia_driver_role.html
.venv/bin/python tests/docsite/render_check.py "$html/index.html" "$role_page" nvidia_driver_branch
