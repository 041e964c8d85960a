# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_health against the gpusim stand-in tools of a profile, healthy and with injected faults:
each fault fails its own check and no other; the hk inventory's NCCL_IB_HCA list is caught."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ansible.module_utils import basic
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.modules import node_health
from conftest import GPUSIM, profile_facts
from module_harness import Node, run_module

DRIVER = "580.95.05"


def this_python(program: str) -> str:
    """A stand-in's source, run by this Python: its shebang (#!/usr/bin/env python, ansible-test's)
    finds no python on the PATH the stand-ins run with."""
    return f"#!{sys.executable}\n" + program.split("\n", 1)[1]


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """A bin folder of the gpusim stand-ins, run for real, and a node root with dpkg's status."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = this_python((GPUSIM / "repo" / "nvidia-smi.py").read_text())
    (bin_dir / "nvidia-smi").write_text(smi.replace("@DRIVER_VERSION@", DRIVER).replace("@CUDA_VERSION@", "12.8"))
    for tool in ("ibstat", "ibv_devinfo", "dmesg", "lspci"):
        (bin_dir / tool).write_text(this_python((GPUSIM / "bin" / tool).read_text()))
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    root = tmp_path / "root"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "var/lib/dpkg/status").write_text(
        f"Package: nvidia-driver-580-open\nStatus: install ok installed\nVersion: {DRIVER}-1\n\n"
        f"Package: libnvidia-compute-580\nStatus: install ok installed\nVersion: {DRIVER}-1\n\n"
    )
    faults = tmp_path / "faults.json"
    faults.write_text("{}")

    class Tools:
        def __init__(self):
            self.root, self.faults, self.profile = root, faults, None

        def run(self, argv, **kwargs):
            env = {
                "PATH": f"{bin_dir}:/usr/bin:/bin",
                "GPUSIM_FAULTS": str(faults),
                "GPUSIM_PROFILE_DIR": str(GPUSIM / "profiles" / self.profile),
                "LC_ALL": "C",
            }
            done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
            return done.returncode, done.stdout, done.stderr

    tools = Tools()
    binaries = {name: str(bin_dir / name) for name in ("nvidia-smi", "ibstat", "ibv_devinfo", "dmesg", "lspci")}
    Node(monkeypatch, binaries, {})
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda module, argv, **kwargs: tools.run(argv, **kwargs))
    return tools


def health(stand_ins, profile, faults=None, nccl_conf=None, **options):
    stand_ins.profile = profile
    stand_ins.faults.write_text(json.dumps(faults or {}))
    if nccl_conf is not None:
        (stand_ins.root / "etc/nccl.conf").write_text(nccl_conf)
    facts = profile_facts(profile)
    args = {"nvidia_gpu": facts, "infiniband": {}, "dcgm_level": 0, "root": str(stand_ins.root), **options}
    result = run_module(node_health.main, args).result
    return result, {(c["check"], c["subject"]): c for c in result["checks"]}


def failed(checks):
    return {key for key, c in checks.items() if c["verdict"] == "fail"}


H100_HCAS = "NCCL_IB_HCA==" + ",".join(f"mlx5_{i}:1" for i in (0, 3, 4, 5, 6, 9, 10, 11)) + "\n"


def test_healthy_dgx_h100_passes_every_check_it_can_measure(stand_ins):
    result, checks = health(stand_ins, "dgx-h100", nccl_conf=H100_HCAS)
    assert failed(checks) == set() and result["verdict"] == "pass"
    verdicts = {key[0]: c["verdict"] for key, c in checks.items()}
    assert verdicts == {
        "gpu_count": "pass",
        "driver_version": "pass",
        # A fake root has no kernel installed, and the running kernel is not the root's.
        "kernel_modules": "skip",
        "persistence_mode": "pass",
        "ecc": "pass",
        "pcie": "pass",
        "acs": "pass",
        "fabric": "pass",
        "xid": "pass",
        "nvlink": "pass",
        "ib_ports": "pass",
        "hca_pcie": "skip",
        "nccl_hcas": "pass",
        "slurmd": "skip",
    }
    assert checks[("nvlink", "all GPUs")]["expected"] == "18 links per GPU at 26.562 GB/s"
    # The profile's switches (tests/gpusim/assemble.py): per GPU a root port, a switch's upstream port
    # without ACS and a downstream port for the GPU and one for its NIC; the Ethernet cards in root ports.
    assert checks[("acs", "all bridges")]["measured"] == "34 bridges between them, none redirects"
    assert checks[("gpu_count", "node")]["expected"] == 8
    assert result["nccl_expected"]["floor"] == 435.4
    assert len(result["hcas"]) == 12 and result["fabric"] == "InfiniBand"
    # Each HCA's own firmware and part (ibv_devinfo stand-in from ibstat): 8 ConnectX-7, 4 ConnectX-6 Dx.
    assert sorted({(h["vendor_part_id"], h["fw_ver"]) for h in result["hcas"]}) == [
        (4125, "22.38.1002"),
        (4129, "28.39.1002"),
    ]


def test_each_fault_fails_its_own_check_and_no_other(stand_ins):
    faults = {
        "nvlink_down": [{"gpu": 3, "link": 5}],
        "pcie": [{"gpu": 5, "gen": 3, "width": 8}],
        "ib_rate": {"mlx5_4": 200},
        "xid": [{"gpu": 2, "xid": 79}, {"gpu": 0, "xid": 13}],
        "hca_firmware": {"mlx5_9": "28.37.1014"},
        "fabric": [{"gpu": 6, "state": "In Progress", "status": "N/A"}],
        "acs": [{"gpu": 2}],
    }
    result, checks = health(stand_ins, "dgx-h100", faults, nccl_conf=H100_HCAS)
    assert failed(checks) == {
        ("acs", "0000:70:01.0"),
        ("nvlink", "GPU3"),
        ("pcie", "GPU5"),
        ("ib_ports", "mlx5_4:1"),
        ("xid", "GPU2"),
        ("fabric", "GPU6"),
    }
    acs = checks[("acs", "0000:70:01.0")]
    assert acs["measured"] == "ReqRedir+ CmpltRedir+" and "of GPU2 below it" in acs["reason"]
    assert "setpci -s 0000:70:01.0 ECAP_ACS+0x6.w=0000" in acs["reason"]
    assert checks[("fabric", "GPU6")]["measured"] == "In Progress"
    assert "nvidia-fabricmanager" in checks[("fabric", "GPU6")]["reason"]
    assert checks[("xid", "GPU0")]["verdict"] == "warn"  # Xid 13 is not in the fatal list
    assert checks[("nvlink", "GPU3")]["measured"] == "17 of 18 links active; inactive: link 5"
    assert {h["hca_id"]: h["fw_ver"] for h in result["hcas"]}["mlx5_9"] == "28.37.1014"


def test_the_hk_inventory_hca_list_fails_against_a_dgx_h100(stand_ins):
    """inventories/hk used to list mlx5_0..7; a DGX H100's InfiniBand ports are 0, 3-6, 9-11."""
    conf = "NCCL_IB_HCA==" + ",".join(f"mlx5_{i}:1" for i in range(8)) + "\n"
    _result, checks = health(stand_ins, "dgx-h100", nccl_conf=conf)
    check = checks[("nccl_hcas", "nccl.conf")]
    assert check["verdict"] == "fail"
    assert check["reason"].startswith("active but not selected by NCCL_IB_HCA==mlx5_0:1,")
    assert "mlx5_7:1: mlx5_9:1, mlx5_10:1, mlx5_11:1;" in check["reason"]
    assert "not an active compute port: mlx5_1:1, mlx5_2:1, mlx5_7:1" in check["reason"]


