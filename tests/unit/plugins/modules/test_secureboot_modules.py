# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_modules on a fake /lib/modules with modinfo's real output, and mok_enrolment against
gpusim's stand-in mokutil (the real one needs EFI variables), run as a program."""

from __future__ import annotations

import hashlib
import os
import subprocess
from types import SimpleNamespace

import pytest
from ansible.module_utils import basic
from ansible_collections.gpuops.cluster.plugins.module_utils.host import Host
from ansible_collections.gpuops.cluster.plugins.module_utils.kernel_modules import signing_certificate
from ansible_collections.gpuops.cluster.plugins.module_utils.validation import check_kernel_modules
from ansible_collections.gpuops.cluster.plugins.modules import mok_enrolment, nvidia_modules
from conftest import GPUSIM, fixture
from module_harness import Node, run_module

KERNEL = "6.1.0-57-amd64"
SIGNED = fixture("modinfo", "debian12_kmod30_dkms3_signed_stand_in_nvidia.txt")
X509 = fixture("openssl_x509", "openssl3_der_mok_serial_subject_multiline.txt")
MODULES = ("nvidia", "nvidia-uvm", "nvidia-modeset", "nvidia-drm", "nvidia-peermem")


def make_root(tmp_path, modules=MODULES, where="updates/dkms", conf=True):
    root = tmp_path / "root"
    top = root / "lib/modules" / KERNEL
    (top / where).mkdir(parents=True)
    (top / "build").mkdir()
    for name in modules:
        (top / where / f"{name}.ko").write_bytes(b"\x7fELF")
    # An in-tree module of another driver, and a build tree module, are not looked at.
    (top / "kernel/drivers/gpu").mkdir(parents=True)
    (top / "kernel/drivers/gpu/nouveau.ko.xz").write_bytes(b"")
    (root / "var/lib/gpuops/mok").mkdir(parents=True)
    (root / "var/lib/gpuops/mok/mok.der").write_bytes(b"\x30\x82")
    if conf:
        src = root / "usr/src/nvidia-580.95.05"
        src.mkdir(parents=True)
        lines = [f'BUILT_MODULE_NAME[{i}]="{name}"' for i, name in enumerate(MODULES)]
        (src / "dkms.conf").write_text('PACKAGE_NAME="nvidia"\n' + "\n".join(lines) + "\n")
    return root


def outputs(root, modinfo_text=SIGNED, modules=MODULES, where="updates/dkms"):
    found = {
        ("/sbin/modinfo", str(root / "lib/modules" / KERNEL / where / f"{name}.ko")): (0, modinfo_text, "")
        for name in modules
    }
    cert = str(root / "var/lib/gpuops/mok/mok.der")
    argv = ("/usr/bin/openssl", "x509", "-inform", "DER", "-in", cert, "-noout", "-serial", "-subject")
    found[(*argv, "-nameopt", "multiline")] = (0, X509, "")
    return found


BINARIES = {"modinfo": "/sbin/modinfo", "openssl": "/usr/bin/openssl"}


def test_every_module_signed_by_the_certificate(monkeypatch, tmp_path):
    root = make_root(tmp_path)
    Node(monkeypatch, BINARIES, outputs(root))
    args = {
        "root": str(root),
        "kernels": [KERNEL],
        "version": "580.95.05",
        "certificate": "/var/lib/gpuops/mok/mok.der",
    }
    result = run_module(nvidia_modules.main, args, check_mode=True)
    assert not result.failed and result.result["changed"] is False
    assert result.result["broken"] == []
    assert result.result["names"] == list(MODULES)
    entry = result.result["kernels"][0]
    assert entry["ok"] and entry["headers"] and entry["problems"] == []
    assert {m["path"] for m in entry["modules"]} == {f"/lib/modules/{KERNEL}/updates/dkms/{n}.ko" for n in MODULES}
    assert result.result["certificate"]["common_name"] == "gpuops test node MOK"


