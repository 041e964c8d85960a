# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_packages run in-process against a fake dpkg status file; the fake apt-get edits it as dpkg would."""

from __future__ import annotations

import os
import re

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils.dpkg import missing, package_states, version_matches
from ansible_collections.gpuops.cluster.plugins.modules import apt_packages
from module_harness import Node, run_module

STATUS = """\
Package: libnccl2
Status: install ok installed
Version: 2.26.5-1+cuda12.8

Package: datacenter-gpu-manager-4-core
Status: hold ok installed
Version: 1:4.4.1-1

Package: nvidia-docker2
Status: deinstall ok config-files
Version: 2.14.0-1
"""

APT_GET = "/usr/bin/apt-get"
PREFIX = [APT_GET, "-y", "-q", "-o", "DPkg::Lock::Timeout=60", "-o", "Dpkg::Options::=--force-confdef", "-o",
          "Dpkg::Options::=--force-confold"]  # fmt: skip


class Apt(Node):
    """A node whose apt-get install/remove/purge and dpkg --set-selections rewrite the status file."""

    def __init__(self, monkeypatch, root, rc=0, err="", broken=()):
        super().__init__(monkeypatch, {"apt-get": APT_GET, "dpkg": "/usr/bin/dpkg"}, {})
        self.root = root
        self.rc = rc
        self.err = err
        self.broken = broken  # packages apt-get "installs" without dpkg recording them

    @property
    def status(self):
        return self.root / "var/lib/dpkg/status"

    def _set(self, name, status, version=None):
        text = self.status.read_text()
        stanza = re.compile(rf"(?ms)^Package: {re.escape(name)}\n.*?(?:\n\n|\Z)")
        old = stanza.search(text)
        version = version or (re.search(r"Version: (\S+)", old.group(0)).group(1) if old else "0")
        new = f"Package: {name}\nStatus: {status}\nVersion: {version}\n\n"
        text = stanza.sub(lambda m: new, text, count=1) if old else text.rstrip("\n") + "\n\n" + new
        self.status.write_text(text)

    def run_command(self, argv, **kwargs):
        env = kwargs.get("environ_update", {})
        assert env.get("LC_ALL") == "C"
        self.calls.append(list(argv))
        if argv[0] == "/usr/bin/dpkg":
            for line in kwargs["data"].splitlines():
                name, selection = line.split()
                text = self.status.read_text()
                self.status.write_text(
                    re.sub(rf"(?m)^(Package: {re.escape(name)}\nStatus: )\w+", rf"\g<1>{selection}", text)
                )
            return 0, "", ""
        assert env.get("DEBIAN_FRONTEND") == "noninteractive"
        if argv[-1] == "update":
            return 0, "", ""
        if self.rc or "--simulate" in argv:
            return self.rc, "simulated", self.err
        command = next(a for a in argv if a in ("install", "remove", "purge"))
        for target in argv[argv.index(command) + 1 :]:
            name, _sep, version = target.partition("=")
            if name in self.broken:
                continue
            if command == "install":
                self._set(name, "install ok installed", version.replace("*", "1") or "1.0-1")
            else:
                self._set(name, "deinstall ok config-files" if command == "remove" else "purge ok not-installed")
        return 0, f"{command} done", ""


@pytest.fixture
def root(tmp_path):
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(STATUS)
    (tmp_path / "var/lib/apt/lists").mkdir(parents=True)
    (tmp_path / "var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease").write_text("x")
    return tmp_path


def apt(root, check_mode=False, **args):
    return run_module(apt_packages.main, {"root": str(root), **args}, check_mode=check_mode)


@pytest.mark.parametrize(
    ("installed", "wanted", "ok"),
    [
        ("2.26.5-1+cuda12.8", "2.26.5-1+cuda12.8", True),
        ("2.26.5-1+cuda12.8", "2.26.5-1+cuda12.4", False),
        ("1:4.4.1-1", "1:4.4.1-*", True),
        ("1:4.4.1-1", "4.4.1-*", True),
        ("1:4.4.1-1", "4.4.1-1", True),
        ("1:4.4.1-1", "2:4.4.1-1", False),
        ("580.95.05-1", "580.95.0*", True),
        ("580.95.05-1", "580.65.06-*", False),
        ("580.95.05-1", None, True),
    ],
)
def test_version_matching_follows_apt_gets_glob(installed, wanted, ok):
    assert version_matches(installed, wanted) is ok


