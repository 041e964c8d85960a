#!/usr/bin/env bash
# Build a Molecule base image (systemd + python3) with debootstrap and `docker import`, for the
# platform MOLECULE_DISTRO names: debian12 (the default), debian13, ubuntu2204 or ubuntu2404. The
# tag is a hash of the recipe, so an image is rebuilt only when its recipe changes.
#
#   build.sh --print-tag   print the image reference for the current recipe
#   build.sh               build it unless it already exists
#
# Trust: debootstrap checks the archive's Release signature against a keyring holding only the
# archive key pinned below (its fingerprint and where it is published), never a host's whole
# keyring. Debian's keys come from the host's debian-archive-keyring. Ubuntu's come from Debian's
# ubuntu-keyring package, fetched through Debian 13's signed index (InRelease checked with the
# host's Debian keyring, then Packages.xz and the .deb by their SHA-256), then cut down to the pin.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
distro=${MOLECULE_DISTRO:-debian12}
debian_mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ubuntu_mirror=${UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
# Release keys, as https://ftp-master.debian.org/keys.html lists them; Ubuntu's archive key (2018),
# as https://wiki.ubuntu.com/SecurityTeam/FAQ lists it (jammy and noble are signed by it alone).
debian12_key=4D64FEC119C2029067D6E791F8D2585B8783D481  # Debian Stable Release Key (12/bookworm)
debian13_key=41587F7DB8C774BCCF131416762F67A0B2C39DE4  # Debian Stable Release Key (13/trixie)
ubuntu_key=F6ECB3762474EDA9D21B7022871920D1991BC93C    # Ubuntu Archive Automatic Signing Key (2018)
case $distro in
  debian12) suite=bookworm script=bookworm family=debian key=$debian12_key ;;
  debian13) suite=trixie script=trixie family=debian key=$debian13_key ;;
  # Debian 12's debootstrap has no noble script; Ubuntu releases share gutsy's.
  ubuntu2204) suite=jammy script=gutsy family=ubuntu key=$ubuntu_key ;;
  ubuntu2404) suite=noble script=gutsy family=ubuntu key=$ubuntu_key ;;
  *)
    echo "ERROR: MOLECULE_DISTRO is '$distro'; the platforms are debian12, debian13, ubuntu2204 and ubuntu2404." >&2
    exit 2
    ;;
esac
if [ "$family" = debian ]; then
  mirror=$debian_mirror
  security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
  components=main
