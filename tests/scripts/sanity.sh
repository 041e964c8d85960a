#!/usr/bin/env bash
# ansible-test sanity on the collection, from a temporary ansible_collections/gpuops/cluster
# tree holding what git tracks (plus new, not ignored files).
#
# ansible-test's --venv mode bootstraps pip from ci-files.testing.ansible.com, which air-gapped
# and CI machines cannot reach; so the tests run --local in a virtualenv of their own
# (.cache/sanity-venv, the pinned ansible-core plus ansible-test's own requirements from PyPI),
# apart from the project's .venv.
set -euo pipefail

#
# ANSIBLE_CORE=2.21.5 runs another ansible-core than requirements.txt's pin (make core-matrix), in
# .cache/core-<version> with a Python that core supports (tests/scripts/core-python.sh).
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${ANSIBLE_CORE:-}" ]; then
  core="ansible-core==$ANSIBLE_CORE"
  venv="$top/.cache/core-$ANSIBLE_CORE"
else
  core=$(grep -E '^ansible-core==' "$top/requirements.txt")
  venv="$top/.cache/sanity-venv"
fi
interpreter=$("$top/tests/scripts/core-python.sh" "${core#ansible-core==}")
want="$core $("$interpreter" --version)"
if [ ! -x "$venv/bin/ansible-test" ] || [ "$(cat "$venv/.core" 2>/dev/null)" != "$want" ]; then
  echo "==> creating $venv with $want"
  rm -rf "$venv"
  "$interpreter" -m venv "$venv"
  "$top/tests/scripts/venv-install.sh" "$venv" "$core"
  echo "$want" >"$venv/.core"
fi
export PATH="$venv/bin:$PATH"
# core-matrix.sh makes a core's virtualenv this way before its unit tests, and runs sanity later.
[ -z "${SANITY_VENV_ONLY:-}" ] || exit 0

# ansible-test skips its shellcheck test, with a warning only, where shellcheck is missing.
if ! command -v shellcheck >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing shellcheck (Debian's package), which ansible-test sanity runs"
    # make test's apt-get calls take one lock (tests/image/build.sh): they may run side by side.
    flock /var/lock/gpuops-apt.lock sh -c \
      'apt-get install -y -qq shellcheck >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq shellcheck >/dev/null; }'
  else
    echo "ERROR: shellcheck is not installed, and ansible-test sanity skips its shell check without it." \
      "Install it (apt-get install shellcheck) and run again." >&2
    exit 1
  fi
fi

# ansible-test looks for its pip bootstrap script in ~/.ansible/test/cache before downloading
# it: put the offline stand-in there.
pip_version=$(grep -oE "pip='[0-9.]+'" "$venv"/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py |
  grep -oE '[0-9.]+')
mkdir -p "$HOME/.ansible/test/cache"
# make core-matrix runs several cores at once: each writes its copy whole, then renames it.
bootstrap="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
cp "$top/tests/scripts/get_pip_offline.py" "$bootstrap.$$"
mv -f "$bootstrap.$$" "$bootstrap"

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-sanity.XXXXXX")
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/gpuops/cluster"
mkdir -p "$dest"

cd "$top"
git ls-files -z --cached --others --exclude-standard |
  grep -zv '^\.collections/' |
  while IFS= read -r -d '' f; do [ -e "$f" ] && cp --parents -P "$f" "$dest/"; done
# ansible-test reads file lists from git; give the copy a repository of its own.
git -C "$dest" init -q
git -C "$dest" add -A

cd "$dest"
python=$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
echo "==> ansible-test sanity ($core, python $python)"
ansible-test sanity --local --requirements --python "$python" --color no "$@"
