# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers every scenario's tests share."""

from __future__ import annotations


def name(host):
    """The platform's name, as molecule.yml gives it (the container's hostname)."""
    return host.backend.get_hostname()
