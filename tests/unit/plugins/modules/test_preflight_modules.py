# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""stack_check and host_check run in-process, the host readers, and the problems_report filter."""

from __future__ import annotations

import base64
import gzip
import lzma
import os

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.problems_report import problems_report
from ansible_collections.gpuops.cluster.plugins.module_utils import host
from ansible_collections.gpuops.cluster.plugins.modules import host_check, stack_check
from conftest import FIXTURES, profile_facts
from module_harness import Node, run_module

# One name per assignment: ansible-lint reads module-level assignments of files under plugins/modules
# as plugin documentation, and warns on a tuple target.
H100 = profile_facts("dgx-h100")
V100 = profile_facts("dgx1-v100")

# The stack options take the preflight role's defaults (stack_spec.py); an empty string is "none".
STACK = {
    "nvidia_driver_branch": "580",
    "cuda_versions": ["12.8"],
    "cudnn_version": "",
    "nccl_version": "",
    "distribution": "Debian",
    "distribution_major_version": "12",
    "kernel": "6.1.0-28-amd64",
    "today": "2026-11-21",
}


@pytest.mark.parametrize("check_mode", [False, True])
def test_stack_check_passes_a_sound_stack_and_changes_nothing(monkeypatch, check_mode):
    node = Node(monkeypatch, {}, {})
    result = run_module(stack_check.main, dict(STACK, nvidia_gpu=H100), check_mode=check_mode)
    assert not result.failed
    assert result.result["changed"] is False
    assert result.result["error_count"] == 0
    assert result.result["resolved"]["fabricmanager"]["required"] is True
    assert node.calls == []


def test_stack_check_fails_once_listing_every_error(monkeypatch):
    Node(monkeypatch, {}, {})
    args = dict(STACK, nvidia_gpu=V100, nvidia_driver_kernel_module="open", cuda_versions=["13.0"], nccl_version="3.12")
    result = run_module(stack_check.main, args)
    assert result.failed
    msg = result.result["msg"]
    assert msg.startswith("The declared stack cannot work on this node: 3 error(s)")
    for text in (
        "nvidia_driver_kernel_module: open kernel modules",
        "cuda_versions: CUDA 13.0 removed Volta",
        "nccl_version: there is no NCCL 3.12",
    ):
        assert text in msg
    assert result.result["error_count"] == 3
    assert len(result.result["problems"]) == 3


def test_stack_check_can_leave_the_failing_to_the_caller(monkeypatch):
    node = Node(monkeypatch, {}, {})
    args = dict(STACK, nvidia_gpu=V100, cuda_versions=["13.0"], fail_on_error=False)
    result = run_module(stack_check.main, args)
    assert not result.failed and result.result["error_count"] == 1
    assert node.warnings == []


def test_stack_check_turns_warnings_into_ansible_warnings(monkeypatch):
    node = Node(monkeypatch, {}, {})
    result = run_module(stack_check.main, dict(STACK, nvidia_gpu=H100, nvidia_driver_branch="570"))
    assert not result.failed
    assert node.warnings == [
        "nvidia_driver_branch: R570 has reached end of life (2026-02-28) and gets no security fixes. Fix: move to a "
        'supported branch, e.g. nvidia_driver_branch: "580" (LTSB, until 2028-06-30).'
    ]


def test_stack_check_rejects_a_bad_date(monkeypatch):
    Node(monkeypatch, {}, {})
    result = run_module(stack_check.main, dict(STACK, today="21/11/2026"))
    assert result.failed and "today: '21/11/2026' is not a date" in result.result["msg"]


def test_stack_check_splits_a_comma_string_and_names_the_parts(monkeypatch):
    Node(monkeypatch, {}, {})
    result = run_module(stack_check.main, dict(STACK, cuda_versions="12,8", nvidia_driver_branch="R570"))
    assert result.failed
    assert "nvidia_driver_branch: 'R570' is not a driver branch" in result.result["msg"]
    assert "cuda_versions: '12' is not a CUDA version" in result.result["msg"]
    assert "cuda_versions: '8' is not a CUDA version" in result.result["msg"]
    assert result.result["resolved"] is None