else
  mirror=$ubuntu_mirror
  security_mirror=${UBUNTU_SECURITY_MIRROR:-http://security.ubuntu.com/ubuntu}
  # The four components of a stock Ubuntu install: Slurm and MariaDB are in universe, Canonical's
  # NVIDIA driver packages in restricted, its Fabric Manager, NSCQ and IMEX in multiverse.
  components="main restricted universe multiverse"
fi
repo=${GPUOPS_IMAGE_REPO:-gpuops-molecule/$distro}

recipe_hash() {
  {
    cat "$here/build.sh" "$here/packages.txt" "$here/setup-chroot.sh" "$here/ansiballz_bytecode_cache.py"
    printf '%s\n' "$distro" "$suite" "$mirror" "$security_mirror" "$key"
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
    # make image builds the platforms side by side: one of them installs debootstrap, under a
    # lock, and the others wait for it (apt-get run twice at once fails on dpkg's lock). make test's
    # other apt-get calls (docker.io, shellcheck) take the same lock.
    exec {apt_lock}>/var/lock/gpuops-apt.lock
    flock "$apt_lock"
    if ! command -v debootstrap >/dev/null 2>&1; then
      echo "==> installing debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    fi
    flock -u "$apt_lock"
  else
    echo "ERROR: debootstrap is missing; install it, or set MOLECULE_IMAGE to a ready image." >&2
    exit 1
  fi
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-rootfs.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-keys.XXXXXX")
trap 'rm -rf "$root" "$work"' EXIT

# pinned_keyring SOURCE: a keyring of the pinned key alone, taken from the keyring file SOURCE.
pinned_keyring() {
  gpg --quiet --homedir "$work" --import "$1" 2>/dev/null
  gpg --quiet --homedir "$work" --export "$key" >"$work/pinned.gpg"
  got=$(gpg --homedir "$work" --show-keys --with-colons "$work/pinned.gpg" 2>/dev/null | awk -F: '$1 == "pub" {p=1; next} p && $1 == "fpr" {print $10; p=0}')
  if [ "$got" != "$key" ]; then
    echo "ERROR: $1 does not hold the pinned $distro archive key $key (found: ${got:-none})." >&2
    exit 1
  fi
}

# check_sha256 FILE SHA256 WHAT
check_sha256() {
  if [ "$(sha256sum "$1" | cut -c1-64)" != "$2" ]; then
    echo "ERROR: $3 does not match its SHA-256 $2 from Debian's signed index; not trusting it." >&2
    exit 1
  fi
}

if [ "$family" = debian ]; then
  pinned_keyring /usr/share/keyrings/debian-archive-keyring.gpg
else
  echo "==> ubuntu-keyring from Debian 13's signed index"
  curl -fsS -o "$work/InRelease" "$debian_mirror/dists/trixie/InRelease"
  gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg "$work/InRelease" 2>"$work/gpgv.log" ||
    { cat "$work/gpgv.log" >&2; echo "ERROR: Debian 13's InRelease is not signed by Debian's keys." >&2; exit 1; }
  index=main/binary-amd64/Packages.xz
  index_sha=$(awk -v f="$index" '/^SHA256:/ {s=1; next} /^[^ ]/ {s=0} s && $3 == f {print $1}' "$work/InRelease")
  curl -fsS -o "$work/Packages.xz" "$debian_mirror/dists/trixie/$index"
  check_sha256 "$work/Packages.xz" "$index_sha" "Debian 13's $index"
  xz -d "$work/Packages.xz"
  entry=$(awk '/^Package: ubuntu-keyring$/ {p=1} p && /^$/ {exit} p' "$work/Packages")
  deb=$(awk '/^Filename:/ {print $2}' <<<"$entry")
  deb_sha=$(awk '/^SHA256:/ {print $2}' <<<"$entry")
  curl -fsS -o "$work/ubuntu-keyring.deb" "$debian_mirror/$deb"
  check_sha256 "$work/ubuntu-keyring.deb" "$deb_sha" "$deb"
  dpkg-deb -x "$work/ubuntu-keyring.deb" "$work/deb"
  pinned_keyring "$work/deb/usr/share/keyrings/ubuntu-archive-keyring.gpg"
fi

echo "==> debootstrap $suite from $mirror (Release checked against $key)"
packages=$(grep -vE '^\s*(#|$)' "$here/packages.txt" | paste -sd, -)
start=$(date +%s)
debootstrap --variant=minbase --keyring="$work/pinned.gpg" --components="${components// /,}" \
  --include="$packages" "$suite" "$root" "$mirror" "/usr/share/debootstrap/scripts/$script" >"$root.log" 2>&1 ||
  { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

# The archive's own sources (debian.sources or ubuntu.sources), signed by its keyring package.
rm -f "$root/etc/apt/sources.list" "$root/etc/apt/sources.list.d/ubuntu.sources"
cat >"$root/etc/apt/sources.list.d/$family.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: $components
Signed-By: /usr/share/keyrings/$family-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: $components
Signed-By: /usr/share/keyrings/$family-archive-keyring.gpg
SOURCES

# Test nodes only: a bytecode cache for the zip every Ansible module call imports its module_utils
# from (about half of a module call's CPU on the node; see the file).
install -D -m 0644 "$here/ansiballz_bytecode_cache.py" \
  "$root/usr/lib/python3/dist-packages/gpuops_ansiballz_bytecode_cache.py"
echo "import gpuops_ansiballz_bytecode_cache" >"$root/usr/lib/python3/dist-packages/gpuops-ansiballz-bytecode-cache.pth"

# The lists of those sources, in the image (setup-chroot.sh keeps them): fetched once per image
# instead of once per node. apt's update stamp records when, for the nodes' cache_valid_time.
rm -f "$root/etc/resolv.conf"
cp /etc/resolv.conf "$root/etc/resolv.conf"
chroot "$root" apt-get -o APT::Sandbox::User=root -o Acquire::Languages=none update -qq
install -m 0755 "$here/setup-chroot.sh" "$root/tmp/setup-chroot.sh"
chroot "$root" /tmp/setup-chroot.sh

echo "==> docker import $tag"
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'ENV container=docker' \
  --change 'CMD ["/lib/systemd/systemd"]' \
  --message "gpuops.cluster Molecule base image ($distro, $suite)" \
  - "$tag" >/dev/null
docker tag "$tag" "$repo:latest"
size=$(docker image inspect --format '{{.Size}}' "$tag")
echo "==> built $tag in $(( $(date +%s) - start ))s, $(( size / 1024 / 1024 )) MiB"
