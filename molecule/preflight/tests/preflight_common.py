# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the preflight verify tests share."""

from __future__ import annotations


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