# --- host_check ----------------------------------------------------------------------------------

DPKG_STATUS = """Package: libnvidia-compute-570
Status: install ok installed
Version: 570.133.20-1

Package: nvidia-utils-580
Status: install ok installed
Version: 580.95.05-1

Package: nvidia-driver-pinning-570
Status: install ok installed
Version: 570.133.20-1

Package: nvidia-container-toolkit
Status: install ok installed
Version: 1.17.8-1

Package: nvidia-docker2
Status: install ok installed
Version: 2.14.0-1

Package: nvidia-utils-575
Status: deinstall ok config-files
Version: 575.57.08-1

Package: bash
Status: install ok installed
Version: 5.2.15-2+b7
"""


def make_root(tmp_path, *, status=DPKG_STATUS, modules="", efivar=None, sources=None, keyrings=None):
    root = tmp_path / "root"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(status)
    (root / "proc").mkdir()
    (root / "proc/modules").write_text(modules)
    (root / "etc/apt/sources.list.d").mkdir(parents=True)
    (root / "etc/apt/trusted.gpg.d").mkdir(parents=True)
    for name, text in (sources or {}).items():
        (root / "etc/apt/sources.list.d" / name).write_text(text)
    for name, data in (keyrings or {}).items():
        (root / "etc/apt" / name).write_bytes(data)
    if efivar is not None:
        (root / "sys/firmware/efi/efivars").mkdir(parents=True)
        (root / "sys/firmware/efi/efivars" / host.SECURE_BOOT_VAR).write_bytes(efivar)
    (root / "lib/modules/6.1.0-28-amd64/build").mkdir(parents=True)
    return root


def test_host_check_reports_leftovers_secure_boot_and_nouveau(monkeypatch, tmp_path):
    old_key = b"\x99\x01\x0d" + b"\x00" * 40 + bytes.fromhex("F60F4B3D7FA2AF80") + b"\x00" * 8
    armored = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{}\n=abcd\n-----END PGP PUBLIC KEY BLOCK-----\n".format(
        base64.b64encode(b"\x00" * 10 + bytes.fromhex("A4B469963BF863CC")).decode()
    )
    root = make_root(
        tmp_path,
        modules="nouveau 2428928 0 - Live 0x0000000000000000\ndrm 622592 3 nouveau, Live 0x0\n",
        efivar=b"\x06\x00\x00\x00\x01",
        sources={
            "cuda.list": "deb https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /\n",
            "ok.list": "deb [signed-by=/etc/apt/keyrings/cuda.gpg] https://developer.download.nvidia.com/x/ /\n",
            "doca.sources": "Types: deb\nURIs: https://linux.mellanox.com/public/repo/doca/2.9.1/debian12/x86_64/\n"
            "Suites: ./\n",
        },
        keyrings={"trusted.gpg": old_key, "trusted.gpg.d/cuda.asc": armored.encode()},
    )
    node = Node(monkeypatch, {}, {})
    result = run_module(host_check.main, {"root": str(root), "kernel": "6.1.0-28-amd64", "min_free_gib": {"/": 0}})
    assert not result.failed and result.result["changed"] is False
    seen = result.result["node"]
    assert seen["secure_boot"] == "enabled" and "dkms_signing_key" not in seen
    assert seen["nouveau_loaded"] and not seen["nvidia_loaded"]
    assert seen["kernel_headers"]["installed"]
    assert seen["driver_branches"] == {
        "570": ["libnvidia-compute-570", "nvidia-driver-pinning-570"],
        "580": ["nvidia-utils-580"],
    }
    assert "bash" not in seen["packages"] and "nvidia-utils-575" not in seen["packages"]
    assert seen["apt_keys"] == [
        {"file": "/etc/apt/trusted.gpg", "keys": ["F60F4B3D7FA2AF80"]},
        {"file": "/etc/apt/trusted.gpg.d/cuda.asc", "keys": ["A4B469963BF863CC"]},
    ]
    assert [s["file"] for s in seen["unsigned_sources"]] == [
        "/etc/apt/sources.list.d/cuda.list",
        "/etc/apt/sources.list.d/doca.sources",
    ]
    problems = result.result["problems"]
    by_severity = {}
    for item in problems:
        by_severity.setdefault(item["severity"], []).append(item["message"])
    # Two unsigned sources, mixed branches; Secure Boot is nvidia_driver's inputs.yml's to judge.
    assert len(by_severity["error"]) == 3
    assert not any("Secure Boot" in m for m in by_severity["error"])
    assert any("several branches are installed: R570" in m for m in by_severity["error"])
    assert any("nouveau module is loaded" in m for m in by_severity["warning"])
    assert any("nvidia-docker2 2.14.0-1 is installed" in m for m in by_severity["warning"])
    assert sum("apt-key" in m for m in by_severity["warning"]) == 2
    assert node.calls == []


