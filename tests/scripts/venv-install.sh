#!/usr/bin/env bash
# venv-install.sh VENV ARGS...: install packages (pip's arguments: names, -r FILE) into the
# virtualenv VENV with the project's uv (UV, or .venv/bin/uv; pinned in requirements.txt), which resolves
# and downloads in parallel: without caches, the project's .venv took 84 s with pip and 13 s with uv
# on a two-core machine. The virtualenv keeps its own pip (ansible-test installs with it).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
venv=${1:?usage: venv-install.sh VENV ARGS...}
shift
uv=${UV:-$top/.venv/bin/uv}
if [ ! -x "$uv" ]; then
  echo "ERROR: $uv is missing: make venv installs it (requirements.txt pins it); run make venv first." >&2
  exit 1
fi
# The system's certificate store, as pip's: uv's own roots do not hold a site's TLS proxy's CA.
exec "$uv" pip install --quiet --system-certs --python "$venv/bin/python" "$@"
