# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_facts and ib_facts with run_command mocked: the exact commands, once each, and the facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ansible_collections.gpuops.cluster.plugins.modules import gpu_facts, ib_facts
from conftest import GPUSIM, fixture, profile_summary
from module_harness import Node, run_module

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def profile_file(name, file):
    return (GPUSIM / "profiles" / name / file).read_text()


def driver_outputs(name):
    outputs = {
        ("/usr/bin/lspci", "-Dnn"): (0, profile_file(name, "lspci-Dnn.txt"), ""),
        ("/usr/bin/nvidia-smi", "-q", "-x"): (0, profile_file(name, "nvidia-smi-q-x.xml"), ""),
        ("/usr/bin/nvidia-smi", "topo", "-m"): (0, profile_file(name, "nvidia-smi-topo-m.txt"), ""),
    }
    # The MIG-capable profiles (MIG mode Disabled in the XML) are asked for their MIG profiles.
    if (GPUSIM / "profiles" / name / "mig-lgip.txt").exists():
        outputs["/usr/bin/nvidia-smi", "mig", "-lgip"] = (0, profile_file(name, "mig-lgip.txt"), "")
    return outputs


BINARIES = {"lspci": "/usr/bin/lspci", "nvidia-smi": "/usr/bin/nvidia-smi"}