def test_a_set_in_place_runs_no_command(monkeypatch, root):
    node = Apt(monkeypatch, root)
    result = apt(root, name=["libnccl2=2.26.5-1+cuda12.8", "datacenter-gpu-manager-4-core=1:4.4.1-*"], hold=False)
    assert not result.failed
    assert result.result["changed"] is False
    assert result.result["versions"] == {"libnccl2": "2.26.5-1+cuda12.8", "datacenter-gpu-manager-4-core": "1:4.4.1-1"}
    assert node.calls == []


def test_what_is_missing_is_installed_in_one_apt_get_call_then_held(monkeypatch, root):
    node = Apt(monkeypatch, root)
    result = apt(
        root,
        name=["libnccl2=2.26.5-1+cuda12.8", "libnccl-dev=2.26.5-1+cuda12.8"],
        hold=True,
        allow_downgrade=True,
        allow_change_held_packages=True,
    ).result
    assert result["changed"] is True
    assert result["changed_packages"] == ["libnccl-dev=2.26.5-1+cuda12.8"]
    assert result["held_packages"] == ["libnccl-dev", "libnccl2"]
    assert node.calls[0] == [*PREFIX, "--no-install-recommends", "--allow-downgrades", "--allow-change-held-packages",
                             "install", "libnccl-dev=2.26.5-1+cuda12.8"]  # fmt: skip
    assert node.calls[1] == ["/usr/bin/dpkg", "--set-selections"]
    states = package_states((root / "var/lib/dpkg/status").read_text(), ["libnccl2", "libnccl-dev"])
    assert {name: s["selection"] for name, s in states.items()} == {"libnccl2": "hold", "libnccl-dev": "hold"}


def test_another_version_installed_is_a_change(monkeypatch, root):
    node = Apt(monkeypatch, root)
    result = apt(root, name=["libnccl2=2.21.5-1+cuda12.4"]).result
    assert result["changed_packages"] == ["libnccl2=2.21.5-1+cuda12.4"]
    assert result["versions"] == {"libnccl2": "2.21.5-1+cuda12.4"}
    assert "--allow-downgrades" not in node.calls[0]


def test_check_mode_simulates_and_changes_nothing(monkeypatch, root):
    node = Apt(monkeypatch, root)
    result = apt(root, check_mode=True, name=["libnccl-dev=2.26.5-1+cuda12.8"], hold=True, _ansible_diff=True).result
    assert result["changed"] is True
    assert node.calls == [
        [*PREFIX, "--simulate", "--no-install-recommends", "install", "libnccl-dev=2.26.5-1+cuda12.8"]
    ]
    assert (root / "var/lib/dpkg/status").read_text() == STATUS
    assert "libnccl-dev not installed" in result["diff"]["before"]


def test_check_mode_simulates_with_the_pins_the_real_run_writes_first(monkeypatch, root):
    """A fresh node in check mode has no pin file yet: apt takes candidate versions only, so a release
    older than the index's newest resolves its dependencies at the newest and fails; the simulation
    reads the pins given, from a file that is gone afterwards. Outside check mode they are not used."""
    seen = []

    class Pinned(Apt):
        def run_command(self, argv, **kwargs):
            option = [a for a in argv if a.startswith("Dir::Etc::Preferences=")]
            if option:
                path = option[0].partition("=")[2]
                with open(path, encoding="utf-8") as handle:
                    seen.append((path, handle.read()))
            return super().run_command(argv, **kwargs)

    Pinned(monkeypatch, root)
    pins = "Package: nvidia-* libnvidia-*\nPin: version 580.178.04-*\nPin-Priority: 1001\n"
    name = ["nvidia-utils-580-server=580.178.04-0ubuntu0.24.04.1"]
    assert apt(root, check_mode=True, name=name, simulate_preferences=pins).result["changed"]
    assert len(seen) == 1 and seen[0][1] == pins and not os.path.exists(seen[0][0])
    assert apt(root, name=name, simulate_preferences=pins).result["changed"]
    assert len(seen) == 1


