# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thresholds derived from the hardware facts, against the published figures; the verdicts; the
cross-node plan; the report (module_utils/validation.py, module_utils/report.py)."""

from __future__ import annotations

import json
import time

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import dcgm, fleet, health, nccl_tests, nvidia_smi
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns
from ansible_collections.gpuops.cluster.plugins.module_utils import report as r
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci
from ansible_collections.gpuops.cluster.plugins.modules import validation_report
from conftest import GPUSIM, fixture
from module_harness import Node, run_module


def facts_with_topology(profile):
    """A node's nvidia_gpu facts as gpu_facts builds them once the driver is in (lspci, -q -x, topo -m)."""
    folder = GPUSIM / "profiles" / profile
    return build_gpu_facts(
        classify(parse_lspci((folder / "lspci-Dnn.txt").read_text())),
        nvidia_smi.parse_query_xml((folder / "nvidia-smi-q-x.xml").read_text()),
        nvidia_smi.parse_topo((folder / "nvidia-smi-topo-m.txt").read_text()),
    )


def gpus(profile):
    return nvidia_smi.parse_query_xml((GPUSIM / "profiles" / profile / "nvidia-smi-q-x.xml").read_text())["gpus"]


# Published single-node all_reduce figures (k8s_mig_validation.md 3.3): the floor must sit below
# them (a healthy node passes) and above 0.85 of them (a degraded one does not).
PUBLISHED = {"dgx-h100": 476, "hgx-a100": 230, "hgx-b200": 830, "dgx1-v100": 135.5}


@pytest.mark.parametrize("profile", sorted(PUBLISHED))
def test_single_node_floor_sits_below_the_published_figure(profile):
    expectation = v.nccl_node_expectation(facts_with_topology(profile), gpus(profile))
    assert 0.85 * PUBLISHED[profile] < expectation["floor"] < PUBLISHED[profile]
    assert expectation["floor"] == round(0.92 * expectation["expected"], 1)


def test_nvlink_expectation_per_topology():
    h100 = v.nvlink_expectation(facts_with_topology("dgx-h100"))
    assert (h100["kind"], set(h100["links"].values()), h100["gbps"]) == ("nvls", {18}, 26.562)
    v100 = v.nvlink_expectation(facts_with_topology("dgx1-v100"))
    assert v100["kind"] == "direct" and set(v100["links"].values()) == {6}  # NV1+NV1+NV2+NV2
    assert v.nvlink_expectation(facts_with_topology("pcie-l40s"))["kind"] == "none"
    overridden = v.nvlink_expectation(facts_with_topology("dgx-h100"), {"nvlink_links": 16})
    assert set(overridden["links"].values()) == {16}


def test_override_of_the_node_figure():
    expectation = v.nccl_node_expectation(
        facts_with_topology("pcie-l40s"), gpus("pcie-l40s"), {"nccl_node_busbw_gbps": 40, "node_floor_share": 0.9}
    )
    assert expectation["floor"] == 36.0 and "validate_thresholds" in expectation["reason"]


def _ports(count, rate, state="Active"):
    return [
        {
            "name": f"mlx5_{i}:1",
            "hca": f"mlx5_{i}",
            "ca_type": "MT4129",
            "state": state,
            "physical_state": "LinkUp",
            "rate": rate,
        }
        for i in range(count)
    ]


def test_multi_node_floor_matches_the_published_nic_figures():
    ndr = v.nccl_multi_expectation({"a": _ports(8, 400), "b": _ports(8, 400)})
    assert ndr["expected"] == 376.0 and 370 > ndr["floor"] > 330  # 370-385 published (nccl-tests#290)
    hdr = v.nccl_multi_expectation({"a": _ports(4, 200), "b": _ports(4, 200)})
    assert hdr["expected"] == 94.0  # ~95 published (nccl-tests#252)
    weakest = v.nccl_multi_expectation({"a": _ports(8, 400), "b": _ports(6, 400)})
    assert weakest["expected"] == 282.0 and "(b)" in weakest["reason"]


def test_multi_node_plan_pairs_within_a_fabric():
    def node(fabric, count=8):
        return {"checks": [], "fabric": fabric, "compute_ports": _ports(2, 400), "gpus": [{}] * count}

    plan = v.multi_node_plan(
        {
            "n1": node("InfiniBand"),
            "n2": node("InfiniBand"),
            "n3": node("InfiniBand"),
            "r1": node("Ethernet"),
            "head": {"skipped": True},
            "n4": dict(node("InfiniBand"), nccl_tests_present=False),
        }
    )
    runs = [(run["check"], run["hosts"]) for run in plan["runs"]]
    assert runs == [("nccl_pair", ["n1", "n2"]), ("nccl_pair", ["n3", "n1"]), ("nccl_all", ["n1", "n2", "n3"])]
    assert [(s["subject"], s["verdict"]) for s in plan["skipped"]] == [("n4", "skip"), ("r1", "skip")]
    assert "nccl-tests is not on this node" in plan["skipped"][0]["reason"]
    assert "the only node on the Ethernet fabric" in plan["skipped"][1]["reason"]


