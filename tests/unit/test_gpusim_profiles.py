# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpusim profiles: committed outputs match their specs and agree with one another."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from conftest import GPUSIM, PROFILE_NAMES, profile_summary

REQUIRED = {"dgx-h100", "pcie-l40s", "dgx1-v100", "hgx-b200"}


def test_required_profiles_exist():
    assert REQUIRED <= set(PROFILE_NAMES)


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_committed_outputs_match_spec(assemble, name):
    profile = next(p for p in assemble.load_profiles() if p.name == name)
    for fname, text in profile.outputs().items():
        assert (GPUSIM / "profiles" / name / fname).read_text() == text, fname


def _read(name: str, fname: str) -> str:
    return (GPUSIM / "profiles" / name / fname).read_text()


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_gpus_agree_across_lspci_xml_and_topology(name):
    summary = profile_summary(name)
    lspci_gpus = [line.split()[0] for line in _read(name, "lspci-Dnn.txt").splitlines() if "[0302]" in line]
    root = ET.fromstring(_read(name, "nvidia-smi-q-x.xml").split("\n", 2)[2])
    xml_gpus = [g.findtext("pci/pci_bus_id").lower() for g in root.findall("gpu")]
    assert ["0000" + b for b in lspci_gpus] == xml_gpus
    assert lspci_gpus == summary["gpu_pci_bus_ids"]
    assert int(root.findtext("attached_gpus")) == summary["gpu_count"]
    assert [int(g.findtext("minor_number")) for g in root.findall("gpu")] == list(range(summary["gpu_count"]))
    topo_rows = [line for line in _read(name, "nvidia-smi-topo-m.txt").splitlines() if re.match(r"GPU\d+\t", line)]
    assert len(topo_rows) == summary["gpu_count"]


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_nics_agree_across_ibstat_topology_and_netdevs(name):
    summary = profile_summary(name)
    names = sorted(n["name"] for n in summary["nics"])
    ibstat = re.findall(r"^CA '([^']+)'", _read(name, "ibstat.txt"), re.M)
    legend = re.findall(r"^\s+NIC\d+: (\S+)$", _read(name, "nvidia-smi-topo-m.txt"), re.M)
    netdevs = [line.split()[0] for line in _read(name, "ibdev2netdev.txt").splitlines()]
    assert sorted(ibstat) == sorted(legend) == sorted(netdevs) == names
    lspci_nics = [line for line in _read(name, "lspci-Dnn.txt").splitlines() if "[15b3:" in line]
    assert len(lspci_nics) == len(names)


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_topology_matrix_is_square_and_symmetric(name):
    lines = _read(name, "nvidia-smi-topo-m.txt").splitlines()
    header = lines[0].split("\t")[1:]
    devices = [h for h in header if re.match(r"(GPU|NIC)\d+$", h)]
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in lines[1:] if re.match(r"(GPU|NIC)\d+\t", line)}
    assert list(rows) == devices
    for i, a in enumerate(devices):
        assert rows[a][i].strip() == "X"
        for j, b in enumerate(devices):
            assert rows[a][j] == rows[b][i], (a, b)


@pytest.mark.parametrize(
    ("name", "nvswitches", "gpus", "ib_active"),
    [
        ("dgx-h100", 4, 8, 8),
        ("pcie-l40s", 0, 4, 0),
        ("dgx1-v100", 0, 8, 4),
        ("hgx-b200", 2, 8, 8),
        ("hgx-a100", 6, 8, 6),
    ],
)
def test_profile_hardware_is_what_the_issue_asks(name, nvswitches, gpus, ib_active):
    summary = profile_summary(name)
    assert summary["nvswitch_count"] == nvswitches
    assert summary["gpu_count"] == gpus
    active_ib = [n for n in summary["nics"] if n["link_layer"] == "InfiniBand" and n["state"] == "Active"]
    assert len(active_ib) == ib_active


def test_pcie_l40s_has_one_roce_nic():
    nics = profile_summary("pcie-l40s")["nics"]
    assert [(n["link_layer"], n["state"]) for n in nics] == [("Ethernet", "Active")]


def test_dgx_h100_ibstat_is_the_real_capture():
    assert (
        _read("dgx-h100", "ibstat.txt")
        == (GPUSIM / "captures" / "h100_12ca_8x_ib_ndr400_plus_4x_eth_3down.txt").read_text()
    )
