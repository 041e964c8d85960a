#!/usr/bin/env bash
# Make sure a headless Chromium is there for make docs' pictures. As root on Debian/Ubuntu without
# one, install the distribution's chromium; otherwise say what is missing.
set -euo pipefail
# Chromium itself depends on no font (fonts-liberation is only its recommendation): without one the
# pages' text would not be drawn. fc-list (fontconfig) says whether any is there.
has_font() { command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list 2>/dev/null | head -n 1)" ]; }
for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1 && has_font; then
    exit 0
  fi
done
if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ] || ! command -v apt-get >/dev/null; then
  echo "ERROR: make docs renders the docsite with a headless Chromium, and none is installed" \
    "(chromium, chromium-browser or google-chrome on the PATH, and a font fc-list lists): install them," \
    "or run make as root on Debian/Ubuntu, where make installs the distribution's chromium and fonts." >&2
  exit 1
fi
echo "==> installing chromium and fonts-liberation from the distribution"
apt_log=$(mktemp)
if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-liberation fontconfig; } \
  >"$apt_log" 2>&1; then
  tail -n 20 "$apt_log" >&2
  echo "ERROR: apt-get could not install chromium (above)." >&2
  exit 1
fi
rm -f "$apt_log"
