# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verify the gpusim harness on real containers: hardware layer, signed repository, driver."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

PROFILES = Path(__file__).resolve().parents[3] / "tests" / "gpusim" / "profiles"
CUDA_REPO = "compute/cuda/repos/debian12/x86_64/"


@pytest.fixture(scope="module")
def profile(host):
    name = host.file("/etc/gpusim-profile").content_string.strip()
    return PROFILES / name


@pytest.fixture(scope="module")
def summary(profile):
    return json.loads((profile / "profile.json").read_text())


@pytest.fixture(scope="module")
def hostvars(host):
    return host.ansible.get_variables()


def test_profile_is_the_platforms(host, hostvars, profile):
    expected = {"gpusim-h100": "dgx-h100", "gpusim-l40s": "pcie-l40s"}[hostvars["inventory_hostname"]]
    assert profile.name == expected


def test_lspci_prints_the_profile(host, profile):
    assert host.check_output("lspci -Dnn") + "\n" == (profile / "lspci-Dnn.txt").read_text()


def test_lspci_vendor_filter_finds_gpus_and_nvswitches(host, summary):
    lines = host.check_output("lspci -D -d 10de:").splitlines()
    bus_ids = [line.split()[0] for line in lines if "3D controller" in line]
    assert bus_ids == summary["gpu_pci_bus_ids"]
    assert sum("Bridge" in line for line in lines) == summary["nvswitch_count"]


def test_ibstat_prints_the_profile(host, profile, summary):
    assert host.run("command -v ibstat").stdout.strip() == "/usr/local/sbin/ibstat"
    assert host.check_output("ibstat") + "\n" == (profile / "ibstat.txt").read_text().rstrip("\n") + "\n"
    assert sorted(host.check_output("ibstat -l").split()) == sorted(n["name"] for n in summary["nics"])


def test_gpu_device_nodes(host, summary):
    for minor in range(summary["gpu_count"]):
        kind_major_minor = host.check_output(f"stat -c '%F %t:%T' /dev/nvidia{minor}")
        assert kind_major_minor == f"character special file c3:{minor:x}"  # major 195 = 0xc3
    assert not host.file(f"/dev/nvidia{summary['gpu_count']}").exists
    assert host.check_output("stat -c %F /dev/nvidiactl") == "character special file"
    switches = host.run("ls /dev/ | grep -c '^nvidia-nvswitch[0-9]'").stdout.strip()
    assert int(switches) == summary["nvswitch_count"]


def test_source_uses_signed_by_keyring(host):
    source = host.file("/etc/apt/sources.list.d/gpusim-cuda.sources")
    assert source.contains("^Signed-By: /etc/apt/keyrings/gpusim-archive-keyring.gpg$")
    assert source.contains(f"^URIs: http://gpusim-repo/{CUDA_REPO}$")
    assert not host.file("/etc/apt/trusted.gpg").exists


def _apt_update(host, source_line):
    """apt-get update against one source only, with lists of its own, so nothing else is touched."""
    cmd = (
        "d=$(mktemp -d) && mkdir -p $d/lists/partial && "
        f"echo '{source_line}' > $d/sources.list && "
        "apt-get update -o Dir::Etc::SourceList=$d/sources.list -o Dir::Etc::SourceParts=/nonexistent "
        "-o Dir::State::Lists=$d/lists -o APT::Update::Error-Mode=any; rc=$?; rm -rf $d; exit $rc"
    )
    return host.run(cmd)


def test_apt_accepts_the_repo_with_its_keyring(host):
    result = _apt_update(
        host, f"deb [signed-by=/etc/apt/keyrings/gpusim-archive-keyring.gpg] http://gpusim-repo/{CUDA_REPO} /"
    )
    assert result.rc == 0, result.stdout + result.stderr
    assert "NO_PUBKEY" not in result.stderr


def test_apt_rejects_the_repo_with_a_wrong_key(host):
    host.run_test("curl -fsS -o /tmp/gpusim-wrong.gpg http://gpusim-repo/keys/gpusim-wrong-keyring.gpg")
    result = _apt_update(host, f"deb [signed-by=/tmp/gpusim-wrong.gpg] http://gpusim-repo/{CUDA_REPO} /")
    assert result.rc != 0
    assert "NO_PUBKEY" in result.stderr or "not signed" in result.stderr, result.stderr


ARCHIVE_FPR = "DDD2F499504D61685FB2FDC94B9F49872D40B3F2"
WRONG_FPR = "88A16F1370CB253F6D3BDAACBB42F09FF42E283A"


