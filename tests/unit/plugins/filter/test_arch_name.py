# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One table of CPU architectures: each vendor's name for a host's architecture, and no role that
decides it by itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.arch_name import arch_name
from ansible_collections.gpuops.cluster.plugins.module_utils import bundle, compat

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    ("machine", "kind", "name"),
    [
        ("x86_64", "debian", "amd64"),
        ("x86_64", "cuda", "x86_64"),
        ("x86_64", "doca", "x86_64"),
        ("aarch64", "debian", "arm64"),
        ("aarch64", "cuda", "sbsa"),
        ("aarch64", "doca", "arm64-sbsa"),
        ("aarch64", "rpm", "aarch64"),
        ("aarch64", "ubuntu_archive", "http://ports.ubuntu.com/ubuntu-ports"),
        ("arm64", "cuda", "sbsa"),
        ("amd64", "debian", "amd64"),
    ],
)
def test_each_vendor_names_the_architecture_its_way(machine, kind, name):
    assert arch_name(machine, kind) == name


def test_another_architecture_or_vendor_is_named_with_what_there_is():
    with pytest.raises(AnsibleFilterError, match=r"'ppc64le' has no NVIDIA datacenter packages .* x86_64, aarch64"):
        arch_name("ppc64le", "debian")
    with pytest.raises(AnsibleFilterError, match=r"'snap' is not one of debian, cuda, doca, rpm, ubuntu_archive"):
        arch_name("x86_64", "snap")


def test_the_resolver_and_the_bundle_read_the_same_table():
    assert compat.REPO_ARCH == {"x86_64": "x86_64", "aarch64": "sbsa", "amd64": "x86_64", "arm64": "sbsa"}
    assert bundle.DEBIAN_ARCH == {"x86_64": "amd64", "aarch64": "arm64"}
    assert bundle.UBUNTU_MIRRORS["aarch64"] == "http://ports.ubuntu.com/ubuntu-ports"


def test_no_role_decides_an_architecture_name_by_itself():
    """A role that wrote 'arm64' if aarch64 itself would go its own way when the table grows."""
    inline = re.compile(r"architecture\s*==\s*'(aarch64|x86_64)'|'(arm64|amd64|sbsa|arm64-sbsa)'\s+if\s")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("roles", "playbooks")
        for path in sorted((ROOT / folder).rglob("*.yml"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if inline.search(line)
    ]
    assert found == []