def test_pcie_only_node_expects_no_nvlink_and_its_roce_port(stand_ins):
    result, checks = health(stand_ins, "pcie-l40s", nccl_conf="NCCL_IB_HCA==mlx5_0:1\n")
    assert checks[("nvlink", "node")]["verdict"] == "skip" and failed(checks) == set()
    assert result["fabric"] == "Ethernet" and "PCIe only" in result["nccl_expected"]["reason"]


def test_output_a_parser_cannot_read_is_a_failed_check_naming_the_command(stand_ins, tmp_path):
    broken = tmp_path / "bin" / "nvidia-smi"
    broken.write_text(
        "#!/bin/sh\nif [ \"$1\" = nvlink ]; then echo 'GPU 0: X (UUID: u)'; echo ' Link 0: fast'; "
        "else exec " + str(tmp_path / "real-smi") + ' "$@"; fi\n'
    )
    (tmp_path / "real-smi").write_text(
        this_python((GPUSIM / "repo" / "nvidia-smi.py").read_text())
        .replace("@DRIVER_VERSION@", DRIVER)
        .replace("@CUDA_VERSION@", "12.8")
    )
    (tmp_path / "real-smi").chmod(0o755)
    _result, checks = health(stand_ins, "dgx-h100", nccl_conf=H100_HCAS)
    check = checks[("nvlink", "node")]
    assert check["verdict"] == "fail"
    assert "could not read `nvidia-smi nvlink -s`" in check["reason"] and "line 2" in check["reason"]
    assert checks[("ib_ports", "8 InfiniBand port(s)")]["verdict"] == "pass"  # the other checks still ran