def test_a_limited_run_pairs_its_nodes_with_validated_nodes_of_their_fabric():
    """--limit: a fabric's only node in this run, and an odd node out, pair with a node out of the
    run that passed its last validation (the fleet state's record), never with a failed one, one
    of another fabric, or one without an Active port."""

    def node(fabric, count=4):
        return {"checks": [], "fabric": fabric, "compute_ports": _ports(1, 100), "gpus": [{}] * count}

    def partner(fabric, verdict="pass", gpus=4, ports=None):
        return {
            "verdict": verdict,
            "fabric": fabric,
            "compute_ports": ports or _ports(1, 100),
            "gpus": gpus,
            "name": "x",
        }

    partners = {
        "old-ib": partner("InfiniBand", gpus=8, ports=_ports(2, 400)),
        "bad-eth": partner("Ethernet", verdict="fail"),
        "dark-eth": partner("Ethernet", ports=_ports(1, 100, state="Down")),
        "old-eth": partner("Ethernet", gpus=2),
        "new": partner("Ethernet"),  # in this run: judged now, not a partner
    }
    plan = v.multi_node_plan(
        {"new": node("Ethernet"), "ib1": node("InfiniBand"), "ib2": node("InfiniBand"), "ib3": node("InfiniBand")},
        partners=partners,
    )
    runs = [(run["check"], run["hosts"], run["gpus_per_node"]) for run in plan["runs"]]
    assert runs == [
        ("nccl_pair", ["new", "old-eth"], 2),
        ("nccl_pair", ["ib1", "ib2"], 4),
        ("nccl_pair", ["ib3", "old-ib"], 4),
        ("nccl_all", ["ib1", "ib2", "ib3"], 4),
    ]
    assert plan["skipped"] == []
    # The slower side sets the floor: old-ib's two 400 Gb/s ports against ib3's one.
    assert "(ib3)" in plan["runs"][2]["expectation"]["reason"]
    alone = v.multi_node_plan({"new": node("Ethernet")}, partners={"bad-eth": partners["bad-eth"]})
    assert alone["runs"] == [] and "no validated node there" in alone["skipped"][0]["reason"]


def test_firmware_majority_is_the_reference_on_every_node():
    def hca(name, version, part=4129):
        return {"hca_id": name, "fw_ver": version, "vendor_part_id": part}

    result = v.firmware_checks(
        {
            "a": [hca("mlx5_0", "28.39.1002"), hca("mlx5_1", "28.39.1002")],
            "b": [hca("mlx5_0", "28.39.1002"), hca("mlx5_1", "28.37.1014"), hca("mlx5_2", "22.38.1002", 4125)],
            "c": [],
        }
    )
    assert [r["verdict"] for r in result["a"]] == ["pass"]
    assert [(r["subject"], r["expected"], r["measured"]) for r in result["b"]] == [
        ("mlx5_1", "28.39.1002", "28.37.1014")
    ]
    assert result["c"][0]["verdict"] == "skip"
    blank = v.firmware_checks({"d": [hca("mlx5_0", ""), hca("mlx5_1", "28.39.1002")]})["d"]
    assert [(r["subject"], r["verdict"]) for r in blank] == [("mlx5_0", "warn"), ("all HCAs", "pass")]


def test_largest_size_gates_not_the_average():
    result = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_h100_a3mega_2node_16rank_wrong_root_format_no_final_hash.txt")
    )
    passed = v.nccl_check("nccl_pair", "a+b", result, {"floor": 330.0, "reason": "r"})
    assert passed["verdict"] == "pass" and passed["measured"] == "338.82 GB/s"  # Avg line says 70.742
    below = v.nccl_check("nccl_pair", "a+b", result, {"floor": 340.0, "reason": "r"})
    assert below["verdict"] == "fail"
    baseline = v.nccl_check("nccl_pair", "a+b", result, {"floor": 100.0}, baseline=360.0)
    assert baseline["verdict"] == "fail" and "0.95 of this node's baseline 360.0" in baseline["reason"]


def test_wrong_values_fail_regardless_of_bandwidth():
    text = fixture("nccl_tests", "all_reduce_v100_sxm2_16gb_1node_8gpu_single_thread_g8_1g_only.txt")
    result = nccl_tests.parse_nccl_tests(text.replace("135.50      0", "135.50      3"))
    check = v.nccl_check("nccl_node", "n", result, {"floor": 100.0, "reason": "r"})
    assert check["verdict"] == "fail" and "wrong values" in check["reason"]


def test_xids_from_real_kernel_log_lines():
    log = (
        "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
        "[ 1240.0] NVRM: Xid (PCI:0000:86:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0)\n"
        "[    0.7] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n"
    )
    xids = v.parse_xids(log)
    assert [(x["xid"], x["pci"]) for x in xids] == [(79, "0000:3b:00"), (13, "0000:86:00")]
    records = v.check_xids(xids, [{"index": 0, "pci_bus_id": "00000000:3B:00.0"}])
    assert [(r["subject"], r["verdict"]) for r in records] == [("GPU0", "fail"), ("0000:86:00", "warn")]
    # The device capture's real boot log has NVRM lines and no Xid.
    assert v.parse_xids("[    0.747581] NVRM: loading NVIDIA UNIX Open Kernel Module") == []


