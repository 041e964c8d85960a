# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_conf filter on the gpusim profiles' real-shaped ibstat and topology outputs."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.nccl_conf import nccl_conf
from ansible_collections.gpuops.cluster.plugins.module_utils.ibstat import active_ports, parse_ibstat
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import parse_topo
from conftest import GPUSIM


def facts(name):
    folder = GPUSIM / "profiles" / name
    cas = parse_ibstat((folder / "ibstat.txt").read_text())
    infiniband = {"present": bool(cas), "hcas": cas, "active_ports": active_ports(cas)}
    topology = parse_topo((folder / "nvidia-smi-topo-m.txt").read_text())
    return infiniband, {"present": True, "topology": {"links": topology["links"], "nics": topology["nics"]}}


def conf(name, **kw):
    infiniband, gpu = facts(name)
    return nccl_conf(infiniband, gpu, **kw)


def test_dgx_h100_uses_its_eight_infiniband_hcas_by_exact_name():
    result = conf("dgx-h100", socket_ifname="eth0", gpudirect="peermem")
    assert result["env"] == {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
        "NCCL_SOCKET_IFNAME": "=eth0",
        "NCCL_NET_GDR_LEVEL": "PIX",
    }
    # The Ethernet ports (one Active, three Down) are another fabric: not listed, not noted as Down.
    assert "mlx5_1:1" not in result["hcas"]
    assert result["notes"][0] == "compute fabric: InfiniBand, 8 Active port(s)"


def test_pcie_l40s_is_roce_with_a_gid_index_and_a_capped_gdr_level():
    result = conf("pcie-l40s", socket_ifname="enp65s0f0np0", gpudirect="dmabuf")
    assert result["env"] == {
        "NCCL_IB_HCA": "=mlx5_0:1",
        "NCCL_SOCKET_IFNAME": "=enp65s0f0np0",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_NET_GDR_LEVEL": "PHB",
    }
    assert any("GPU2, GPU3 reach a compute NIC only across the CPU sockets" in n for n in result["notes"])


def test_hgx_a100_leaves_the_ports_without_link_out_and_widens_the_gdr_level():
    result = conf("hgx-a100", gpudirect="peermem")
    assert result["env"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_3:1,mlx5_5:1,mlx5_7:1,mlx5_8:1"
    assert "left out: mlx5_2:1 (Initializing), mlx5_6:1 (Down)" in result["notes"]
    # GPU2 and GPU5 lost the HCA on their own PCIe switch: their nearest live one is NODE away.
    assert result["env"]["NCCL_NET_GDR_LEVEL"] == "PHB"
    assert "NCCL_IB_GID_INDEX" not in result["env"]


def test_no_gpudirect_turns_it_off_and_collnet_follows_sharp():
    env = conf("dgx-h100", gpudirect="none", collnet=True)["env"]
    assert env["NCCL_NET_GDR_LEVEL"] == "LOC"
    assert env["NCCL_COLLNET_ENABLE"] == "1"


def test_exclusions_and_a_chosen_subset():
    env = conf("dgx-h100", gpudirect="peermem", exclude_hcas=["mlx5_0"])["env"]
    assert env["NCCL_IB_HCA"].startswith("=mlx5_3:1,")
    env = conf("dgx-h100", gpudirect="peermem", hcas=["mlx5_0", "mlx5_3"])["env"]
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_3:1"


def test_forcing_ethernet_on_an_infiniband_node_takes_the_active_ethernet_port():
    env = conf("dgx-h100", fabric="Ethernet", gpudirect="peermem", gid_index=-1)["env"]
    assert env["NCCL_IB_HCA"] == "=mlx5_1:1"
    assert env["NCCL_IB_GID_INDEX"] == "-1"


def test_overrides_are_merged_last_and_can_remove_a_setting():
    env = conf(
        "dgx-h100",
        gpudirect="peermem",
        overrides={
            "NCCL_NET_GDR_LEVEL": None,
            "NCCL_IB_TIMEOUT": 22,
            "NCCL_DEBUG": "WARN",
            "NCCL_IB_PCI_RELAXED_ORDERING": True,
        },
    )["env"]
    assert "NCCL_NET_GDR_LEVEL" not in env
    assert env["NCCL_IB_TIMEOUT"] == "22"
    assert env["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    assert list(env)[-3:] == ["NCCL_DEBUG", "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_TIMEOUT"]


def test_a_node_without_rdma_gets_no_hca_line():
    result = nccl_conf({"present": False, "hcas": [], "active_ports": {"InfiniBand": [], "Ethernet": []}}, {})
    assert result["env"] == {}
    assert "no Active RDMA port on the compute fabric: NCCL falls back to sockets" in result["notes"]


@pytest.mark.parametrize(
    ("kw", "variable"),
    [
        ({"fabric": "ib"}, "nccl_fabric"),
        ({"gdr_level": "NODE"}, "nccl_net_gdr_level"),
        ({"hcas": ["mlx5_99"]}, "nccl_ib_hcas"),
        ({"fabric": "Ethernet", "gid_index": "three"}, "nccl_ib_gid_index"),
        ({"overrides": {"NCCL IB": "1"}}, "nccl_conf_overrides"),
        ({"overrides": {"NCCL_DEBUG": "INFO\nNCCL_X=1"}}, "nccl_conf_overrides"),
    ],
)
def test_bad_input_names_the_variable(kw, variable):
    with pytest.raises(AnsibleFilterError, match=f"^{variable}: .* Fix: "):
        conf("dgx-h100", **kw)


def test_a_listed_hca_that_is_no_active_compute_port_is_warned_about(monkeypatch):
    """The hk inventory's old list, mlx5_0 to mlx5_7, on a DGX H100: 1, 2 and 7 are its Ethernet
    (storage) ports. They are left out, as before, and now each is named in a warning."""
    shown = []
    monkeypatch.setattr("ansible.utils.display.Display.warning", lambda self, text, *a, **k: shown.append(text))
    result = conf("dgx-h100", hcas=[f"mlx5_{i}" for i in range(8)])
    assert result["hcas"] == ["mlx5_0:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1", "mlx5_6:1"]
    assert [w.split(",")[0] for w in result["warnings"]] == [
        "nccl_ib_hcas lists mlx5_1",
        "nccl_ib_hcas lists mlx5_2",
        "nccl_ib_hcas lists mlx5_7",
    ]
    assert "mlx5_1:1 Ethernet" in result["warnings"][0] and "NCCL will not use it" in result["warnings"][0]
    assert shown == result["warnings"]
    assert conf("dgx-h100")["warnings"] == []  # no list: every Active compute port, nothing to warn about
