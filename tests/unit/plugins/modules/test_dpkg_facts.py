# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dpkg_facts against a fake status file: package_facts' shape, installed packages only."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.modules import dpkg_facts
from module_harness import Node, run_module

STATUS = """\
Package: libnccl2
Status: hold ok installed
Architecture: amd64
Version: 2.26.5-1+cuda12.8
Description: NVIDIA Collective Communication Library
 continuation line: Version: 9.9

Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u10

Package: libc6
Status: install ok installed
Architecture: i386
Version: 2.36-9+deb12u10

Package: nvidia-docker2
Status: deinstall ok config-files
Architecture: all
Version: 2.14.0-1

Package: datacenter-gpu-manager
Status: install ok half-configured
Version: 1:3.3.9
"""


@pytest.mark.parametrize("check_mode", [False, True])
def test_installed_packages_in_package_facts_shape(monkeypatch, tmp_path, check_mode):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(STATUS)
    node = Node(monkeypatch, {}, {})
    result = run_module(dpkg_facts.main, {"root": str(tmp_path)}, check_mode=check_mode).result
    assert result["changed"] is False
    packages = result["ansible_facts"]["packages"]
    # Config files left and a half-configured package are not installed packages.
    assert sorted(packages) == ["libc6", "libnccl2"]
    assert packages["libnccl2"] == [
        {"name": "libnccl2", "version": "2.26.5-1+cuda12.8", "arch": "amd64", "source": "dpkg"}
    ]
    assert [p["arch"] for p in packages["libc6"]] == ["amd64", "i386"]
    assert node.calls == []


def test_a_node_without_dpkg_gets_a_clear_error(monkeypatch, tmp_path):
    Node(monkeypatch, {}, {})
    exited = run_module(dpkg_facts.main, {"root": str(tmp_path)})
    assert exited.failed
    assert "use ansible.builtin.package_facts" in exited.result["msg"]