def test_a_missing_module_another_signer_and_an_absent_kernel_are_broken(monkeypatch, tmp_path):
    root = make_root(tmp_path, modules=MODULES[:-1])
    other = SIGNED.replace("gpuops test node MOK", "DKMS module signing key")
    Node(monkeypatch, BINARIES, outputs(root, modinfo_text=other, modules=MODULES[:-1]))
    args = {"root": str(root), "kernels": [KERNEL, "6.1.0-99-amd64"], "version": "580.95.05",
            "certificate": "/var/lib/gpuops/mok/mok.der"}  # fmt: skip
    result = run_module(nvidia_modules.main, args)
    assert result.result["broken"] == [KERNEL, "6.1.0-99-amd64"]
    first, second = result.result["kernels"]
    assert f"nvidia-peermem: no module for kernel {KERNEL}" in first["problems"]
    assert sum("signed by 'DKMS module signing key'" in p for p in first["problems"]) == 4
    assert not second["headers"] and len(second["problems"]) == len(MODULES)


def test_without_a_dkms_conf_the_default_modules_and_no_signature_check(monkeypatch, tmp_path):
    # Canonical's precompiled modules live in the kernel's own tree.
    defaults = ("nvidia", "nvidia-modeset", "nvidia-drm", "nvidia-uvm")
    root = make_root(tmp_path, modules=defaults, where="kernel/nvidia-580srv", conf=False)
    Node(monkeypatch, BINARIES, outputs(root, modules=defaults, where="kernel/nvidia-580srv"))
    result = run_module(nvidia_modules.main, {"root": str(root), "kernels": [KERNEL], "version": "580.95.05"})
    assert result.result["broken"] == [] and result.result["certificate"] is None
    assert result.result["names"] == list(defaults)


@pytest.mark.parametrize("kernel", ["", "../etc", "a/b"])
def test_a_kernel_that_is_not_a_release_is_refused(monkeypatch, tmp_path, kernel):
    Node(monkeypatch, BINARIES, {})
    result = run_module(nvidia_modules.main, {"root": str(tmp_path), "kernels": [kernel]})
    assert result.failed and "is not a kernel release" in result.result["msg"]


def test_modinfo_output_it_cannot_read_names_the_command(monkeypatch, tmp_path):
    root = make_root(tmp_path)
    Node(monkeypatch, BINARIES, outputs(root, modinfo_text="filename: x\n???\n"))
    result = run_module(nvidia_modules.main, {"root": str(root), "kernels": [KERNEL]})
    assert result.failed and "Could not read the output of `/sbin/modinfo" in result.result["msg"]
    assert "at line 2: '???'" in result.result["msg"]


STANDIN = GPUSIM / "bin" / "mokutil"


@pytest.fixture
def standin(monkeypatch, tmp_path):
    """The modules see gpusim's mokutil, run for real, with its firmware state under tmp_path."""
    monkeypatch.setenv("GPUSIM_MOK_DIR", str(tmp_path / "mok"))
    monkeypatch.setenv("GPUSIM_SECURE_BOOT", str(tmp_path / "secure-boot"))
    (tmp_path / "secure-boot").write_text("enabled\n")
    real_run_command = basic.AnsibleModule.run_command
    Node(monkeypatch, {}, {})  # exit_json and fail_json as the harness reads them
    monkeypatch.setattr(basic.AnsibleModule, "run_command", real_run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: str(STANDIN))
    cert = tmp_path / "mok.der"
    cert.write_bytes(b"\x30\x82\x01\x0a" + os.urandom(64))
    return cert


