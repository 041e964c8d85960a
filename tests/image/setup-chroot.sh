#!/bin/sh
# Runs inside the freshly bootstrapped root: make systemd happy as PID 1 in an
# unprivileged container and keep the image small.
set -eu

# Units that need hardware or privileges a container does not have.
for unit in \
  systemd-remount-fs.service systemd-udevd.service systemd-udev-trigger.service \
  systemd-modules-load.service sys-kernel-config.mount sys-kernel-debug.mount \
  sys-fs-fuse-connections.mount getty.target console-getty.service \
  systemd-firstboot.service systemd-sysusers.service; do
  ln -sf /dev/null "/etc/systemd/system/$unit"
done

# The SSH host keys stay those the build made: every node of every image shares them. A test node
# listens only on its scenario's Docker network, and the harness does not check host keys
# (UserKnownHostsFile=/dev/null); a key per container would cost each start an RSA key generation.

# A fresh machine id at every container start, as on first boot.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id

# Docker provides these.
rm -f /etc/hostname /etc/resolv.conf

# Never start services from maintainer scripts at image build time; containers do it at run time.
rm -f /usr/sbin/policy-rc.d

# The package descriptions' translations are of no use to a test node, and on Ubuntu they are a
# large part of what each node's first apt-get update fetches (every pocket, four components).
printf 'Acquire::Languages "none";\n' >/etc/apt/apt.conf.d/99gpuops-test-no-translations

# The package lists stay (build.sh fetched them): every node of every scenario would fetch the same
# ones again (134 MiB and about 15 s on Ubuntu 24.04, 51 MiB and 5 s on Debian 12); a node refreshes
# them itself when the image is older than six hours (tests/gpusim/tasks/node-ready.yml).
apt-get clean
rm -rf /var/lib/apt/lists/partial/* /usr/share/doc/* /usr/share/man/* \
  /usr/share/locale/* /var/log/*.log /tmp/* /var/tmp/*
