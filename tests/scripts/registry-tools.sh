#!/usr/bin/env bash
# Install Debian's skopeo, docker-registry and prometheus-alertmanager where they are missing: the
# air-gap bundle's unit tests (test_bundle_charts.py, test_bundle_playbook.py) push stand-in images
# into a real registry and copy them into the bundle with the real skopeo, and the repair loop's
# (test_heal_loop.py) runs a real Alertmanager; without them those tests skip. The registry runs only
# inside the tests, on 127.0.0.1 (the package's own service is not started where systemd is absent).
set -euo pipefail
missing=
command -v skopeo >/dev/null 2>&1 || missing="$missing skopeo"
command -v docker-registry >/dev/null 2>&1 || missing="$missing docker-registry"
# The repair loop's test (test_heal_loop.py): real Alertmanager sends its webhook to ansible-rulebook.
command -v prometheus-alertmanager >/dev/null 2>&1 || missing="$missing prometheus-alertmanager"
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
  echo "WARNING:$missing not installed (no apt-get, or not root): the bundle's image tests will skip." >&2
  exit 0
fi
echo "==> installing$missing from the distribution"
export DEBIAN_FRONTEND=noninteractive
# make test's apt-get calls take one lock (tests/image/build.sh): they may run side by side.
flock /var/lock/gpuops-apt.lock sh -c \
  "apt-get install -y -qq$missing >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq$missing >/dev/null; }"
