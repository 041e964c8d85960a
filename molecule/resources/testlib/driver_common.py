# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the driver scenarios read back from a node: installed packages, holds, services."""

from __future__ import annotations

DRIVER_PREFIXES = ("nvidia-", "libnvidia-", "cuda-drivers")
NOT_DRIVER = ("nvidia-container", "libnvidia-container", "nvidia-docker")


def installed(host):
    """{package: version} of what dpkg has installed."""
    out = host.check_output("dpkg-query -W -f '${db:Status-Status} ${Package} ${Version}\\n'")
    return {
        name: version for status, name, version in (line.split() for line in out.splitlines()) if status == "installed"
    }


def driver_packages(host):
    return {
        name: version
        for name, version in installed(host).items()
        if name.startswith(DRIVER_PREFIXES) and not name.startswith(NOT_DRIVER)
    }


def held(host):
    return set(host.check_output("apt-mark showhold").split())


def smi_versions(host):
    return host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").split()


def upgradable(host):
    """Packages a routine `apt-get dist-upgrade` would change (simulated)."""
    out = host.check_output("apt-get -s -o Debug::NoLocking=1 dist-upgrade")
    return sorted({line.split()[1] for line in out.splitlines() if line.startswith("Inst ")})
