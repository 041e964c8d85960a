#!/usr/bin/env bash
# Make sure a Docker engine answers. As root on Debian/Ubuntu with none, install the
# distribution's docker.io and start dockerd in the background; otherwise say what is missing.
set -euo pipefail

log=${GPUOPS_DOCKERD_LOG:-/var/log/gpuops-dockerd.log}
wait_s=${GPUOPS_DOCKER_WAIT:-60}

engine_up() { docker info >/dev/null 2>&1; }

fail() {
  printf 'ERROR: no reachable Docker engine: %s\n' "$1" >&2
  printf '%s\n' \
    "  Molecule scenarios need one. Either start Docker yourself (systemctl start docker," \
    "  or point DOCKER_HOST at a running engine), or run make as root on Debian/Ubuntu," \
    "  where make installs the distribution's docker.io and starts dockerd." >&2
  exit 1
}

if command -v docker >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 && engine_up; then
  exit 0
fi

if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ] || ! command -v apt-get >/dev/null; then
  if ! command -v docker >/dev/null 2>&1; then
    fail "the docker command is not installed and this is not root on Debian/Ubuntu"
  fi
  if engine_up; then
    echo "ERROR: ssh-keygen is missing: Molecule reaches its nodes over SSH; install openssh-client." >&2
    exit 1
  fi
  fail "docker info failed ($(docker info 2>&1 | grep -m1 -iE 'error|cannot' || echo 'no answer'))"
fi

# Molecule reaches its nodes over SSH (the client and ssh-keygen); docker.io brings the engine.
missing=
command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
command -v ssh-keygen >/dev/null 2>&1 || missing="$missing openssh-client"
if [ -n "$missing" ]; then
  echo "==> installing$missing from the distribution"
  export DEBIAN_FRONTEND=noninteractive
  # make test's apt-get calls take one lock (tests/image/build.sh): they may run side by side.
  flock /var/lock/gpuops-apt.lock sh -c "apt-get update -qq && apt-get install -y -qq$missing >/dev/null"
fi

if ! engine_up; then
  if [ -d /run/systemd/system ] && systemctl start docker >/dev/null 2>&1; then
    echo "==> started docker.service"
  else
    echo "==> starting dockerd in the background (log: $log)"
    nohup dockerd >"$log" 2>&1 &
  fi
fi

for _ in $(seq "$wait_s"); do
  engine_up && exit 0
  sleep 1
done
fail "dockerd did not answer within ${wait_s}s; see $log"
