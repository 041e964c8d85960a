#!/usr/bin/env bash
# Build the Molecule base image (Debian 12 + systemd + python3) with debootstrap and
# `docker import`. The tag is a hash of the recipe, so the image is rebuilt only when
# the recipe changes.
#
#   build.sh --print-tag   print the image reference for the current recipe
#   build.sh               build it unless it already exists
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
repo=${GPUOPS_IMAGE_REPO:-gpuops-molecule/debian12}

recipe_hash() {
  {
    cat "$here/build.sh" "$here/packages.txt" "$here/setup-chroot.sh"
    printf '%s\n' "$suite" "$mirror" "$security_mirror"
  } | sha256sum | cut -c1-12
}

tag="$repo:$(recipe_hash)"
if [ "${1:-}" = "--print-tag" ]; then
  echo "$tag"
  exit 0
fi

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "==> base image $tag is up to date"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "ERROR: building $tag needs root (debootstrap). Run 'sudo make image', or set" >&2
  echo "       MOLECULE_IMAGE to an image with python3, systemd, sudo and iproute2." >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  if [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  else
    echo "ERROR: debootstrap is missing; install it, or set MOLECULE_IMAGE to a ready image." >&2
    exit 1
  fi
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT

echo "==> debootstrap $suite from $mirror"
packages=$(grep -vE '^\s*(#|$)' "$here/packages.txt" | paste -sd, -)
start=$(date +%s)
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
  { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES

install -m 0755 "$here/setup-chroot.sh" "$root/tmp/setup-chroot.sh"
chroot "$root" /tmp/setup-chroot.sh

echo "==> docker import $tag"
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'ENV container=docker' \
  --change 'CMD ["/lib/systemd/systemd"]' \
  --message "gpuops.cluster Molecule base image ($suite)" \
  - "$tag" >/dev/null
docker tag "$tag" "$repo:latest"
size=$(docker image inspect --format '{{.Size}}' "$tag")
echo "==> built $tag in $(( $(date +%s) - start ))s, $(( size / 1024 / 1024 )) MiB"
