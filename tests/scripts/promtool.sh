#!/usr/bin/env bash
# Print the path of a promtool: the one on PATH, else Debian's, taken from the distribution's
# prometheus package into .cache/promtool (downloaded, not installed: no service, no user). The
# alert rules' unit tests run it (promtool test rules); it is the promtool of the Prometheus the
# dcgm role installs on a Debian 12 monitoring host.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
dest=$top/.cache/promtool

if command -v promtool >/dev/null 2>&1; then
  command -v promtool
  exit 0
fi
mkdir -p "$top/.cache"
# The unit tests of several ansible-core releases may ask at once: one fetches, the others wait.
exec {lock}>"$top/.cache/promtool.lock"
flock "$lock"
if [ -x "$dest/usr/bin/promtool" ]; then
  echo "$dest/usr/bin/promtool"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ERROR: no promtool on PATH, and no apt-get to fetch Debian's: install Prometheus' promtool." >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# make test's apt-get calls take one lock (tests/image/build.sh); a fresh machine may have no lists.
(
  cd "$work"
  flock /var/lock/gpuops-apt.lock sh -c \
    'apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }'
) >&2
deb=$(ls "$work"/prometheus_*.deb)
mkdir -p "$dest.tmp"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest.tmp" ./usr/bin/promtool
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$dest/usr/bin/promtool"