def test_host_check_clean_node(monkeypatch, tmp_path):
    status = "Package: libnvidia-compute-580\nStatus: install ok installed\nVersion: 580.95.05-1\n"
    root = make_root(tmp_path, status=status, efivar=b"\x06\x00\x00\x00\x00")
    Node(monkeypatch, {}, {})
    result = run_module(host_check.main, {"root": str(root), "kernel": "6.1.0-28-amd64", "min_free_gib": {"/": 0}})
    assert result.result["problems"] == []
    assert result.result["node"]["secure_boot"] == "disabled"
    assert result.result["node"]["driver_branches"] == {"580": ["libnvidia-compute-580"]}


def test_host_check_missing_headers_and_space(monkeypatch, tmp_path):
    root = make_root(tmp_path)
    Node(monkeypatch, {}, {})
    args = {"root": str(root), "kernel": "6.18.0-custom", "min_free_gib": {"/opt/missing": 10**6}}
    result = run_module(host_check.main, args)
    messages = {p["variable"]: p for p in result.result["problems"]}
    assert messages["preflight_kernel_headers"]["severity"] == "error"
    assert "linux-headers-6.18.0-custom is not installed" in messages["preflight_kernel_headers"]["message"]
    assert messages["preflight_min_free_gib"]["message"].startswith("/opt/missing has ")
    args["kernel_headers"] = "ignore"
    result = run_module(host_check.main, args)
    assert "preflight_kernel_headers" not in {p["variable"] for p in result.result["problems"]}


def test_host_check_asks_apt_for_a_headers_candidate(monkeypatch, tmp_path):
    policy = "linux-headers-9.9.9-1-amd64:\n  Installed: (none)\n  Candidate: 9.9.9-1\n"
    node = Node(
        monkeypatch,
        {"apt-cache": "/usr/bin/apt-cache"},
        {("/usr/bin/apt-cache", "policy", "linux-headers-9.9.9-1-amd64"): (0, policy, "")},
    )
    monkeypatch.setattr(host_check.Host, "path", lambda self, path: os.path.join(str(tmp_path), path.lstrip("/")))
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text("")
    result = run_module(host_check.main, {"kernel": "9.9.9-1-amd64", "min_free_gib": {"/": 0}})
    assert result.result["node"]["kernel_headers"] == {
        "package": "linux-headers-9.9.9-1-amd64",
        "installed": False,
        "candidate": "9.9.9-1",
    }
    assert result.result["problems"] == []
    assert node.calls == [["/usr/bin/apt-cache", "policy", "linux-headers-9.9.9-1-amd64"]]


@pytest.mark.parametrize(("value", "text"), [({"/": "lots"}, "'lots' for / is not a number"), ({"usr": 1}, "'usr'")])
def test_host_check_rejects_bad_space_thresholds(monkeypatch, value, text):
    Node(monkeypatch, {}, {})
    result = run_module(host_check.main, {"min_free_gib": value})
    assert result.failed and text in result.result["msg"]