def test_a_node_without_gpus_is_skipped(stand_ins):
    result = run_module(node_health.main, {"nvidia_gpu": {"present": False}, "root": str(stand_ins.root)}).result
    assert result["verdict"] == "skip" and result["checks"][0]["reason"] == "no NVIDIA GPU"


def test_a_wrong_dcgm_level_is_refused_naming_it(stand_ins):
    exited = run_module(node_health.main, {"nvidia_gpu": {"present": True}, "dcgm_level": 7})
    assert exited.failed and "dcgm_level is 7" in exited.result["msg"]


def test_nccl_tests_missing_is_a_visible_skip_and_present_is_reported(stand_ins, tmp_path):
    missing = "/opt/nccl-tests/current/build/all_reduce_perf"
    result, checks = health(stand_ins, "dgx-h100", nccl_conf=H100_HCAS, nccl_tests=missing)
    assert result["nccl_tests_present"] is False
    assert checks[("nccl_node", "node")]["verdict"] == "skip" and missing in checks[("nccl_node", "node")]["reason"]
    binary = stand_ins.root / "opt/nccl-tests/current/build/all_reduce_perf"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    result, checks = health(stand_ins, "dgx-h100", nccl_conf=H100_HCAS, nccl_tests=missing)
    assert result["nccl_tests_present"] is True and ("nccl_node", "node") not in checks


# NCCL_IB_HCA as NCCL reads it: a prefix without '=', an exclusion with '^', every port without ':N'.
DGX_H100_IB = ["mlx5_0:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1", "mlx5_6:1", "mlx5_9:1", "mlx5_10:1", "mlx5_11:1"]


@pytest.mark.parametrize(
    "spec, selected",
    [
        ("=mlx5_0:1,mlx5_3:1", ["mlx5_0:1", "mlx5_3:1"]),
        ("mlx5_1", ["mlx5_10:1", "mlx5_11:1"]),  # a prefix: mlx5_1 is mlx5_10 and mlx5_11 here
        ("=mlx5_1", []),  # exact: there is no mlx5_1
        ("^mlx5_4", [p for p in DGX_H100_IB if p != "mlx5_4:1"]),
        ("^=mlx5_1", DGX_H100_IB),  # exact exclusion of a device that is not there
        ("^mlx5_1", [p for p in DGX_H100_IB if p not in ("mlx5_10:1", "mlx5_11:1")]),
        ("mlx5", DGX_H100_IB),
        ("mlx5_0:2", []),
    ],
)
def test_nccl_ib_hca_is_read_as_nccl_reads_it(spec, selected):
    assert v.nccl_ib_hca(spec, DGX_H100_IB)[0] == selected