def test_pcie_downshift_at_idle_is_a_warning_not_a_failure():
    base = {"index": 0, "pcie": {"max_gen": 5, "current_gen": 1, "max_width": 16, "current_width": 16}}
    assert v.check_pcie([dict(base, performance_state="P8")])[0]["verdict"] == "warn"
    assert v.check_pcie([dict(base, performance_state="P0")])[0]["verdict"] == "fail"
    narrow = dict(
        base, performance_state="P8", pcie={"max_gen": 5, "current_gen": 5, "max_width": 16, "current_width": 8}
    )
    assert v.check_pcie([narrow])[0]["verdict"] == "fail"


def test_drain_reason_lists_the_failed_checks_and_is_bounded():
    records = [
        v.record("nvlink", "GPU3", 1, 0, "fail"),
        v.record("pcie", "GPU5", 1, 0, "fail"),
        v.record("ecc", "all GPUs", 1, 1, "pass"),
    ]
    assert v.drain_reason(records) == "gpuops-validate: nvlink GPU3, pcie GPU5"
    many = [v.record("nvlink", f"GPU{i}", 1, 0, "fail") for i in range(100)]
    assert len(v.drain_reason(many)) == 200


def test_sinfo_reasons_only_for_drained_nodes():
    text = "n1|drain|gpuops-validate: nvlink GPU3\nn2|idle|none\nn3|drng|maintenance\nn4|mix|none\n"
    assert v.parse_sinfo_reasons(text) == {"n1": "gpuops-validate: nvlink GPU3", "n3": "maintenance"}


@pytest.fixture
def controller(monkeypatch):
    return Node(monkeypatch, {}, {})


def _report_args(tmp_path, **extra):
    facts = facts_with_topology("dgx-h100")
    healthy = [
        v.record("nvlink", "all GPUs", "18 links", "all active", "pass", "r"),
        v.record("pcie", "all GPUs", "Gen5 x16", "Gen5 x16", "pass", "r"),
    ]
    broken = [v.record("pcie", "GPU5", "Gen5 x16", "Gen3 x8", "fail", "<script>alert(1)</script>")]
    run = {
        "record": dict(v.record("nccl_node", "n1", ">= 435.4", "472.3 GB/s", "pass", "r"), floor=435.4),
        "series": [{"size": 1 << k, "busbw": 400.0 * (1 << k) / ((1 << k) + (1 << 26))} for k in range(3, 34, 2)],
        "busbw": 472.3,
    }
    nodes = {
        "n1": {
            "checks": healthy,
            "hcas": [],
            "compute_ports": [],
            "nvidia_gpu": facts,
            "nccl": [run],
            "drained": "gpuops-validate: pcie GPU5",
        },
        "n2": {"checks": broken, "hcas": [], "compute_ports": [], "nvidia_gpu": facts, "nccl": []},
    }
    return {"nodes": nodes, "dest": str(tmp_path / "report"), **extra}