def _apt_source(host, name, key, uris):
    args = {
        "name": name,
        "uris": [uris],
        "key_url": f"http://gpusim-repo/keys/{key}",
        "key_fingerprint": [ARCHIVE_FPR],
        "fingerprint_variable": "test_key_fingerprint",
    }
    # ansible-core 2.19's --tree result of a failed module has no "failed" key, so testinfra does
    # not raise for it: the result is read either way, and the tests judge its message.
    try:
        return host.ansible("gpuops.cluster.apt_source", json.dumps(args), check=False, become=True)
    except host.ansible.AnsibleException as failed:
        return failed.result


def test_apt_trusts_a_second_armour_block_of_a_key_file(host):
    """Why the key file is read whole: real apt, given the served two-block file as the keyring of
    the repository signed by the wrong key, accepts it."""
    host.run_test("curl -fsS -o /tmp/gpusim-two-blocks.asc http://gpusim-repo/keys/gpusim-two-blocks.asc")
    result = _apt_update(host, "deb [signed-by=/tmp/gpusim-two-blocks.asc] http://gpusim-repo/wrong-signed /")
    assert result.rc == 0, result.stdout + result.stderr


def test_apt_source_refuses_a_second_armour_block(host):
    refused = _apt_source(host, "gpuops-two-blocks", "gpusim-two-blocks.asc", "http://gpusim-repo/wrong-signed")
    msg = refused["msg"]
    assert WRONG_FPR in msg and "test_key_fingerprint" in msg and "Nothing was written" in msg
    assert not host.file("/etc/apt/sources.list.d/gpuops-two-blocks.sources").exists
    assert not host.file("/etc/apt/keyrings/gpuops-two-blocks.asc").exists


def test_the_keyring_apt_source_installs_refuses_the_wrong_signed_repository(host):
    """The pinned key, installed as the module builds it: apt-get update of the repository the
    wrong key signed fails and the source is taken out again; the archive's repository passes."""
    name = "gpuops-wrong-signed"
    try:
        msg = _apt_source(host, name, "gpusim-archive-keyring.asc", "http://gpusim-repo/wrong-signed")["msg"]
        assert "apt-get update of the repository gpuops-wrong-signed failed" in msg
        assert "NO_PUBKEY" in msg or "not signed" in msg, msg
        assert not host.file(f"/etc/apt/sources.list.d/{name}.sources").exists
        # The armour the module wrote is one apt reads: the archive-signed repository passes with it.
        passed = _apt_update(host, f"deb [signed-by=/etc/apt/keyrings/{name}.asc] http://gpusim-repo/{CUDA_REPO} /")
        assert passed.rc == 0, passed.stdout + passed.stderr
    finally:
        host.run(f"rm -f /etc/apt/keyrings/{name}.asc /etc/apt/sources.list.d/{name}.sources")


def test_driver_package_is_the_pinned_version(host, hostvars):
    branch, version = hostvars["gpusim_driver_branch"], hostvars["gpusim_driver_version"]
    assert host.package(f"nvidia-driver-{branch}-open").version == f"{version}-1"
    assert host.package(f"nvidia-utils-{branch}").version == f"{version}-1"


def test_nvidia_smi_reports_installed_driver_and_profile(host, hostvars, summary):
    root = ET.fromstring(host.check_output("nvidia-smi -q -x").split("\n", 2)[2])
    assert root.findtext("driver_version") == hostvars["gpusim_driver_version"]
    assert root.findtext("cuda_version") == {"570": "12.8", "580": "13.0"}[hostvars["gpusim_driver_branch"]]
    gpus = root.findall("gpu")
    assert len(gpus) == summary["gpu_count"]
    assert [g.findtext("uuid") for g in gpus] == summary["gpu_uuids"]
    assert {g.findtext("product_name") for g in gpus} == {summary["gpu_name"]}


def test_nvidia_smi_topology_is_the_profiles(host, profile):
    assert host.check_output("nvidia-smi topo -m") + "\n" == (profile / "nvidia-smi-topo-m.txt").read_text()


def test_driver_services_stay_up(host, hostvars):
    units = ["nvidia-persistenced"] + (["nvidia-fabricmanager"] if hostvars["gpusim_fabricmanager"] else [])
    for unit in units:
        service = host.service(unit)
        assert service.is_running, unit
        assert service.is_enabled, unit
    if not hostvars["gpusim_fabricmanager"]:
        assert not host.package(f"nvidia-fabricmanager-{hostvars['gpusim_driver_branch']}").is_installed