def test_an_exclusion_that_leaves_the_active_ports_passes_and_one_that_drops_one_fails():
    ports = [{"name": name, "state": "Active"} for name in DGX_H100_IB]
    assert v.check_nccl_hcas("^=mlx5_1,mlx5_2,mlx5_7", ports)[0]["verdict"] == "pass"
    (check,) = v.check_nccl_hcas("^mlx5_4", ports)
    assert check["verdict"] == "fail" and "not selected by NCCL_IB_HCA=^mlx5_4: mlx5_4:1" in check["reason"]


def test_a_wedged_dcgmi_diag_is_stopped_at_dcgm_timeout(stand_ins, tmp_path, monkeypatch):
    """dcgm_timeout was documented and never applied: a dcgmi that never returns held validation."""
    wedged = tmp_path / "bin" / "dcgmi"
    wedged.write_text("#!/bin/sh\nexec sleep 60\n")
    wedged.chmod(0o755)
    binaries = {
        name: str(tmp_path / "bin" / name) for name in ("nvidia-smi", "ibstat", "ibv_devinfo", "dmesg", "dcgmi")
    }
    Node(monkeypatch, dict(binaries, timeout="/usr/bin/timeout"), {})
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda module, argv, **kwargs: stand_ins.run(argv))
    _result, checks = health(stand_ins, "pcie-l40s", dcgm_level=1, dcgm_timeout=1)
    (dcgm_check,) = [c for key, c in checks.items() if key[0] == "dcgm_diag"]
    assert dcgm_check["verdict"] == "fail"
    assert dcgm_check["measured"] == "dcgmi diag -r 1 did not finish within dcgm_timeout (1 s)"


def test_a_node_whose_hcas_vanished_fails_instead_of_skipping(stand_ins, tmp_path, monkeypatch):
    """ibstat gone (or the RDMA stack broken): 'no ports' was a skip, so a node drained for
    ib_ports was resumed. Its adapters are known from ib_facts and from PCI."""
    binaries = {name: str(tmp_path / "bin" / name) for name in ("nvidia-smi", "ibv_devinfo", "dmesg")}
    Node(monkeypatch, binaries, {})
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda module, argv, **kwargs: stand_ins.run(argv))
    _result, checks = health(stand_ins, "pcie-l40s", infiniband={"hcas": [{"name": "mlx5_0"}]})
    check = checks[("ib_ports", "adapters")]
    assert check["verdict"] == "fail" and check["measured"] == "ibstat is not installed"
    assert "mlx5_0" in check["expected"] and "validate_fabric: none" in check["reason"]
    # From PCI alone (no ib_facts): the L40S profile's ConnectX-6 Dx.
    _result, checks = health(stand_ins, "pcie-l40s")
    assert (
        checks[("ib_ports", "adapters")]["verdict"] == "fail"
        and "1 on PCI" in checks[("ib_ports", "adapters")]["expected"]
    )
    # A node whose adapters carry no compute traffic says so.
    _result, checks = health(stand_ins, "pcie-l40s", fabric="none")
    assert checks[("ib_ports", "node")]["verdict"] == "skip" and ("ib_ports", "adapters") not in checks


def test_an_hca_ib_facts_recorded_that_ibstat_no_longer_lists_fails(stand_ins):
    _result, checks = health(stand_ins, "pcie-l40s", infiniband={"hcas": [{"name": "mlx5_0"}, {"name": "mlx5_1"}]})
    assert checks[("ib_ports", "mlx5_1")]["verdict"] == "fail"
    assert ("ib_ports", "mlx5_0") not in checks


