# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The facts the modules gave on each simulated node, before and after the driver, against its profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PROFILES = Path(__file__).resolve().parents[3] / "tests" / "gpusim" / "profiles"

# profile: (slug, architecture, compute capability, nearest NIC of GPU0, its distance)
EXPECTED = {
    "dgx-h100": ("h100", "hopper", "9.0", ["mlx5_0"], "PIX"),
    "hgx-b200": ("b200", "blackwell", "10.0", ["mlx5_4"], "PXB"),
    "dgx1-v100": ("v100", "volta", "7.0", ["mlx5_0"], "PIX"),
    "pcie-l40s": ("l40s", "ada", "8.9", ["mlx5_0"], "NODE"),
}


@pytest.fixture(scope="module")
def name(host):
    return host.file("/etc/gpusim-profile").content_string.strip()


@pytest.fixture(scope="module")
def summary(name):
    return json.loads((PROFILES / name / "profile.json").read_text())


@pytest.fixture(scope="module")
def hostvars(host):
    return host.ansible.get_variables()


def facts(host, which):
    path = host.file(f"/var/tmp/{which}.json")
    assert path.exists, f"{path.path} was not written by converge"
    return json.loads(path.content_string)


def test_facts_before_the_driver_come_from_lspci(host, name, summary):
    before = facts(host, "gpu_facts.before")
    slug, architecture, capability, _nearest, _link = EXPECTED[name]
    assert before["present"] is True
    assert before["driver_loaded"] is False and before["source"] == "lspci"
    assert before["driver_version"] is None
    assert before["count"] == summary["gpu_count"]
    assert (before["slug"], before["architecture"], before["compute_capability"]) == (slug, architecture, capability)
    assert before["nvswitch_count"] == summary["nvswitch_count"]
    assert before["product"].startswith("NVIDIA ")
    assert [gpu["pci_bus_id"] for gpu in before["gpus"]] == summary["gpu_pci_bus_ids"]
    assert before["gpus"][0]["nearest_nics"] == []


def test_facts_after_the_driver_come_from_nvidia_smi(host, name, summary, hostvars):
    after = facts(host, "nvidia_gpu.after")
    slug, architecture, capability, nearest, link = EXPECTED[name]
    assert after["driver_loaded"] is True and after["source"] == "nvidia-smi"
    assert after["driver_version"] == hostvars["gpusim_driver_version"]
    assert after["count"] == after["pci_gpu_count"] == summary["gpu_count"]
    assert after["product"] == summary["gpu_name"]
    assert (after["slug"], after["architecture"], after["compute_capability"]) == (slug, architecture, capability)
    assert after["nvswitch_count"] == summary["nvswitch_count"]
    gpu0 = after["gpus"][0]
    assert (gpu0["nearest_nics"], gpu0["nearest_nic_link"]) == (nearest, link)
    assert gpu0["uuid"] == summary["gpu_uuids"][0]
    assert gpu0["numa_node"] == 0 and gpu0["cpu_affinity"][:1] == [0]
    assert [gpu["uuid"] for gpu in after["gpus"]] == summary["gpu_uuids"]
    assert after["topology"]["nics"] == [nic["name"] for nic in summary["nics"]]


def test_the_driver_facts_agree_with_nvidia_smi_on_the_node(host):
    after = facts(host, "nvidia_gpu.after")
    listed = host.check_output("nvidia-smi --query-gpu=uuid,pci.bus_id --format=csv,noheader").splitlines()
    assert [line.split(", ")[0] for line in listed] == [gpu["uuid"] for gpu in after["gpus"]]


def test_active_ports_per_link_layer(host, summary):
    infiniband = facts(host, "infiniband.after")
    assert infiniband["present"] is True
    assert infiniband["ca_count"] == len(summary["nics"])
    for layer in ("InfiniBand", "Ethernet"):
        active = [nic for nic in summary["nics"] if nic["state"] == "Active" and nic["link_layer"] == layer]
        assert infiniband["active_ports"][layer] == [f"{nic['name']}:1" for nic in active]
    netdevs = {hca["name"]: hca["netdev"] for hca in infiniband["hcas"]}
    assert netdevs == {nic["name"]: nic["netdev"] for nic in summary["nics"]}