def test_a_key_is_staged_with_the_password_on_stdin_and_then_enrolled(standin, tmp_path):
    args = {"certificate": str(standin), "password": "one-time-pw"}
    result = run_module(mok_enrolment.main, args, check_mode=True)
    assert result.result["changed"] and result.result["state"] == "pending" and result.result["imported"]
    assert not (tmp_path / "mok" / "MokAuth").exists()  # check mode staged nothing
    result = run_module(mok_enrolment.main, args)
    assert result.result == {**result.result, "changed": True, "state": "pending", "secure_boot": "enabled"}
    staged = (tmp_path / "mok" / "MokAuth").read_text().strip()
    assert staged == hashlib.sha256(b"one-time-pw").hexdigest()
    # Staged already: nothing to do, and it says so.
    again = run_module(mok_enrolment.main, args)
    assert not again.result["changed"] and again.result["state"] == "pending"
    env = {**os.environ, "GPUSIM_MOK_DIR": str(tmp_path / "mok")}
    subprocess.run([str(STANDIN), "--gpusim-console", "one-time-pw"], check=True, env=env, capture_output=True)
    done = run_module(mok_enrolment.main, args)
    assert not done.result["changed"] and done.result["state"] == "enrolled"


def test_without_a_password_a_key_that_is_not_enrolled_is_only_reported(standin):
    result = run_module(mok_enrolment.main, {"certificate": str(standin)})
    assert not result.result["changed"] and result.result["state"] == "not_enrolled"


def test_a_password_mokmanager_cannot_take_is_refused_before_mokutil_runs(standin):
    result = run_module(mok_enrolment.main, {"certificate": str(standin), "password": "two\nlines"})
    assert result.failed and "one-line password of 1 to 256 characters" in result.result["msg"]
    assert "two" not in result.result["msg"]


def test_no_efi_variables_is_a_clear_error(monkeypatch, tmp_path):
    outputs_ = {
        ("/usr/bin/mokutil", "--sb-state"): (255, "", "EFI variables are not supported on this system\n"),
        ("/usr/bin/mokutil", "--test-key", "/k.der"): (255, "", "EFI variables are not supported on this system\n"),
    }
    Node(monkeypatch, {"mokutil": "/usr/bin/mokutil"}, outputs_)
    result = run_module(mok_enrolment.main, {"certificate": "/k.der", "password": "pw"})
    assert result.failed and "EFI variables are not supported on this system" in result.result["msg"]
    assert "a UEFI boot, efivarfs mounted" in result.result["msg"]


def test_the_signing_certificate_is_the_one_the_roles_dkms_configuration_names(tmp_path):
    host = Host(SimpleNamespace(params={"root": str(tmp_path)}))
    assert signing_certificate(host) is None
    conf = tmp_path / "etc/dkms/framework.conf.d/gpuops-signing.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(
        '# managed\nmok_signing_key="/var/lib/gpuops/mok/mok.key"\nmok_certificate="/var/lib/gpuops/mok/mok.der"\n'
    )
    assert signing_certificate(host) is None  # named, but not there
    (tmp_path / "var/lib/gpuops/mok").mkdir(parents=True)
    (tmp_path / "var/lib/gpuops/mok/mok.der").write_bytes(b"\x30")
    assert signing_certificate(host) == "/var/lib/gpuops/mok/mok.der"


def test_kernel_modules_records_fail_the_running_kernel_and_warn_for_another():
    good = {"kernel": "6.1.0-57-amd64", "ok": True, "problems": []}
    bad = {"kernel": "6.1.0-58-amd64", "ok": False, "problems": ["nvidia: no module for kernel 6.1.0-58-amd64"]}
    records = check_kernel_modules([good, bad], running="6.1.0-57-amd64", signer="n1 module signing")
    assert [(r["subject"], r["verdict"]) for r in records] == [("6.1.0-57-amd64", "pass"), ("6.1.0-58-amd64", "warn")]
    assert records[0]["expected"] == "NVIDIA modules signed by 'n1 module signing'"
    assert "a reboot into 6.1.0-58-amd64 leaves the node without its driver" in records[1]["reason"]
    records = check_kernel_modules([bad], running="6.1.0-58-amd64")
    assert records[0]["verdict"] == "fail" and records[0]["measured"].startswith("nvidia: no module")
    skipped = check_kernel_modules([], running="6.8.0-1-generic", container="docker")
    assert skipped[0]["verdict"] == "skip" and "in a container (docker)" in skipped[0]["reason"]