def test_report_decides_drain_and_resume_and_writes_a_self_contained_page(controller, tmp_path):
    result = run_module(validation_report.main, _report_args(tmp_path)).result
    assert result["verdict"] == "fail" and result["drain"] == {"n2": "gpuops-validate: pcie GPU5"}
    assert result["resume"] == ["n1"] and not result["changed"]
    assert result["findings"] == ["n2: pcie GPU5: expected Gen5 x16, measured Gen3 x8 (<script>alert(1)</script>)"]
    assert result["findings_by_host"] == {"n2": result["findings"]}
    html = (tmp_path / "report" / "validation.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html  # autoescaped
    assert html.count("<svg") == 3  # n1's plot, n1's and n2's topology pictures
    assert "NVSw" in html and "_11" in html and "NUMA1" in html and "GPU7" in html
    data = json.loads((tmp_path / "report" / "validation.json").read_text())
    assert data["nodes"]["n2"]["verdict"] == "fail" and "nccl_svg" not in data["nodes"]["n1"]


def test_a_limited_run_adds_to_the_report_with_each_node_s_date_and_records_its_verdicts(controller, tmp_path):
    """A --limit run: the nodes it did not validate come from the fleet state's validation section,
    listed with their date and neither drained nor resumed; this run's nodes are returned as the
    records the fleet state keeps (fail, or pass for a node without a failed check)."""
    earlier = {
        "n3": {"verdict": "pass", "result": "pass", "date": "2026-11-20T08:00:00Z", "findings": []},
        "n4": {"verdict": "fail", "result": "fail", "date": "2026-11-21T09:30:00Z", "findings": ["n4: xid GPU2"]},
        # A node of this run is judged now, never taken from the state.
        "n2": {"verdict": "pass", "result": "pass", "date": "2026-11-01T00:00:00Z", "findings": []},
    }
    result = run_module(validation_report.main, _report_args(tmp_path, earlier=earlier)).result
    assert result["drain"] == {"n2": "gpuops-validate: pcie GPU5"} and result["resume"] == ["n1"]
    assert sorted(result["records"]) == ["n1", "n2"]
    assert result["records"]["n2"]["verdict"] == "fail" and result["records"]["n1"]["verdict"] == "pass"
    assert result["records"]["n2"]["findings"] == result["findings"]
    # What a later --limit run needs to pair a node with n1: its fabric, ports, GPU count, Slurm name.
    assert {k: result["records"]["n1"][k] for k in ("fabric", "compute_ports", "gpus", "name")} == {
        "fabric": None,
        "compute_ports": [],
        "gpus": 8,
        "name": "n1",
    }
    data = json.loads((tmp_path / "report" / "validation.json").read_text())
    assert sorted(data["nodes"]) == ["n1", "n2", "n3", "n4"] and data["earlier"] == 2
    assert data["nodes"]["n4"]["date"] == "2026-11-21T09:30:00Z" and data["nodes"]["n4"]["verdict"] == "fail"
    assert data["nodes"]["n2"]["verdict"] == "fail" and not data["nodes"]["n2"].get("earlier")
    html = (tmp_path / "report" / "validation.html").read_text()
    assert "2 of them from earlier runs" in html and "n4: xid GPU2" in html


def test_report_in_report_mode_drains_nothing_and_check_mode_writes_nothing(controller, tmp_path):
    result = run_module(validation_report.main, _report_args(tmp_path, mode="report")).result
    assert result["drain"] == {} and result["resume"] == []
    run_module(validation_report.main, _report_args(tmp_path / "check"), check_mode=True)
    assert not (tmp_path / "check").exists()


def test_report_without_the_plot_libraries_keeps_every_table(controller, tmp_path, monkeypatch):
    monkeypatch.setattr(r, "missing_libraries", lambda: ["matplotlib", "networkx"])
    result = run_module(validation_report.main, _report_args(tmp_path)).result
    html = (tmp_path / "report" / "validation.html").read_text()
    assert "<svg" not in html and "pip install matplotlib networkx" in html and "Gen3 x8" in html
    assert result["warnings_text"]


def test_baseline_record_writes_each_node_s_bus_bandwidth(controller, tmp_path):
    run_module(
        validation_report.main, _report_args(tmp_path, baseline_record=True, baseline_dir=str(tmp_path / "baseline"))
    )
    assert json.loads((tmp_path / "baseline" / "n1.json").read_text())["nccl_node_busbw_gbps"] == 472.3
    assert not (tmp_path / "baseline" / "n2.json").exists()


def test_topology_graph_of_a_dgx1_has_direct_nvlinks_and_numa_edges():
    nodes, edges = r.topology_graph(facts_with_topology("dgx1-v100"))
    kinds = {edge[2] for edge in edges}
    assert {"NVLink", "NUMA", "PCIe switch"} <= kinds
    assert not any(n["kind"] == "NVSwitch" for n in nodes)
    assert ("GPU0", "GPU1", "NVLink", "NV1") in edges and ("GPU0", "GPU3", "NVLink", "NV2") in edges


def test_a_failed_run_across_nodes_is_listed_on_both_nodes_and_drains_neither(controller, tmp_path):
    pair = {
        "record": dict(v.record("nccl_pair", "n1+n2", ">= 338.4", "120.0 GB/s", "fail", "r"), floor=338.4),
        "series": [],
        "item": {"hosts": ["n1", "n2"]},
    }
    args = _report_args(tmp_path, cluster_nccl=[pair])
    args["nodes"]["n2"]["checks"] = []
    result = run_module(validation_report.main, args).result
    assert result["drain"] == {} and result["verdict"] == "fail"
    # n1, drained by validation (burn-in, or an earlier failure), passed its own checks but not the
    # pair: it stays drained, and the fleet state records it failed.
    assert result["resume"] == [] and result["records"]["n1"]["verdict"] == "fail"
    assert set(result["findings_by_host"]) == {"n1", "n2"}
    assert result["findings_by_host"]["n1"][0].startswith("cluster: nccl_pair n1+n2")


def _v100_pcie():
    return fixture("nccl_tests", "all_reduce_v100_pcie_4gpu_nccl_2_4_rank_lines_without_group_g4.txt")


def test_a_cut_off_run_fails_not_the_last_row_printed():
    """Killed after 64 MB: no closing lines; its last row would pass a 10 GB/s floor."""
    text = _v100_pcie()
    cut = text[: text.index("   134217728      33554432")]
    check = v.nccl_check("nccl_node", "n", nccl_tests.parse_nccl_tests(cut), {"floor": 10.0, "reason": "r"})
    assert check["verdict"] == "fail" and "stopped at 67108864 B" in check["reason"] and "missing" in check["reason"]
    whole = v.nccl_check("nccl_node", "n", nccl_tests.parse_nccl_tests(text), {"floor": 10.0, "reason": "r"}, ranks=4)
    assert whole["verdict"] == "pass"


def test_a_table_short_of_its_max_bytes_fails():
    """Edit: the banner says -e 256M, the table ends at 128M with its closing lines."""
    edited = _v100_pcie().replace("maxBytes 134217728", "maxBytes 268435456")
    check = v.nccl_check("nccl_node", "n", nccl_tests.parse_nccl_tests(edited), {"floor": 10.0, "reason": "r"})
    assert check["verdict"] == "fail" and "maxBytes 268435456" in check["reason"]


def test_other_ranks_than_asked_fail():
    result = nccl_tests.parse_nccl_tests(_v100_pcie())
    check = v.nccl_check("nccl_pair", "a+b", result, {"floor": 10.0, "reason": "r"}, ranks=8)
    assert check["verdict"] == "fail" and "4 ranks ran where 8 were asked for" in check["reason"]


def _diag(edit=lambda text: text):
    text = fixture("dcgmi_diag", "r2_verbose_dcgm3_3_9_v100_pcie_1gpu_wrapped_info_rows.txt")
    return dcgm.parse_dcgmi_diag(edit(text))


def test_dcgm_warn_is_a_warning_with_dcgms_text_not_a_pass():
    """Edit of the real level-2 capture: GPU Memory warns, with a Warning row."""
    result = _diag(
        lambda t: t.replace("| GPU Memory                | Pass - All  ", "| GPU Memory                | Warn - All  ")
    )
    records = v.check_dcgm(result, 2)
    (warned,) = [r for r in records if r["verdict"] == "warn"]
    assert warned["subject"] == "GPU Memory" and "Allocated 16435239282 bytes" in warned["reason"]
    assert records[-1]["verdict"] == "pass" and records[-1]["measured"] == "10 passed"


def test_dcgm_with_every_test_skipped_is_a_skip_not_a_pass():
    result = _diag(lambda t: t.replace("| Pass  ", "| Skip  ").replace("| Pass - All  ", "| Skip - All  "))
    assert {t["result"] for t in result["tests"]} == {"Skip"}
    (record,) = v.check_dcgm(result, 2)
    assert record["verdict"] == "skip" and record["reason"].startswith("no test passed; skipped: Denylist")


@pytest.mark.parametrize(
    "xid, line, verdict",
    [
        # NVIDIA's Xid catalog, immediate action: RESET_GPU, RESTART_BM, workflows -> fail
        (46, "NVRM: Xid (PCI:0000:3b:00): 46, pid=1, GPU stopped processing", "fail"),
        (95, "NVRM: Xid (PCI:0000:3b:00): 95, pid=1, Uncontained: FBHUB", "fail"),
        (74, "NVRM: Xid (PCI:0000:3b:00): 74, pid=1, NVLink: fatal error detected on link 3", "fail"),
        # RESTART_APP or IGNORE -> warn (the Azure list failed 63, 68, 69, 80 and 92)
        (63, "NVRM: Xid (PCI:0000:3b:00): 63, pid=1, Row Remapper: New row marked for remapping", "warn"),
        (92, "NVRM: Xid (PCI:0000:3b:00): 92, pid=1, High single-bit ECC error rate", "warn"),
        (94, "NVRM: Xid (PCI:0000:3b:00): 94, pid=1, Contained: SM (0x1)", "warn"),
        (43, "NVRM: Xid (PCI:0000:3b:00): 43, pid=1, Ch 00000008", "warn"),
        # Xid 154 says the recovery the others need
        (
            154,
            "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) "
            "to 0x2 (Node Reboot Required)",
            "fail",
        ),
        (
            154,
            "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x2 (Node Reboot Required) "
            "to 0x0 (None)",
            "warn",
        ),
    ],
)
def test_xid_verdicts_follow_the_catalogs_immediate_action(xid, line, verdict):
    (found,) = v.parse_xids("[  12.5] " + line)
    assert found["xid"] == xid
    (checked,) = v.check_xids([found], [])
    assert checked["verdict"] == verdict


def test_a_wrapped_warning_keeps_its_words_at_the_wrap():
    """Edit of the real level-2 capture: a Warning whose text dcgmi cut at the cell's width (45
    characters), once just after a space and once mid-word, as it cuts Info rows; the pieces join
    back into the words ("Make it", "running")."""
    text = (
        "Persistence mode for GPU 0 is disabled. Make it persistent: enable persistence mode by "
        'running "nvidia-smi -i <gpuId> -pm 1" as root.'
    )
    pieces = [text[i : i + 45] for i in range(0, len(text), 45)]
    rows = ["| GPU Memory                | Warn - All" + " " * 37 + "|"]
    for number, piece in enumerate(pieces):
        label = "Warning" if number == 0 else ""
        rows.append(f"| {label:<26}| {piece:<45}  |")
    original = "| GPU Memory                | Pass - All" + " " * 37 + "|"
    result = _diag(lambda t: t.replace(original + "\n", "\n".join(rows) + "\n"))
    (memory,) = [t for t in result["tests"] if t["name"] == "GPU Memory"]
    assert memory["result"] == "Warn"
    assert text in memory["info"]


@pytest.mark.parametrize(
    ("ib_ports", "resumed"),
    [
        ([v.record("ib_ports", "8 InfiniBand port(s)", "Active", "all Active", "pass", "ibstat")], True),
        # ibstat gone: "no compute fabric port" is a skip, which proves nothing about mlx5_4.
        ([v.record("ib_ports", "node", None, None, "skip", "no compute fabric port on this node")], False),
        ([], False),  # not run at all
    ],
)
def test_a_node_drained_for_a_check_is_resumed_only_when_that_check_passes(controller, tmp_path, ib_ports, resumed):
    args = _report_args(tmp_path)
    args["nodes"]["n1"]["drained"] = "gpuops-validate: ib_ports mlx5_4:1, pcie GPU5"
    args["nodes"]["n1"]["checks"] = args["nodes"]["n1"]["checks"] + ib_ports
    result = run_module(validation_report.main, args).result
    assert (result["resume"] == ["n1"]) is resumed
    if not resumed:
        actions = json.loads((tmp_path / "report" / "validation.json").read_text())["actions"]
        assert actions["n1"].startswith("stays drained: n1: ib_ports was failing when drained, and is ")
        assert result["records"]["n1"]["verdict"] == "fail"


def test_a_gpu_with_every_nvlink_inactive_fails_nvlink():
    status = nvidia_smi.parse_nvlink_status(
        fixture("nvlink", "b200_gpu2_all_links_inactive_nvml_message_uuid_redacted.txt")
    )
    expectation = {"kind": "nvswitch", "links": {"GPU2": 18}, "gbps": 50.0, "reason": "r"}
    (check,) = v.check_nvlink(expectation, status, [{"index": 2}])
    assert check["verdict"] == "fail" and check["measured"].startswith("all links inactive")


def test_a_host_name_with_dollar_signs_is_drawn_as_text_not_mathtext(controller, tmp_path):
    """matplotlib read "$...$" in a title as mathtext: a host named gpu$a^$ ended the report in a ValueError."""
    pytest.importorskip("matplotlib")
    args = _report_args(tmp_path)
    args["nodes"] = {"gpu$a^$": args["nodes"]["n1"]}
    result = run_module(validation_report.main, args)
    assert not result.failed, result.result
    assert "gpu$a^$: all_reduce bus bandwidth" in (tmp_path / "report" / "validation.html").read_text()


# ---------------------------------------------------------------------------------------------
# NVLink fabric registration (nvidia-smi -q -x <fabric>)


def _fabric_gpu(index, state, status, summary=None):
    """One GPU of a fabric: the <fabric> block as nvidia-smi 580 prints it, parsed by the real parser."""
    health = f"<health><summary>{summary}</summary></health>" if summary else ""
    text = (
        f'<?xml version="1.0" ?><nvidia_smi_log><gpu id="00000000:1{index}:00.0"><product_name>NVIDIA H100 80GB HBM3'
        f"</product_name><fabric><state>{state}</state><status>{status}</status>{health}</fabric></gpu></nvidia_smi_log>"
    )
    gpu = nvidia_smi.parse_query_xml(text)["gpus"][0]
    return {**gpu, "index": index}


@pytest.mark.parametrize(
    "capture",
    ["h200_141gb_vm_1gpu_driver580_159_04_open_device_capture.xml", "a100_sxm4_80gb_mig_4x1g20gb_v12.xml"],
)
def test_gpus_that_report_no_fabric_registration_skip_with_the_reason(capture):
    gpus = nvidia_smi.parse_query_xml(fixture("smi_xml", capture))["gpus"]
    assert gpus and all(g["fabric"]["state"] is None for g in gpus)  # N/A on both captures
    (only,) = v.check_fabric(gpus, nvswitch_count=0)
    assert only["verdict"] == "skip" and "no GPU reports" in only["reason"]


def test_a_registered_fabric_passes_and_each_unfinished_or_failed_gpu_fails_with_its_state():
    assert [r["verdict"] for r in v.check_fabric([_fabric_gpu(i, "Completed", "Success") for i in range(4)], 4)] == [
        "pass"
    ]
    gpus = [
        _fabric_gpu(0, "Completed", "Success"),
        _fabric_gpu(1, "In Progress", "N/A"),  # NVIDIA/gpu-operator#2511: Status N/A while In Progress
        _fabric_gpu(2, "Completed", "Insufficient Resources"),  # Azure/azhpc-images#506
        _fabric_gpu(3, "Not Started", "N/A"),
        _fabric_gpu(4, "Not Supported", "Success"),  # a GPU without such a fabric (leptonai/gpud#1108)
    ]
    found = {r["subject"]: (r["verdict"], r["measured"]) for r in v.check_fabric(gpus, 4)}
    assert found == {
        "GPU1": ("fail", "In Progress"),
        "GPU2": ("fail", "Completed, Insufficient Resources"),
        "GPU3": ("fail", "Not Started"),
    }


def test_an_unhealthy_fabric_summary_warns_without_failing():
    # kubernetes-sigs/dra-driver-nvidia-gpu#626: Completed, Success, Summary Unhealthy.
    records = v.check_fabric([_fabric_gpu(0, "Completed", "Success", "Unhealthy")], 0)
    assert [(r["subject"], r["verdict"]) for r in records] == [("all GPUs", "pass"), ("GPU0", "warn")]


@pytest.mark.parametrize(
    ("recorded", "resumed"),
    [
        # The fleet state kept the full set: ib_ports, cut from the reason, skips now, which proves nothing.
        ({"n1": {"failed_checks": ["nvlink", "pcie", "ib_ports"]}}, False),
        # No record of the full set and a reason that was cut: every check of this run must pass.
        ({}, False),
        ({"n1": {"failed_checks": ["nvlink", "pcie"]}}, True),
    ],
)
def test_checks_cut_from_validation_s_drain_reason_must_pass_before_the_node_resumes(
    controller, tmp_path, recorded, resumed
):
    args = _report_args(tmp_path, recorded=recorded)
    args["nodes"]["n1"]["drained"] = (
        "gpuops-validate: nvlink GPU0, " + ", ".join(f"pcie GPU{n}" for n in range(30))[:150] + "..."
    )
    skipped = v.record("ib_ports", "node", None, None, "skip", "no compute fabric port on this node")
    args["nodes"]["n1"]["checks"] = args["nodes"]["n1"]["checks"] + [skipped]
    result = run_module(validation_report.main, args).result
    assert (result["resume"] == ["n1"]) is resumed
    if not resumed:
        assert "ib_ports" in result["records"]["n1"]["failed_checks"]


def test_the_fleet_state_keeps_the_full_set_of_failed_checks(controller, tmp_path):
    result = run_module(validation_report.main, _report_args(tmp_path)).result
    assert result["records"]["n2"]["failed_checks"] == ["pcie"]
    fleet.check_section("validation", result["records"]["n2"], "n2", None)
    with pytest.raises(fleet.FleetError, match="failed_checks is not a list of check names"):
        fleet.check_section("validation", dict(result["records"]["n2"], failed_checks="pcie"), "n2", "x.json")


def test_the_gate_s_drains_count_against_the_blast_radius_budget(controller, tmp_path):
    """Twelve nodes, two out by automation already (one of them drained by gpuops-health): with 30 %,
    one more may go. n2 fails and is drained; with n1 failing too, only the first in order is."""
    fleet = "".join(f"gpu{n}|idle|none\n" for n in range(8)) + "n1|idle|none\nn2|idle|none\n"
    sinfo = fleet + "gpu8|drain|gpuops-health: xid GPU1\ngpu9|down*|gpuops-validate: nvlink\n"
    args = _report_args(tmp_path, sinfo=sinfo, budget_nodes=8, budget_percent=30)
    result = run_module(validation_report.main, args).result
    assert result["drain"] == {"n2": "gpuops-validate: pcie GPU5"} and result["budget_refused"] == []
    args = _report_args(tmp_path, sinfo=sinfo, budget_nodes=8, budget_percent=30)
    args["nodes"]["n1"]["checks"] = args["nodes"]["n2"]["checks"]
    args["nodes"]["n1"]["drained"] = ""
    result = run_module(validation_report.main, args).result
    assert list(result["drain"]) == ["n1"] and result["budget_refused"] == ["n2"]
    actions = json.loads((tmp_path / "report" / "validation.json").read_text())["actions"]
    assert actions["n2"].startswith("not drained: the blast-radius budget is spent: 3 nodes of 12")
    # Its findings still fail it.
    assert result["findings_by_host"]["n2"]
    bad = run_module(validation_report.main, _report_args(tmp_path, sinfo=sinfo, budget_nodes=0))
    assert bad.failed and "budget_nodes is 0" in bad.result["msg"]
    bad = run_module(validation_report.main, _report_args(tmp_path, sinfo=sinfo, budget_window=0))
    assert (
        bad.failed
        and "budget_window is 0" in bad.result["msg"]
        and "validate_health_budget_window" in bad.result["msg"]
    )


def test_the_gate_stamps_its_take_outs_and_latches_the_budget_it_spends(controller, tmp_path):
    """With the nodes' Comments given: the drain carries its take-out's Comment, the refused node the
    latch; a node taken out within the window counts though back in service; a latch refuses every
    drain; a person's comment is never replaced."""
    sinfo = "".join(f"gpu{n}|idle|none\n" for n in range(8)) + "n1|idle|none\nn2|idle|none\n"
    args = _report_args(tmp_path, sinfo=sinfo, comments="n2|(null)\ngpu1|(null)\n", budget_nodes=1)
    result = run_module(validation_report.main, args).result
    assert result["drain"] == {"n2": "gpuops-validate: pcie GPU5"}
    assert result["comments"]["n2"].startswith("gpuops: taken out ")
    recent = ns.budget_comment("taken", time.time() - 60)
    args = _report_args(tmp_path, sinfo=sinfo, comments=f"gpu1|{recent}\nn2|(null)\n", budget_nodes=1)
    result = run_module(validation_report.main, args).result
    assert result["drain"] == {} and result["budget_refused"] == ["n2"]
    assert (
        result["comments"]["n2"].startswith("gpuops: budget spent ")
        and "n2 refused, 1 of 1 out" in result["comments"]["n2"]
    )
    latched = "gpu3|gpuops: budget spent 2026-12-01T00:00:00Z (gpu3 refused, 1 of 1 out)\nn2|RMA open\n"
    args = _report_args(tmp_path, sinfo=sinfo, comments=latched, budget_nodes=8)
    result = run_module(validation_report.main, args).result
    assert result["budget_refused"] == ["n2"] and result["comments"] == {}  # a person's comment stays
    actions = json.loads((tmp_path / "report" / "validation.json").read_text())["actions"]
    assert actions["n2"].startswith("not drained: the blast-radius budget is latched (gpu3: gpuops: budget spent")


def test_the_report_s_repair_section_reads_each_node_s_health_state(controller, tmp_path):
    owing = ns.advance(
        ns.new_state("b1"), [], [ns.fault("inspect", "node", "3 faults")], boot_id="b1", now=1_764_300_000
    )
    owing["history"].append({"t": 1_764_300_010.0, "event": "drain", "detail": "gpuops-health: inspect node"})
    healed = ns.new_state("b1")
    healed["history"] = [
        {"t": 100.0, "event": "fault", "detail": "reset GPU1: Xid 48"},
        {"t": 101.0, "event": "drain", "detail": "x"},
        {"t": 640.0, "event": "resume", "detail": "x"},
    ]
    args = _report_args(tmp_path, sinfo="n1|drain|gpuops-health: inspect node\nn2|idle|none\n")
    args["nodes"]["n1"]["health_state"] = health.dump_state(owing, {})
    args["nodes"]["n2"]["health_state"] = health.dump_state(healed, {})
    repair = run_module(validation_report.main, args).result["repair"]
    assert repair["nodes"]["n1"] == {
        "outstanding": ["inspect node"],
        "quarantined": True,
        "drained_since": "2025-11-28 03:20:10 UTC",
        "last_repair_s": None,
        "last_repair_class": None,
        "evidence": None,
    }
    assert repair["nodes"]["n2"]["last_repair_s"] == 540 and repair["median_repair_s"] == 540
    # MTTR per class of fault: n2's owed a GPU reset.
    assert repair["nodes"]["n2"]["last_repair_class"] == "reset" and repair["median_repair_s_by_class"] == {
        "reset": 540
    }
    assert repair["quarantined"] == ["n1"] and repair["budget"] == {"fleet": 2, "out": ["n1"], "limit": 1}
    page = (tmp_path / "report" / "validation.html").read_text()
    assert "Repair (gpuops-health)" in page and "In quarantine: n1." in page
    assert "540 s (reset 540 s)." in page and "540 s (reset)" in page


def test_a_gpu_s_faults_follow_its_serial_to_another_node_and_quarantine_it_there(controller, tmp_path):
    """Serial S faulted twice in n9 (the fleet state's record; n9 is not in this run), then was moved
    into n2 as its GPU1 and faulted there once: three faults within the week fail n2's gpu_history
    GPU1 and drain it in gate mode; n1, whose GPUs have no such history, passes the check."""
    args = _report_args(tmp_path)
    # Two nodes of one profile: n1's boards get serials of their own.
    facts = args["nodes"]["n1"]["nvidia_gpu"]
    args["nodes"]["n1"]["nvidia_gpu"] = dict(
        facts, gpus=[dict(g, serial=f"17{n:011d}") for n, g in enumerate(facts["gpus"])]
    )
    gpus = args["nodes"]["n2"]["nvidia_gpu"]["gpus"] = [dict(g) for g in facts["gpus"]]
    serial = gpus[1]["serial"]
    assert ns.known_serial(serial)
    now = time.time()
    earlier = [{"serial": serial, "t": now - 3 * 86400 + n, "detail": f"reset GPU{n + 4}: Xid 48"} for n in range(2)]
    earlier.append({"serial": serial, "t": now - 30 * 86400, "detail": "outside the window"})
    args["earlier"] = {"n9": {"verdict": "pass", "date": "2026-12-01", "gpu_faults": earlier}}
    state = ns.advance(
        ns.new_state("b1"), [], health.with_serials([ns.fault("reset", "GPU1", "Xid 48")], gpus),
        boot_id="b1", now=now - 60,
    )  # fmt: skip
    assert state["history"][-1]["serial"] == serial
    args["nodes"]["n2"]["health_state"] = health.dump_state(state, {})
    args["nodes"]["n2"]["checks"] = []
    result = run_module(validation_report.main, dict(args, mode="gate")).result
    assert result["drain"] == {"n2": "gpuops-validate: gpu_history GPU1"}
    n2 = {(c["check"], c["subject"]): c for c in json.loads((tmp_path / "report" / "validation.json").read_text())[
        "nodes"]["n2"]["checks"]}  # fmt: skip
    assert n2[("gpu_history", "GPU1")]["measured"] == f"3 faults of serial {serial}"
    assert "n9 " in n2[("gpu_history", "GPU1")]["reason"] and "n2 " in n2[("gpu_history", "GPU1")]["reason"]
    assert result["records"]["n2"]["gpu_faults"] == [
        {"serial": serial, "t": round(now - 60, 3), "detail": "reset GPU1: Xid 48"}
    ]
    fleet.check_section("validation", result["records"]["n2"], "n2", None)
    checks_n1 = json.loads((tmp_path / "report" / "validation.json").read_text())["nodes"]["n1"]["checks"]
    assert [c["verdict"] for c in checks_n1 if c["check"] == "gpu_history"] == ["pass"]
    # Off: no such check.
    result = run_module(validation_report.main, dict(args, mode="gate", quarantine_faults=0)).result
    assert "n2" not in result["drain"]
    # Another GPU in that slot (a new serial): passes.
    gpus[1] = dict(gpus[1], serial="1999999999999")
    result = run_module(validation_report.main, dict(args, mode="gate")).result
    assert "n2" not in result["drain"]
    with pytest.raises(fleet.FleetError, match="gpu_faults is not a list of GPU faults"):
        fleet.check_section("validation", dict(result["records"]["n2"], gpu_faults=[{"serial": 7}]), "n2", "x.json")