@pytest.mark.parametrize(
    ("thresholds", "words"),
    [
        ({"nvlink_link_gbps": "26.5"}, "validate_thresholds.nvlink_link_gbps is '26.5' (str), not a number"),
        ({"ib_rate_gbps": "400"}, "validate_thresholds.ib_rate_gbps is '400' (str), not a number"),
        ({"node_floor_share": 1.5}, "validate_thresholds.node_floor_share is 1.5"),
        ({"nvlink_links": 17.5}, "a whole number of links per GPU"),
        ({"nvlink_speed": 26.5}, "validate_thresholds.nvlink_speed is no threshold the checks read"),
        ({"ib_rate_gbps": True}, "(bool), not a number"),
    ],
)
def test_a_threshold_the_checks_cannot_use_is_named_not_a_traceback(stand_ins, thresholds, words):
    exited = run_module(node_health.main, {"nvidia_gpu": {"present": True}, "thresholds": thresholds})
    assert exited.failed and words in exited.result["msg"]


def _mig(gpu, instances):
    gpu = dict(gpu, mig_mode="enabled", mig_instances=instances)
    gpu["mig_profiles"] = [{"name": "1g.10gb", "memory_gib": 9.75}, {"name": "7g.80gb", "memory_gib": 79.0}]
    return gpu


def test_dcgm_diag_is_a_visible_skip_on_gpus_split_by_mig(stand_ins):
    """DCGM runs its diagnostic on whole GPUs only (NVIDIA/DCGM#31): a split GPU is named, and a GPU
    instance of the whole GPU with one compute instance counts as whole."""
    stand_ins.profile = "dgx-h100"
    facts = profile_facts("dgx-h100")
    split = [{"profile": "1g.10gb", "compute_instances": [{"profile": "1g.10gb"}]}] * 7
    whole = [{"profile": "7g.80gb", "compute_instances": [{"profile": "7g.80gb"}]}]
    facts["gpus"] = [_mig(facts["gpus"][0], split), _mig(facts["gpus"][1], whole), *facts["gpus"][2:]]
    assert v.mig_split_gpus(facts) == [0]
    args = {"nvidia_gpu": facts, "infiniband": {}, "dcgm_level": 1, "root": str(stand_ins.root)}
    checks = run_module(node_health.main, args).result["checks"]
    (dcgm_check,) = [c for c in checks if c["check"] == "dcgm_diag"]
    assert dcgm_check["verdict"] == "skip" and dcgm_check["reason"].startswith("GPU 0 in MIG mode")
    result = run_module(node_health.main, args).result
    nccl = [c for c in result["checks"] if c["check"] == "nccl_node"]
    assert result["mig_gpus"] == [0, 1] and nccl[0]["verdict"] == "skip" and "peer-to-peer" in nccl[0]["reason"]
    # Nor a pair across nodes: the plan leaves the node out, visibly.
    plan = v.multi_node_plan({"gpu01": dict(result, gpus=8), "gpu02": dict(result, gpus=8, mig_gpus=[])})
    assert plan["runs"] == [] and "MIG" in plan["skipped"][0]["reason"]
    facts["gpus"][0] = _mig(facts["gpus"][0], whole)
    assert v.mig_split_gpus(facts) == []


def test_the_health_check_s_state_and_the_driver_s_recovery_action_come_back(stand_ins):
    result, checks = health(stand_ins, "pcie-l40s", {"recovery_action": [{"gpu": 2, "action": "Reset"}]})
    assert result["health_state"] is None  # gpuops-health does not run here
    assert checks[("recovery_action", "GPU2")]["verdict"] == "fail"
    assert checks[("recovery_action", "GPU2")]["measured"] == "Reset"
    (stand_ins.root / "var/lib/gpuops").mkdir(parents=True)
    (stand_ins.root / "var/lib/gpuops/health-state.json").write_text('{"node": {}}')
    result, _checks = health(stand_ins, "pcie-l40s")
    assert result["health_state"] == '{"node": {}}'