# profile: (slug, architecture, compute capability, NVSwitches, nearest NIC of GPU0, its distance)
EXPECTED = {
    "dgx-h100": ("h100", "hopper", "9.0", 4, ["mlx5_0"], "PIX"),
    "hgx-b200": ("b200", "blackwell", "10.0", 2, ["mlx5_4"], "PXB"),
    "dgx1-v100": ("v100", "volta", "7.0", 0, ["mlx5_0"], "PIX"),
    "pcie-l40s": ("l40s", "ada", "8.9", 0, ["mlx5_0"], "NODE"),
    "hgx-a100": ("a100", "ampere", "8.0", 6, ["mlx5_0"], "PIX"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("check_mode", [False, True])
def test_gpu_facts_with_the_driver(monkeypatch, name, check_mode):
    node = Node(monkeypatch, BINARIES, driver_outputs(name))
    exited = run_module(gpu_facts.main, check_mode=check_mode)
    assert not exited.failed and exited.result["changed"] is False
    # One lspci, one -q -x, one topo -m: nothing more, in that order.
    assert node.calls == [list(argv) for argv in driver_outputs(name)]
    facts = exited.result["ansible_facts"]["nvidia_gpu"]
    summary = profile_summary(name)
    slug, architecture, capability, nvswitches, nearest, link = EXPECTED[name]
    assert facts["present"] and facts["driver_loaded"] and facts["source"] == "nvidia-smi"
    assert facts["driver_version"] == summary["profile_driver_version"]
    assert (facts["count"], facts["pci_gpu_count"]) == (summary["gpu_count"], summary["gpu_count"])
    assert facts["product"] == summary["gpu_name"]
    assert (facts["slug"], facts["architecture"], facts["compute_capability"]) == (slug, architecture, capability)
    assert facts["nvswitch_count"] == nvswitches == summary["nvswitch_count"]
    gpu0 = facts["gpus"][0]
    assert (gpu0["nearest_nics"], gpu0["nearest_nic_link"]) == (nearest, link)
    assert gpu0["uuid"] == summary["gpu_uuids"][0]
    assert gpu0["pci_bus_id"] == summary["gpu_pci_bus_ids"][0]
    assert gpu0["numa_node"] == 0 and gpu0["cpu_affinity"][0] == 0
    assert [gpu["index"] for gpu in facts["gpus"]] == list(range(summary["gpu_count"]))
    assert facts["topology"]["nics"] == [nic["name"] for nic in summary["nics"]]
    # MIG: capable but off on every GPU; the profiles of the GPU the capture lists, no instances.
    mig_capable = name in ("dgx-h100", "hgx-a100", "hgx-b200")
    assert (facts["mig_capable"], facts["mig_enabled"], facts["mig_pending"]) == (mig_capable, False, False)
    assert {gpu["mig_mode"] for gpu in facts["gpus"]} == ({"disabled"} if mig_capable else {None})
    assert all(gpu["mig_instances"] is None for gpu in facts["gpus"])
    listed = [gpu for gpu in facts["gpus"] if gpu["mig_profiles"]]
    assert [len(gpu["mig_profiles"]) for gpu in listed] == ([7] if mig_capable else [])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gpu_facts_before_the_driver(monkeypatch, name):
    outputs = {("/usr/bin/lspci", "-Dnn"): (0, profile_file(name, "lspci-Dnn.txt"), "")}
    node = Node(monkeypatch, {"lspci": "/usr/bin/lspci"}, outputs)
    facts = run_module(gpu_facts.main).result["ansible_facts"]["nvidia_gpu"]
    assert node.calls == [["/usr/bin/lspci", "-Dnn"]]
    slug, architecture, capability, nvswitches, _nearest, _link = EXPECTED[name]
    summary = profile_summary(name)
    assert facts["present"] and not facts["driver_loaded"] and facts["source"] == "lspci"
    assert facts["driver_version"] is None and facts["cuda_version"] is None
    assert facts["count"] == summary["gpu_count"]
    assert (facts["slug"], facts["architecture"], facts["compute_capability"]) == (slug, architecture, capability)
    assert facts["nvswitch_count"] == nvswitches
    assert facts["product"].startswith("NVIDIA ")
    assert [gpu["pci_bus_id"] for gpu in facts["gpus"]] == summary["gpu_pci_bus_ids"]
    assert facts["gpus"][0]["nearest_nics"] == [] and facts["topology"] == {"links": {}, "nics": []}


def test_gpu_facts_driver_installed_but_not_loaded(monkeypatch):
    outputs = driver_outputs("dgx-h100")
    outputs[("/usr/bin/nvidia-smi", "-q", "-x")] = (9, NO_DRIVER, "")
    node = Node(monkeypatch, BINARIES, outputs)
    facts = run_module(gpu_facts.main).result["ansible_facts"]["nvidia_gpu"]
    assert node.calls == [["/usr/bin/lspci", "-Dnn"], ["/usr/bin/nvidia-smi", "-q", "-x"]]
    assert not facts["driver_loaded"] and facts["count"] == 8 and facts["source"] == "lspci"
    assert facts["nvidia_smi_error"].startswith("NVIDIA-SMI has failed")


def test_gpu_facts_without_topology(monkeypatch, tmp_path):
    outputs = driver_outputs("dgx-h100")
    del outputs[("/usr/bin/nvidia-smi", "topo", "-m")]
    device = tmp_path / "bus" / "pci" / "devices" / "0000:97:00.0"
    device.mkdir(parents=True)
    (device / "numa_node").write_text("1\n")
    (device / "local_cpulist").write_text("56-111,168-223\n")
    node = Node(monkeypatch, BINARIES, outputs)
    facts = run_module(gpu_facts.main, {"topology": False, "mig": False, "sysfs_root": str(tmp_path)}).result
    facts = facts["ansible_facts"]["nvidia_gpu"]
    assert len(node.calls) == 2
    gpu4 = facts["gpus"][4]
    assert gpu4["numa_node"] == 1 and len(gpu4["cpu_affinity"]) == 112
    assert facts["gpus"][0]["numa_node"] is None and facts["gpus"][0]["cpu_affinity"] is None
    assert gpu4["nearest_nics"] == [] and facts["topology"]["links"] == {}


def test_gpu_facts_reads_the_mig_instances_of_a_gpu_with_mig_on(monkeypatch):
    """The A100 capture with MIG on: -lgip, -lgi and -lci after -q -x, each instance with its
    compute instances; 'No compute instances found' arrives with a non-zero exit code. (The MIG
    captures are of other GPUs than the XML's: the module matches them by GPU index only.)"""
    xml = fixture("smi_xml", "a100_sxm4_80gb_mig_4x1g20gb_v12.xml")
    smi = "/usr/bin/nvidia-smi"
    outputs = {
        (smi, "-q", "-x"): (0, xml, ""),
        (smi, "mig", "-lgip"): (0, fixture("mig", "a30_lgip_5_profiles_with_me_variants.txt"), ""),
        (smi, "mig", "-lgi"): (0, fixture("mig", "a100_40gb_lgi_3_instances_4g_2g_1g.txt"), ""),
        (smi, "mig", "-lci"): (0, fixture("mig", "a100_40gb_lci_4_instances_two_1c_in_one_gi.txt"), ""),
    }
    node = Node(monkeypatch, {"nvidia-smi": smi}, outputs)
    facts = run_module(gpu_facts.main, {"topology": False}).result["ansible_facts"]["nvidia_gpu"]
    assert node.calls == [list(argv) for argv in outputs]
    assert facts["mig_enabled"] and facts["mig_capable"]
    gpu0 = facts["gpus"][0]
    assert (gpu0["mig_mode"], gpu0["mig_mode_pending"]) == ("enabled", "enabled")
    assert [p["name"] for p in gpu0["mig_profiles"]][:2] == ["1g.6gb", "1g.6gb+me"]
    by_id = {gi["id"]: gi for gi in gpu0["mig_instances"]}
    assert sorted(by_id) == [2, 3, 9]
    assert by_id[3]["profile"] == "2g.10gb" and by_id[3]["placement"] == {"start": 4, "size": 2}
    assert [ci["id"] for ci in by_id[3]["compute_instances"]] == [0, 1]
    assert by_id[3]["compute_instances"][1] == {"id": 1, "profile": "1c.2g.10gb", "profile_id": 0}

    outputs[smi, "mig", "-lgi"] = (6, "No GPU instances found: Not Found\n", "")
    outputs[smi, "mig", "-lci"] = (6, "No compute instances found: Not Found\n", "")
    node = Node(monkeypatch, {"nvidia-smi": smi}, outputs)
    exited = run_module(gpu_facts.main, {"topology": False})
    assert not [w for w in node.warnings if "mig" in w]
    assert exited.result["ansible_facts"]["nvidia_gpu"]["gpus"][0]["mig_instances"] == []

    outputs[smi, "mig", "-lci"] = (2, "", "Insufficient Permissions\n")
    node = Node(monkeypatch, {"nvidia-smi": smi}, outputs)
    run_module(gpu_facts.main, {"topology": False})
    assert any("nvidia-smi mig -lci` failed (rc 2): Insufficient Permissions" in w for w in node.warnings)


def test_gpu_facts_with_no_gpu(monkeypatch):
    lspci = "\n".join(
        line for line in fixture("lspci", "lspci_nn_kvm_vm_a10_mlx5_vf.txt").split("\n") if "10de" not in line
    )
    node = Node(
        monkeypatch,
        BINARIES,
        {
            ("/usr/bin/lspci", "-Dnn"): (0, lspci, ""),
            ("/usr/bin/nvidia-smi", "-q", "-x"): (6, "No devices were found\n", ""),
        },
    )
    facts = run_module(gpu_facts.main).result["ansible_facts"]["nvidia_gpu"]
    assert len(node.calls) == 2
    assert facts["present"] is False and facts["count"] == 0 and facts["gpus"] == []
    assert facts["pci_read"] is True  # looked, and found none
    assert facts["product"] is None and facts["slug"] is None and facts["nvswitch_count"] == 0
    assert len(facts["hca_pci"]) == 1


def test_gpu_facts_without_lspci_or_nvidia_smi(monkeypatch):
    node = Node(monkeypatch, {}, {})
    facts = run_module(gpu_facts.main).result["ansible_facts"]["nvidia_gpu"]
    assert node.calls == [] and facts["present"] is False
    assert facts["pci_read"] is False  # not looked: preflight refuses a GPU host like this
    assert any("pciutils" in warning for warning in node.warnings)


def test_gpu_facts_unreadable_topology_fails_with_the_line(monkeypatch):
    outputs = driver_outputs("dgx-h100")
    topo = profile_file("dgx-h100", "nvidia-smi-topo-m.txt").replace("NV18", "NV?", 1)
    outputs[("/usr/bin/nvidia-smi", "topo", "-m")] = (0, topo, "")
    Node(monkeypatch, BINARIES, outputs)
    exited = run_module(gpu_facts.main)
    assert exited.failed
    assert "nvidia-smi topo -m" in exited.result["msg"]
    assert exited.result["line_number"] == 2 and "NV?" in exited.result["line"]
    assert exited.result["cmd"] == ["/usr/bin/nvidia-smi", "topo", "-m"]


def test_gpu_facts_lspci_failure_is_reported(monkeypatch):
    Node(monkeypatch, BINARIES, {("/usr/bin/lspci", "-Dnn"): (1, "", "lspci: Cannot open /sys/bus/pci\n")})
    exited = run_module(gpu_facts.main)
    assert exited.failed and "Cannot open /sys/bus/pci" in exited.result["msg"]


def test_gpu_facts_rejects_unknown_options(monkeypatch):
    Node(monkeypatch, BINARIES, {})
    exited = run_module(gpu_facts.main, {"topolgy": False})
    assert exited.failed and "topolgy" in exited.result["msg"]


# --------------------------------------------------------------------------------------------
# ib_facts


def ib_outputs(name):
    return {
        ("/usr/sbin/ibstat",): (0, profile_file(name, "ibstat.txt"), ""),
        ("/usr/sbin/ibdev2netdev",): (0, profile_file(name, "ibdev2netdev.txt"), ""),
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("check_mode", [False, True])
def test_ib_facts_profiles(monkeypatch, name, check_mode):
    node = Node(monkeypatch, {"ibstat": "/usr/sbin/ibstat", "ibdev2netdev": "/usr/sbin/ibdev2netdev"}, ib_outputs(name))
    exited = run_module(ib_facts.main, check_mode=check_mode)
    assert not exited.failed and exited.result["changed"] is False
    assert node.calls == [["/usr/sbin/ibstat"], ["/usr/sbin/ibdev2netdev"]]
    facts = exited.result["ansible_facts"]["infiniband"]
    summary = profile_summary(name)
    assert facts["present"] and facts["ca_count"] == len(summary["nics"])
    assert [hca["name"] for hca in facts["hcas"]] == [nic["name"] for nic in summary["nics"]]
    assert {hca["name"]: hca["netdev"] for hca in facts["hcas"]} == {
        nic["name"]: nic["netdev"] for nic in summary["nics"]
    }
    for layer in ("InfiniBand", "Ethernet"):
        expected = [
            f"{nic['name']}:1" for nic in summary["nics"] if nic["state"] == "Active" and nic["link_layer"] == layer
        ]
        assert facts["active_ports"][layer] == expected


def test_ib_facts_dgx_h100_ports_in_natural_order(monkeypatch):
    Node(monkeypatch, {"ibstat": "/usr/sbin/ibstat", "ibdev2netdev": "/usr/sbin/ibdev2netdev"}, ib_outputs("dgx-h100"))
    facts = run_module(ib_facts.main).result["ansible_facts"]["infiniband"]
    assert facts["active_ports"]["InfiniBand"] == [
        "mlx5_0:1",
        "mlx5_3:1",
        "mlx5_4:1",
        "mlx5_5:1",
        "mlx5_6:1",
        "mlx5_9:1",
        "mlx5_10:1",
        "mlx5_11:1",
    ]
    assert facts["active_ports"]["Ethernet"] == ["mlx5_1:1"]
    mlx5_0 = facts["hcas"][0]
    assert (mlx5_0["ca_type"], mlx5_0["firmware_version"], mlx5_0["netdev"]) == ("MT4129", "28.39.1002", "ibp79s0")
    assert mlx5_0["ports"][0]["netdev"] == "ibp79s0" and mlx5_0["ports"][0]["rate"] == 400


def test_ib_facts_netdev_from_sysfs_without_ibdev2netdev(monkeypatch, tmp_path):
    net = tmp_path / "class" / "infiniband" / "mlx5_0" / "device" / "net"
    (net / "ibp79s0").mkdir(parents=True)
    ibstat_text = fixture("ibstat", "cx4_single_ca_no_catype_initializing_lid65535.txt")
    node = Node(monkeypatch, {"ibstat": "/usr/sbin/ibstat"}, {("/usr/sbin/ibstat",): (0, ibstat_text, "")})
    facts = run_module(ib_facts.main, {"sysfs_root": str(tmp_path)}).result["ansible_facts"]["infiniband"]
    assert node.calls == [["/usr/sbin/ibstat"]]
    assert facts["sysfs_cas"] == ["mlx5_0"]
    assert facts["hcas"][0]["netdev"] == "ibp79s0" and facts["hcas"][0]["ports"][0]["netdev"] == "ibp79s0"
    assert facts["active_ports"] == {"InfiniBand": [], "Ethernet": []}


def test_ib_facts_without_ibstat(monkeypatch, tmp_path):
    (tmp_path / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    node = Node(monkeypatch, {}, {})
    facts = run_module(ib_facts.main, {"sysfs_root": str(tmp_path)}).result["ansible_facts"]["infiniband"]
    assert node.calls == []
    assert facts["present"] is False and "infiniband-diags" in facts["reason"]
    assert facts["sysfs_cas"] == ["mlx5_0"] and facts["hcas"] == []


def test_ib_facts_with_no_adapter(monkeypatch):
    message = "ibpanic: [12345] main: stat of IB device 'mlx5_0' failed: No such file or directory\n"
    Node(monkeypatch, {"ibstat": "/usr/sbin/ibstat"}, {("/usr/sbin/ibstat",): (255, "", message)})
    facts = run_module(ib_facts.main).result["ansible_facts"]["infiniband"]
    assert facts["present"] is False and facts["reason"] == "ibstat: " + message.strip()


def test_ib_facts_unreadable_output_fails_with_the_line(monkeypatch):
    text = fixture("ibstat", "a100_vm_8ca_cx6_ib_rate100_active.txt").replace("Rate: 100", "Rate: fast", 1)
    Node(monkeypatch, {"ibstat": "/usr/sbin/ibstat"}, {("/usr/sbin/ibstat",): (0, text, "")})
    exited = run_module(ib_facts.main)
    assert exited.failed and exited.result["line"].strip() == "Rate: fast"
    assert exited.result["cmd"] == ["/usr/sbin/ibstat"]


def smpquery_standin(tmp_path, profile, leaf):
    """What gpusim's smpquery prints for each query of a profile's node on ``leaf``, run for real."""
    (tmp_path / "leaf.json").write_text(json.dumps({"name": leaf, "model": "MQM9790"}))
    env = dict(
        os.environ, GPUSIM_PROFILE_DIR=str(GPUSIM / "profiles" / profile), GPUSIM_IB_LEAF=str(tmp_path / "leaf.json")
    )

    def answer(*argv):
        done = subprocess.run(
            [sys.executable, str(GPUSIM / "bin" / "smpquery"), *argv],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        return (done.returncode, done.stdout, done.stderr)

    return answer


def test_ib_facts_reads_each_infiniband_ports_leaf_switch(monkeypatch, tmp_path):
    answer = smpquery_standin(tmp_path, "dgx-h100", "leaf-ib")
    outputs = ib_outputs("dgx-h100")
    ports = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    for ca in ports:
        for attribute in ("nodeinfo", "nodedesc"):
            argv = ("-C", ca, "-P", "1", "-D", attribute, "0,1")
            outputs[("/usr/sbin/smpquery", *argv)] = answer(*argv)
    binaries = {
        "ibstat": "/usr/sbin/ibstat",
        "ibdev2netdev": "/usr/sbin/ibdev2netdev",
        "smpquery": "/usr/sbin/smpquery",
    }
    node = Node(monkeypatch, binaries, outputs)
    facts = run_module(ib_facts.main, {"neighbours": True}, check_mode=True).result["ansible_facts"]["infiniband"]
    # Two queries per Active InfiniBand port, none for the Ethernet port.
    assert len(node.calls) == 2 + 2 * len(ports)
    assert facts["neighbour_errors"] == []
    assert [leaf["description"] for leaf in facts["leaves"]] == ["MF0;leaf-ib:MQM9790/U1"]
    assert facts["hcas"][0]["ports"][0]["neighbour"]["kind"] == "switch"


def test_ib_facts_names_a_port_whose_neighbour_cannot_be_read(monkeypatch, tmp_path):
    answer = smpquery_standin(tmp_path, "dgx-h100", "leaf-ib")
    outputs = ib_outputs("dgx-h100")
    for ca in ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]:
        for attribute in ("nodeinfo", "nodedesc"):
            argv = ("-C", ca, "-P", "1", "-D", attribute, "0,1")
            outputs[("/usr/sbin/smpquery", *argv)] = (
                answer(*argv) if ca != "mlx5_4" else answer("-C", "x", "-P", "1", "-D", attribute, "0,1")
            )
    binaries = {
        "ibstat": "/usr/sbin/ibstat",
        "ibdev2netdev": "/usr/sbin/ibdev2netdev",
        "smpquery": "/usr/sbin/smpquery",
    }
    Node(monkeypatch, binaries, outputs)
    facts = run_module(ib_facts.main, {"neighbours": True}).result["ansible_facts"]["infiniband"]
    (error,) = facts["neighbour_errors"]
    assert error.startswith("mlx5_4:1 (`-C mlx5_4 -P 1 -D nodeinfo 0,1` exited 255: ibwarn: "), error
    assert "_do_madrpc failed" in error
    # Without smpquery each port says so.
    Node(monkeypatch, {"ibstat": "/usr/sbin/ibstat"}, {("/usr/sbin/ibstat",): outputs[("/usr/sbin/ibstat",)]})
    facts = run_module(ib_facts.main, {"neighbours": True}).result["ansible_facts"]["infiniband"]
    assert len(facts["neighbour_errors"]) == 8 and "infiniband-diags" in facts["neighbour_errors"][0]
    assert facts["leaves"] == []
