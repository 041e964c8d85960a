# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA modules DKMS built on each node for a real Debian kernel carry the node's Machine
Owner Key (modinfo reads the signature sign-file appended), the key is root's alone, and it is
staged for enrolment with the inventory's one-time password. A module DKMS signs with its own key
is refused by the role's check. What is stood in: the driver source (a small module with NVIDIA's
names) and mokutil (no EFI variables in a container)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from hosts import name

MODULES = ("nvidia", "nvidia-uvm", "nvidia-modeset", "nvidia-drm", "nvidia-peermem")
DRIVER = "580.95.05"
KEYS = Path(__file__).resolve().parents[3] / "tests" / "gpusim" / "keys"
OWN_NAME = "sb-own module signing"
FLEET_NAME = "gpuops test fleet module signing"
PASSWORD = "gpuops-one-time"
MOK = "/var/lib/gpuops/mok"


def kernel(host):
    return json.loads(host.file("/etc/ansible/facts.d/gpusim.fact").content_string)["kernel"]


def certificate(host):
    """(common name, serial as hex without colons) of the node's certificate, as openssl reads it."""
    out = host.check_output(f"openssl x509 -inform DER -in {MOK}/mok.der -noout -serial -subject -nameopt multiline")
    serial = out.split("serial=", 1)[1].split()[0].upper().lstrip("0")
    common_name = out.split("commonName", 1)[1].split("=", 1)[1].splitlines()[0].strip()
    return common_name, serial


def modinfo(host, path, field):
    return host.check_output(f"modinfo -F {field} {path}").strip()


def module_path(host, module):
    return f"/lib/modules/{kernel(host)}/updates/dkms/{module}.ko"


def other_kernel(host):
    return json.loads(host.file("/etc/ansible/facts.d/gpusim.fact").content_string)["other_kernel"]


def check_modules(host):
    args = {"kernels": [kernel(host)], "version": DRIVER, "certificate": f"{MOK}/mok.der"}
    return host.ansible("gpuops.cluster.nvidia_modules", json.dumps(args), check=False, become=True)


def sign_hash(host, release):
    """The hash the kernel signs modules with (CONFIG_MODULE_SIG_HASH in its headers' .config)."""
    config = host.file(f"/lib/modules/{release}/build/.config").content_string
    return re.search(r'^CONFIG_MODULE_SIG_HASH="([a-z0-9]+)"', config, re.M).group(1)


def test_the_kernel_is_a_real_distribution_kernel_with_its_headers_and_dkms(host):
    release = kernel(host)
    assert release.endswith(("-amd64", "-generic")) and release != host.check_output("uname -r")
    packages = host.check_output("dpkg-query -W -f '${Package} ${Version}\\n'")
    assert f"linux-headers-{release} " in packages
    assert "\ndkms 3." in packages
    # DKMS depends on gcc | c-compiler: the distribution's compiler, whichever name apt chose.
    assert re.search(r"^gcc(-[0-9]+)? ", packages, re.M)
    # The headers carry the kernel's own sign-file (Debian: in linux-kbuild), which DKMS signs with.
    debian = f"/usr/lib/linux-kbuild-{release.rsplit('.', 1)[0]}/scripts/sign-file"
    assert host.file(debian).is_file or host.file(f"/usr/src/linux-headers-{release}/scripts/sign-file").is_file


def test_dkms_built_and_installed_every_module_for_that_kernel(host):
    status = host.check_output("dkms status")
    assert f"nvidia/{DRIVER}, {kernel(host)}, x86_64: installed" in status
    for module in MODULES:
        path = module_path(host, module)
        assert host.file(path).is_file, path
        assert modinfo(host, path, "version") == DRIVER
        assert modinfo(host, path, "vermagic").startswith(kernel(host) + " ")


def test_every_module_is_signed_by_the_nodes_key(host):
    expected = OWN_NAME if name(host) == "sb-own" else FLEET_NAME
    common_name, serial = certificate(host)
    assert common_name == expected
    for module in MODULES:
        path = module_path(host, module)
        assert modinfo(host, path, "signer") == expected, path
        assert modinfo(host, path, "sig_key").replace(":", "").upper().lstrip("0") == serial, path
        assert modinfo(host, path, "sig_hashalgo") == sign_hash(host, kernel(host))


def test_the_key_is_roots_alone_and_dkms_is_told_to_use_it(host):
    key = host.file(f"{MOK}/mok.key")
    assert key.user == "root" and key.mode == 0o400
    assert host.file(MOK).mode == 0o700
    conf = host.file("/etc/dkms/framework.conf.d/gpuops-signing.conf").content_string
    assert f'mok_signing_key="{MOK}/mok.key"' in conf and f'mok_certificate="{MOK}/mok.der"' in conf


def test_the_fleet_key_is_the_inventorys_and_the_own_key_never_left_its_node(host):
    key = host.file(f"{MOK}/mok.key").content
    fleet = (KEYS / "mok-fleet.key").read_bytes()
    if name(host) == "sb-fleet":
        assert key.strip() == fleet.strip()
    else:
        assert key.strip() != fleet.strip()
        assert b"PRIVATE KEY" in key


