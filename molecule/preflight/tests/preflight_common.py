# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the preflight verify tests share."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# The collection's own table of distributions (CUDA repository folder, whether a scenario runs the
# roles there): preflight warns on a platform it does not call tested.
_spec = importlib.util.spec_from_file_location(
    "gpuops_compat", Path(__file__).resolve().parents[3] / "plugins" / "module_utils" / "compat.py"
)
compat = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compat)


def os_release(host):
    fields = dict(
        line.split("=", 1) for line in host.file("/etc/os-release").content_string.splitlines() if "=" in line
    )
    return {k: v.strip('"') for k, v in fields.items()}


def platform(host):
    """(CUDA repository folder, tested) of the node's distribution, as compat.DISTRIBUTIONS has it."""
    release = os_release(host)
    name = {"debian": "Debian", "ubuntu": "Ubuntu"}[release["ID"]]
    return compat.DISTRIBUTIONS[(name, release["VERSION_ID"].split(".")[0])]


def headers_available(host):
    kernel = host.check_output("uname -r")
    if host.file(f"/lib/modules/{kernel}/build").is_directory:
        return True
    policy = host.run(f"apt-cache policy linux-headers-{kernel}").stdout
    return "Candidate:" in policy and "Candidate: (none)" not in policy


def stack_packages(host):
    """Installed packages of the NVIDIA stack: preflight must leave this empty."""
    installed = host.check_output("dpkg-query -W -f '${Package}\\n'").split()
    return [p for p in installed if p.startswith(("nvidia", "libnvidia", "cuda", "libcudnn", "libnccl"))]