def test_host_readers():
    assert host.apt_candidate("x:\n  Installed: (none)\n  Candidate: (none)\n") is None
    assert host.rpm_installed("nvidia-driver 580.95.05-1.el9\nkernel 5.14.0-1\n") == {
        "nvidia-driver": "580.95.05-1.el9",
        "kernel": "5.14.0-1",
    }
    assert host.driver_branches({"nvidia-open": "595.71.05-1", "libnvidia-compute": "1:595.71.05-1"}) == {
        "595": ["libnvidia-compute", "nvidia-open"]
    }
    assert host.secure_boot_state(b"") == "unknown"
    assert host.dearmor("not armored") == b""
    assert host.unsigned_sources("# deb https://developer.download.nvidia.com/x /\n", "a.list") == []
    disabled = "Types: deb\nURIs: https://developer.download.nvidia.com/x\nEnabled: no\n"
    assert host.unsigned_sources(disabled, "x.sources") == []


def test_problems_report_filter():
    problems = [
        {"severity": "warning", "variable": "a", "message": "m1.", "fix": "f1."},
        {"severity": "error", "variable": "b", "message": "m2.", "fix": "f2."},
    ]
    assert problems_report(problems, header="Preflight failed on n1") == (
        "Preflight failed on n1: 1 error(s), 1 warning(s).\n- [error] b: m2. Fix: f2.\n- [warning] a: m1. Fix: f1."
    )
    with pytest.raises(AnsibleFilterError, match="not a problem"):
        problems_report([{"severity": "fatal", "variable": "a", "message": "m", "fix": "f"}])
    with pytest.raises(AnsibleFilterError, match="expects a list"):
        problems_report("text")


def _archive(folder):
    """The Ubuntu archive's restricted and multiverse Packages of noble as file:// URLs (xz and gz), the
    stanzas of tests/unit/fixtures/ubuntu_archive, as bundle.yml reads them for a declared host."""
    text = (FIXTURES / "ubuntu_archive" / "noble-apt-cache-show.txt").read_bytes()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "restricted.xz").write_bytes(lzma.compress(text))
    (folder / "multiverse.gz").write_bytes(gzip.compress(b"Package: unrelated\nVersion: 1\n\n"))
    return [f"file://{folder}/restricted.xz", f"file://{folder}/multiverse.gz"]


def test_stack_check_reads_canonical_s_packages_from_the_archive_of_a_declared_host(monkeypatch, tmp_path):
    node = Node(monkeypatch, {"apt-cache": "/usr/bin/apt-cache"}, {})
    args = dict(
        STACK,
        nvidia_gpu=H100,
        nvidia_driver_source="ubuntu",
        distribution="Ubuntu",
        distribution_major_version="24",
        kernel="6.8.0-149-generic",
        package_indexes=_archive(tmp_path),
    )
    result = run_module(stack_check.main, args)
    assert not result.failed, result.result.get("msg")
    resolved = result.result["resolved"]
    assert (resolved["driver"]["version"], resolved["driver"]["modules"]) == ("580.178.04", "precompiled")
    assert [p["name"] for p in resolved["packages"]["fabricmanager"]] == [
        "nvidia-fabricmanager-580",
        "libnvidia-nscq-580",
    ]
    assert node.calls == []  # the bundle host's own apt-cache is another distribution's: not asked


def test_stack_check_names_an_archive_index_it_cannot_read(monkeypatch, tmp_path):
    Node(monkeypatch, {}, {})
    (tmp_path / "Packages.xz").write_bytes(b"<html>moved</html>")
    base = dict(STACK, nvidia_gpu=H100, nvidia_driver_source="ubuntu", distribution="Ubuntu")
    result = run_module(stack_check.main, dict(base, package_indexes=[f"file://{tmp_path}/Packages.xz"]))
    assert result.failed and "Packages.xz does not decompress" in result.result["msg"]
    result = run_module(stack_check.main, dict(base, package_indexes=[f"file://{tmp_path}/missing.xz"]))
    assert result.failed and "missing.xz answered" in result.result["msg"]
    assert "(bundle_ubuntu_mirror)" in result.result["msg"]