def test_check_mode_reports_a_version_the_repositories_do_not_have(monkeypatch, root):
    Apt(monkeypatch, root, rc=100, err="E: Version '9.9' for 'libnccl2' was not found")
    exited = apt(root, check_mode=True, name=["libnccl2=9.9"])
    assert exited.failed
    assert "--simulate" in exited.result["msg"]
    assert "Version '9.9' for 'libnccl2' was not found" in exited.result["msg"]


def test_apt_get_success_without_the_package_in_place_fails_with_its_output(monkeypatch, root):
    Apt(monkeypatch, root, broken=("libnccl-dev",))
    exited = apt(root, name=["libnccl-dev=2.26.5-1+cuda12.8"])
    assert exited.failed
    assert exited.result["msg"].startswith(
        "apt-get install ran but libnccl-dev=2.26.5-1+cuda12.8 is still not as asked; apt-get said: install done"
    )


def test_absent_removes_installed_and_purges_leftover_configuration(monkeypatch, root):
    node = Apt(monkeypatch, root)
    assert apt(root, name=["nvidia-docker2", "not-there"], state="absent").result["changed"] is False
    assert node.calls == []
    result = apt(root, name=["nvidia-docker2", "libnccl2"], state="absent", purge=True).result
    assert result["changed_packages"] == ["nvidia-docker2", "libnccl2"]
    assert node.calls[-1][-3:] == ["purge", "nvidia-docker2", "libnccl2"]
    assert result["versions"] == {"nvidia-docker2": None, "libnccl2": None}


def test_old_package_lists_are_refreshed_before_an_install(monkeypatch, root):
    node = Apt(monkeypatch, root)
    lists = root / "var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease"
    os.utime(lists, (1, 1))
    apt(root, name=["numactl"], cache_valid_time=3600)
    assert node.calls[0] == [APT_GET, "-q", "update"]
    assert node.calls[1][-2:] == ["install", "numactl"]


def test_fresh_package_lists_are_not_refreshed(monkeypatch, root):
    node = Apt(monkeypatch, root)
    apt(root, name=["numactl"], cache_valid_time=3600)
    assert [APT_GET, "-q", "update"] not in node.calls


def test_update_cache_refreshes_fresh_lists_when_something_is_installed(monkeypatch, root):
    node = Apt(monkeypatch, root)
    apt(root, name=["libnccl2=2.26.5-1+cuda12.8"], update_cache=True)
    assert node.calls == []  # in place: nothing to install, no refresh
    apt(root, name=["numactl"], update_cache=True)
    assert node.calls[0] == [APT_GET, "-q", "update"]


def test_a_change_returns_the_packages_as_facts_and_a_no_op_does_not(monkeypatch, root):
    Apt(monkeypatch, root)
    assert "ansible_facts" not in apt(root, name=["libnccl2=2.26.5-1+cuda12.8"]).result
    assert "ansible_facts" not in apt(root, check_mode=True, name=["numactl"]).result
    packages = apt(root, name=["numactl"]).result["ansible_facts"]["packages"]
    assert packages["numactl"] == [{"name": "numactl", "version": "1.0-1", "arch": "", "source": "dpkg"}]
    assert "libnccl2" in packages
    removed = apt(root, name=["numactl"], state="absent").result["ansible_facts"]["packages"]
    assert "numactl" not in removed and "libnccl2" in removed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"name": ["libnccl2==2"]}, "give Debian package names"),
        ({"name": ["libnccl2=2.26.5-1; rm -rf /"]}, "give Debian package names"),
        ({"name": ["libnccl2=2.26.5-1"], "state": "absent"}, "for state present only"),
        ({"name": ["libnccl2"], "state": "absent", "hold": True}, "a removed package cannot be held"),
    ],
)
def test_bad_input_is_refused_before_any_command(monkeypatch, root, args, message):
    node = Apt(monkeypatch, root)
    exited = apt(root, **args)
    assert exited.failed
    assert message in exited.result["msg"]
    assert node.calls == []


def test_missing_is_linear_on_a_large_status_file():
    status = "".join(f"Package: pkg{i}\nStatus: install ok installed\nVersion: 1.{i}-1\n\n" for i in range(20000))
    states = package_states(status, [f"pkg{i}" for i in range(0, 20000, 7)])
    assert missing(states, [f"pkg{i}=1.{i}-1" for i in range(0, 20000, 7)]) == []
