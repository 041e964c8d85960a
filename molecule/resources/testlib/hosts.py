# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers every scenario's tests share."""

from __future__ import annotations


def name(host):
    """The platform's name, as molecule.yml gives it (the container's hostname)."""
    return host.backend.get_hostname()


def management_address(host):
    """The source address of the node's default route (what ansible_facts.default_ipv4.address is)."""
    return host.check_output(
        'python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); '
        "s.connect(('192.0.2.1', 9)); print(s.getsockname()[0])\""
    )
