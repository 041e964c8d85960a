# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""package_hold run in-process against a fake dpkg status file; dpkg --set-selections rewrites it."""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuops.cluster.plugins.modules import package_hold
from module_harness import Node, run_module

STATUS = """\
Package: libnccl2
Status: install ok installed
Version: 2.26.5-1+cuda12.8

Package: libnccl-dev
Status: hold ok installed
Version: 2.26.5-1+cuda12.8

Package: libcudnn9-cuda-12
Status: install ok installed
Architecture: amd64
Version: 9.10.2.21-1

Package: libcudnn9-cuda-12
Status: hold ok installed
Architecture: i386
Version: 9.10.2.21-1

Package: nvidia-driver-570-open
Status: deinstall ok config-files
Version: 570.133.20-1
"""


class Dpkg(Node):
    """A node whose dpkg --set-selections applies its stdin to the status file, as dpkg does."""

    def __init__(self, monkeypatch, root, rc=0, ignore=()):
        super().__init__(monkeypatch, {"dpkg": "/usr/bin/dpkg"}, {})
        self.root = root
        self.rc = rc
        self.ignore = ignore
        self.stdin = []

    def run_command(self, argv, **kwargs):
        assert kwargs.get("environ_update", {}).get("LC_ALL") == "C"
        assert list(argv) == ["/usr/bin/dpkg", "--set-selections"]
        self.calls.append(list(argv))
        self.stdin.append(kwargs["data"])
        path = self.root / "var/lib/dpkg/status"
        text = path.read_text()
        for line in kwargs["data"].splitlines():
            name, selection = line.split()
            if name in self.ignore:
                continue
            text = re.sub(
                rf"(?m)^(Package: {re.escape(name)}\nStatus: )\w+", lambda m, s=selection: m.group(1) + s, text
            )
        path.write_text(text)
        return self.rc, "", ""


@pytest.fixture
def root(tmp_path):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(STATUS)
    return tmp_path


def test_holds_only_what_is_not_held_in_one_dpkg_call(monkeypatch, root):
    node = Dpkg(monkeypatch, root)
    result = run_module(package_hold.main, {"name": ["libnccl2", "libnccl-dev"], "root": str(root)}).result
    assert result["changed"] is True
    assert result["changed_packages"] == ["libnccl2"]
    assert result["held"] == ["libnccl-dev", "libnccl2"]
    assert node.stdin == ["libnccl2 hold\n"]
    assert "Package: libnccl2\nStatus: hold ok installed" in (root / "var/lib/dpkg/status").read_text()


def test_a_held_set_is_left_alone_without_running_dpkg(monkeypatch, root):
    node = Dpkg(monkeypatch, root)
    result = run_module(package_hold.main, {"name": ["libnccl-dev"], "root": str(root)}).result
    assert result["changed"] is False
    assert result["changed_packages"] == []
    assert node.calls == []


def test_a_multiarch_package_held_on_one_architecture_counts_as_held(monkeypatch, root):
    node = Dpkg(monkeypatch, root)
    result = run_module(package_hold.main, {"name": ["libcudnn9-cuda-12"], "root": str(root)}).result
    assert result["changed"] is False
    assert node.calls == []


def test_release_gives_held_packages_back_to_apt(monkeypatch, root):
    node = Dpkg(monkeypatch, root)
    args = {"name": ["libnccl-dev", "libnccl2"], "state": "released", "root": str(root)}
    result = run_module(package_hold.main, args).result
    assert result["changed_packages"] == ["libnccl-dev"]
    assert result["held"] == []
    assert node.stdin == ["libnccl-dev install\n"]


def test_check_mode_reports_and_changes_nothing_with_a_diff(monkeypatch, root):
    node = Dpkg(monkeypatch, root)
    args = {"name": ["libnccl2", "libnccl-dev"], "root": str(root), "_ansible_diff": True}
    result = run_module(package_hold.main, args, check_mode=True).result
    assert result["changed"] is True
    assert result["diff"] == {"before": "libnccl2 install\n", "after": "libnccl2 hold\n"}
    assert node.calls == []
    assert (root / "var/lib/dpkg/status").read_text() == STATUS


@pytest.mark.parametrize("name", ["nvidia-open-580", "nvidia-driver-570-open"])
def test_a_package_dpkg_does_not_have_installed_is_refused_by_name(monkeypatch, root, name):
    # nvidia-driver-570-open is only config files: dpkg knows it but as deinstall; holding it is allowed
    # by dpkg, so only the unknown name is refused.
    node = Dpkg(monkeypatch, root)
    exited = run_module(package_hold.main, {"name": ["libnccl2", name], "root": str(root)})
    if name == "nvidia-open-580":
        assert exited.failed
        assert "cannot hold nvidia-open-580: dpkg does not know it (not installed)" in exited.result["msg"]
        assert node.calls == []
    else:
        assert not exited.failed
        assert exited.result["changed_packages"] == ["libnccl2", name]


def test_check_mode_warns_about_an_unknown_package_after_a_simulated_install(monkeypatch, root):
    node = Dpkg(monkeypatch, root)
    result = run_module(package_hold.main, {"name": ["nvidia-open-580"], "root": str(root)}, check_mode=True).result
    assert result["changed_packages"] == ["nvidia-open-580"]
    assert any("cannot hold nvidia-open-580" in w for w in node.warnings)


@pytest.mark.parametrize("bad", ["libnccl2=2.26.5-1", "libnccl2:amd64", "Libnccl2", "x", ""])
def test_a_name_with_a_version_or_architecture_is_refused_before_reading(monkeypatch, root, bad):
    node = Dpkg(monkeypatch, root)
    exited = run_module(package_hold.main, {"name": [bad], "root": str(root)})
    assert exited.failed
    assert "not Debian package names" in exited.result["msg"]
    assert node.calls == []


def test_a_selection_dpkg_ignored_fails_with_the_package_named(monkeypatch, root):
    Dpkg(monkeypatch, root, ignore=("libnccl2",))
    exited = run_module(package_hold.main, {"name": ["libnccl2"], "root": str(root)})
    assert exited.failed
    assert exited.result["msg"].startswith("dpkg --set-selections did not take hold for libnccl2")


def test_no_dpkg_status_file_is_a_clear_error(monkeypatch, tmp_path):
    Dpkg(monkeypatch, tmp_path)
    exited = run_module(package_hold.main, {"name": ["libnccl2"], "root": str(tmp_path)})
    assert exited.failed
    assert "package_hold works on dpkg systems only" in exited.result["msg"]