def test_the_key_is_staged_for_enrolment_with_the_inventorys_password(host):
    der = host.file(f"{MOK}/mok.der").content
    digest = hashlib.sha1(der).hexdigest()
    # Exit code 1 for a staged key, as mokutil's own.
    answer = host.run(f"mokutil --test-key {MOK}/mok.der")
    assert answer.stdout.strip() == f"{MOK}/mok.der is already in the enrollment request" and answer.rc == 1
    assert host.file(f"/var/lib/gpusim/mok/MokNew/{digest}.der").content == der
    # mokutil read the password from its standard input, not from a command line.
    staged = host.file("/var/lib/gpusim/mok/MokAuth").content_string.strip()
    assert staged == hashlib.sha256(PASSWORD.encode()).hexdigest()


def test_a_module_dkms_signs_without_the_role_key_is_refused_and_the_role_key_signs_again(host):
    if name(host) != "sb-own":
        return
    release = kernel(host)
    conf = "/etc/dkms/framework.conf.d/gpuops-signing.conf"
    build = f"dkms build --force nvidia/{DRIVER} -k {release} && dkms install --force nvidia/{DRIVER} -k {release}"
    # Debian's DKMS signs with a key it makes itself; Ubuntu's, without shim-signed's MOK, not at all.
    debian = host.system_info.distribution == "debian"
    host.run_test(f"mv {conf} /root/gpuops-signing.conf")
    try:
        host.run_test(build)
        signer = modinfo(host, module_path(host, "nvidia"), "signer")
        assert signer == ("DKMS module signing key" if debian else "")
        result = check_modules(host)
        assert result["broken"] == [release]
        problems = result["kernels"][0]["problems"]
        assert len(problems) == len(MODULES)
        seen = "signed by 'DKMS module signing key' (key" if debian else "unsigned; Secure Boot refuses it"
        assert all(seen in p for p in problems)
        if debian:
            assert all(f"not by '{OWN_NAME}'" in p for p in problems)
    finally:
        host.run_test(f"mv /root/gpuops-signing.conf {conf}")
    host.run_test(build)
    result = check_modules(host)
    assert result["broken"] == [] and result["kernels"][0]["ok"]
    assert modinfo(host, module_path(host, "nvidia"), "signer") == OWN_NAME


def test_once_enrolled_at_the_console_the_key_is_trusted(host):
    # What MokManager does on the next boot when the operator types the password.
    assert host.run("mokutil --gpusim-console wrong-password").rc == 1
    host.run_test(f"mokutil --gpusim-console {PASSWORD}")
    args = {"certificate": f"{MOK}/mok.der", "password": PASSWORD}
    result = host.ansible("gpuops.cluster.mok_enrolment", json.dumps(args), check=False, become=True)
    assert result["state"] == "enrolled" and not result["changed"] and not result["imported"]


def test_a_kernel_update_got_its_headers_and_signed_modules_under_guarded(host):
    if name(host) != "sb-own":
        return
    release = other_kernel(host)
    assert release != kernel(host)
    assert host.package(f"linux-headers-{release}").is_installed
    assert f"nvidia/{DRIVER}, {release}, x86_64: installed" in host.check_output("dkms status")
    for module in MODULES:
        path = f"/lib/modules/{release}/updates/dkms/{module}.ko"
        assert modinfo(host, path, "signer") == OWN_NAME, path
        assert modinfo(host, path, "vermagic").startswith(release + " ")


def test_hold_keeps_the_kernel_packages_where_they_are(host):
    held = set(host.check_output("apt-mark showhold").split())
    kernel_packages = {p for p in held if p.startswith("linux-")}
    if name(host) == "sb-fleet":
        assert f"linux-headers-{kernel(host)}" in kernel_packages
    else:
        assert not kernel_packages  # guarded leaves them free


def kernel_records(host):
    args = {"nvidia_gpu": {"present": True}, "dcgm_level": 0, "fabric": "none"}
    result = host.ansible("gpuops.cluster.node_health", json.dumps(args), check=False, become=True)
    return {r["subject"]: r for r in result["checks"] if r["check"] == "kernel_modules"}


def test_the_health_check_reports_each_installed_kernels_modules(host):
    records = kernel_records(host)
    if name(host) != "sb-own":
        # No kernel image installed, and the running kernel is the host's.
        assert [r["verdict"] for r in records.values()] == ["skip"]
        return
    release = other_kernel(host)
    assert records[release]["verdict"] == "pass"
    assert records[release]["expected"] == f"NVIDIA modules signed by '{OWN_NAME}'"
    module = f"/lib/modules/{release}/updates/dkms/nvidia-uvm.ko"
    host.run_test(f"mv {module} /root/nvidia-uvm.ko")
    try:
        broken = kernel_records(host)[release]
    finally:
        host.run_test(f"mv /root/nvidia-uvm.ko {module}")
    assert broken["verdict"] == "warn"
    assert broken["measured"] == f"nvidia-uvm: no module for kernel {release}"
    assert f"a reboot into {release} leaves the node without its driver" in broken["reason"]
