# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation across an NVLink domain's trays: the NCCL run over multi-node NVLink and its floor
from NVLink 5, DCGM's multi-node diagnostic (its JSON as dcgmi's MnDiag.cpp writes it, DCGM 4.6),
and what the report drains for each."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import dcgm, nccl_tests
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.modules import mndiag_run, validation_report
from conftest import fixture
from module_harness import Node, run_module
from test_validation import _report_args, facts_with_topology

DOMAIN = {"cluster_uuid": "5d1c0a9e-7f3b-4c2d-9e8f-1a2b3c4d5e6f", "clique_id": 32766, "gpus": [0, 1, 2, 3]}


def tray_facts():
    facts = facts_with_topology("gb200-tray")
    return dict(facts, nvlink_domain=dict(DOMAIN, problem=None))


def test_a_gb200_tray_is_behind_switches_the_host_does_not_see():
    """topo -m prints NV18 to each of a tray's three peers (18 links, shared): not 54 direct links.
    The sum of the cells made the single-tray floor 2,296 GB/s, which no tray reaches."""
    facts = facts_with_topology("gb200-tray")
    assert facts["nvswitch_count"] == 0
    expectation = v.nvlink_expectation(facts)
    assert expectation["kind"] == "nvls" and set(expectation["links"].values()) == {18}
    node = v.nccl_node_expectation(facts, facts["gpus"])
    assert (node["expected"], node["floor"]) == (831.9, 765.3)
    assert "NVLink switches outside the node" in expectation["reason"]
    # A DGX-1's hybrid cube mesh stays direct: its cells add up to at most its links.
    assert v.nvlink_expectation(facts_with_topology("dgx1-v100"))["kind"] == "direct"


def test_the_rack_wide_floor_comes_from_nvlink_5_and_a_published_nvl72_run_passes_it():
    expectation = v.nccl_mnnvl_expectation(tray_facts())
    assert (expectation["expected"], expectation["floor"]) == (831.9, 765.3)
    assert "18 NVLink 5 links x 53.125 GB/s x 0.87" in expectation["reason"]
    # 72 x GB200 across a whole rack (coreweave/nccl-tests#43): 846.82 GB/s at 8 GiB.
    run = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_gb200_nvl72_18tray_72rank_mnnvl_coreweave_tail.txt")
    )
    record = v.nccl_check("nccl_mnnvl", "rack", run, expectation)
    assert (record["verdict"], record["measured"]) == ("pass", "846.82 GB/s")
    # The same rack measuring like its NICs (MNNVL not used) fails it.
    slow = v.nccl_check("nccl_mnnvl", "rack", run, {"floor": 900.0, "reason": "r"})
    assert slow["verdict"] == "fail"
    assert v.nccl_mnnvl_expectation(facts_with_topology("dgx-h100"))["floor"] is None
    assert v.nccl_mnnvl_expectation(tray_facts(), {"nccl_mnnvl_busbw_gbps": 800})["floor"] == 736.0
    assert v.threshold_problems({"nccl_mnnvl_busbw_gbps": "800"})


def _tray(domain="rack", problem=None, mndiag=None, **extra):
    domain = DOMAIN if domain == "rack" else domain
    return {
        "checks": [],
        "fabric": "InfiniBand",
        "compute_ports": [{"name": "mlx5_0", "state": "Active", "rate": 400, "ca_type": "MT4129"}],
        "gpus": [{}] * 4,
        "nvlink_domain": dict(domain, problem=problem) if domain else None,
        "nccl_mnnvl_expected": v.nccl_mnnvl_expectation(tray_facts()),
        "mndiag": mndiag,
        **extra,
    }


def test_the_trays_of_a_domain_run_over_nvlink_and_their_pair_over_the_nics():
    plan = v.multi_node_plan({"t1": _tray(), "t2": _tray(), "x": _tray(domain=None)})
    runs = {run["check"]: run for run in plan["runs"]}
    assert runs["nccl_mnnvl"]["hosts"] == ["t1", "t2"]
    assert runs["nccl_mnnvl"]["environment"] == {"NCCL_MNNVL_ENABLE": "1"}
    assert runs["nccl_mnnvl"]["expectation"]["floor"] == 765.3 and runs["nccl_mnnvl"]["gpus_per_node"] == 4
    # Over the NICs, NCCL must not take the trays' NVLink: MNNVL off, ring.
    assert runs["nccl_pair"]["environment"] == {"NCCL_ALGO": "Ring", "NCCL_MNNVL_ENABLE": "0"}
    assert plan["mndiag"] == [{"check": "mndiag", "subject": runs["nccl_mnnvl"]["subject"], "hosts": ["t1", "t2"]}]
    assert runs["nccl_mnnvl"]["subject"] == f"2 trays of NVLink domain {DOMAIN['cluster_uuid']} clique 32766"


def test_a_tray_out_of_step_or_alone_or_without_the_diagnostic_is_said_so():
    other = dict(DOMAIN, clique_id=7)
    plan = v.multi_node_plan(
        {
            "t1": _tray(),
            "t2": _tray(problem="not every GPU is registered: GPU3 is in clique 7"),
            "t3": _tray(domain=other, mndiag="DCGM 4.2.3 has no multi-node diagnostic"),
        }
    )
    assert [run["check"] for run in plan["runs"]] == ["nccl_pair", "nccl_pair", "nccl_all"]
    skipped = {(s["check"], s["subject"]): s["reason"] for s in plan["skipped"]}
    assert skipped[("nccl_mnnvl", "t2")].startswith("not every GPU is registered")
    assert "the only tray of NVLink domain" in skipped[("nccl_mnnvl", "t1")]
    assert "clique 7" in skipped[("nccl_mnnvl", "t3")] and plan["mndiag"] == []
    old = v.multi_node_plan({"t1": _tray(mndiag="DCGM 4.2.3 has no multi-node diagnostic"), "t2": _tray()})
    assert old["mndiag"] == [] and [s["reason"] for s in old["skipped"]] == ["DCGM 4.2.3 has no multi-node diagnostic"]


@pytest.mark.parametrize(
    ("device", "version", "runs"),
    [
        ("2941", "4.4.1", True),
        ("0x2941", "1:4.3.0-1", True),
        ("2941", "4.2.3", False),
        ("31c2", "4.3.1", False),
        ("31c2", "4.4.1", True),
        ("2330", "4.4.1", False),
        ("2941", None, False),
    ],
)
def test_dcgm_runs_its_multi_node_diagnostic_on_gb200_from_4_3_and_gb300_from_4_4(device, version, runs):
    facts = {"gpus": [{"pci_device_id": device}] * 4}
    assert (v.mndiag_support(facts, version) is None) is runs


def report(status="Pass", results=None, **extra):
    """A report in the shape dcgmi's MnDiag.cpp writes (DCGM 4.6.0)."""
    results = results if results is not None else [(h, g, "Pass") for h in (0, 1) for g in range(4)]
    document = {
        "name": "DCGM Multi-Node Diagnostic",
        "metadata": {"num_hosts": 2, "num_entities": len(results)},
        "hosts": [
            {
                "host_id": i,
                "hostname": f"rack-t{i + 1}",
                "dcgm_version": "4.4.1",
                "driver_version": "580.95.05",
                "num_entities": 4,
                "entities": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": g} for g in range(4)],
            }
            for i in (0, 1)
        ],
        "test_categories": [
            {
                "category": "Multi-Node Tests",
                "tests": [
                    {
                        "name": "MNUBERGEMM",
                        "status": status,
                        "test_summary": {"status": status},
                        "results": [
                            {
                                "host_id": h,
                                "entity_group": "GPU",
                                "entity_group_id": 1,
                                "entity_id": g,
                                "status": s,
                                **(
                                    {
                                        "warnings": [
                                            {
                                                "warning": "GPU reported an error",
                                                "error_id": 1,
                                                "error_category": 1,
                                                "error_severity": 2,
                                            }
                                        ]
                                    }
                                    if s == "Fail"
                                    else {}
                                ),
                            }
                            for h, g, s in results
                        ],
                    }
                ],
            }
        ],
        **extra,
    }
    return json.dumps(document, indent=3)


NAMES = {"rack-t1": "t1", "rack-t2": "t2"}


def test_the_fixtures_read_as_dcgmi_writes_them():
    passed = dcgm.parse_dcgmi_mndiag(fixture("dcgmi_mndiag", "gb200_2tray_pass.json"))
    assert passed["status"] == "Pass" and len(passed["results"]) == 8
    names = {"gb200-r07-t01": "t01", "gb200-r07-t02": "t02"}
    run, per_host = v.mndiag_checks(
        "rack 7", dcgm.parse_dcgmi_mndiag(fixture("dcgmi_mndiag", "gb200_2tray_gpu_fail.json")), names
    )
    assert run["reason"] == "GPUs failed on t02"
    assert [r["reason"] for r in per_host["t02"] if r["verdict"] == "fail"] == [
        "Detected error in mnubergemm on GPU 2: result mismatch"
    ]
    stopped = dcgm.parse_dcgmi_mndiag(fixture("dcgmi_mndiag", "gb200_2tray_runtime_error.json"))
    run, per_host = v.mndiag_checks("rack 7", stopped, names)
    assert run["verdict"] == "fail" and per_host == {}
    assert "(Host engine connection invalid/disconnected) -21" in run["reason"]


def test_a_passing_diagnostic_passes_every_gpu():
    parsed = dcgm.parse_dcgmi_mndiag(report())
    assert parsed["status"] == "Pass" and parsed["hosts"] == {0: "rack-t1", 1: "rack-t2"}
    run, per_host = v.mndiag_checks("rack", parsed, NAMES)
    assert (run["verdict"], run["measured"]) == ("pass", "Pass")
    assert sorted(per_host) == ["t1", "t2"] and all(r["verdict"] == "pass" for r in per_host["t2"])


def test_a_failed_gpu_fails_its_own_tray():
    results = [(h, g, "Fail" if (h, g) == (1, 2) else "Pass") for h in (0, 1) for g in range(4)]
    run, per_host = v.mndiag_checks("rack", dcgm.parse_dcgmi_mndiag(report("Fail", results)), NAMES)
    assert (run["verdict"], run["reason"]) == ("fail", "GPUs failed on t2")
    failed = [r for r in per_host["t2"] if r["verdict"] == "fail"]
    assert [(r["subject"], r["reason"]) for r in failed] == [("GPU 2", "GPU reported an error")]
    assert v.worst(per_host["t1"]) == "pass"


def test_a_run_that_did_not_finish_or_names_no_gpu_fails_the_run_and_no_tray():
    stopped = report(
        "Fail",
        [],
        runtime_error="Error: Unable to complete multi-node diagnostic on host localhost. Return: "
        "(Host engine connection invalid/disconnected) -21\n",
        global_errors=[{"warning": "Error: mpirun exited 1", "error_category": "MPI"}],
    )
    run, per_host = v.mndiag_checks("rack", dcgm.parse_dcgmi_mndiag(stopped), NAMES)
    assert run["verdict"] == "fail" and run["reason"].startswith("cannot check: Error: Unable to complete")
    assert "(Error: mpirun exited 1)" in run["reason"] and per_host == {}
    mpi = report(
        "Fail",
        [(h, g, "Pass") for h in (0, 1) for g in range(4)],
        global_errors=[{"warning": "Error: MPI job aborted", "error_category": "MPI"}],
    )
    run, per_host = v.mndiag_checks("rack", dcgm.parse_dcgmi_mndiag(mpi), NAMES)
    assert (run["verdict"], run["reason"]) == ("fail", "Error: MPI job aborted")
    assert all(v.worst(records) == "pass" for records in per_host.values())
    half = report("Pass", [(0, g, "Pass") for g in range(4)])
    run, _per_host = v.mndiag_checks("rack", dcgm.parse_dcgmi_mndiag(half), NAMES)
    assert (run["verdict"], run["reason"]) == ("fail", "no result for the GPUs of t2")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no report"),
        ("Error: Unable to connect to host engine. Host engine connection invalid/disconnected.", "did not run"),
        ('{"name": "DCGM Diagnostic"}', "not the report of a multi-node diagnostic"),
        ('{"name": "DCGM Multi-Node Diagnostic", "hosts": {}}', "hosts is not a list"),
        ('{"name": "DCGM Multi-Node Diagnostic", "hosts": [{"host_id": "0"}]}', "hosts[0] has no host_id"),
        (
            '{"name": "DCGM Multi-Node Diagnostic", "test_categories": [{"tests": [{"status": "Maybe"}]}]}',
            "unknown result 'Maybe'",
        ),
        (
            '{"name": "DCGM Multi-Node Diagnostic", "test_categories": [{"tests": [{"status": "Pass", '
            '"results": [{"host_id": true, "status": "Pass"}]}]}]}',
            "no numeric host_id",
        ),
        ("{" * 5000, "malformed JSON"),
    ],
)
def test_what_is_not_dcgms_report_is_refused_naming_the_command(text, message):
    with pytest.raises(ParseError) as error:
        dcgm.parse_dcgmi_mndiag(text)
    assert message in str(error.value) and "dcgmi mndiag" in str(error.value)


ARGV = ("dcgmi", "mndiag", "--run", "mnubergemm", "--hostList", "rack-t1;rack-t2", "--json")


def run_mndiag(monkeypatch, rc, out, err="", check_mode=False, **extra):
    argv = ARGV
    if extra.get("launcher"):
        script = 'test "${SLURM_PROCID:-0}" = 0 || exit 0; exec "$@"'
        argv = (*extra["launcher"], "sh", "-c", script, "sh", *ARGV)
    Node(monkeypatch, {}, {argv: (rc, out, err)})
    args = {"hosts": {"rack-t1": "t1", "rack-t2": "t2"}, "subject": "rack", "parameters": [], **extra}
    return run_module(mndiag_run.main, args, check_mode=check_mode).result


def test_the_module_judges_the_report_and_never_fails_the_task(monkeypatch):
    results = [(h, g, "Fail" if (h, g) == (0, 1) else "Pass") for h in (0, 1) for g in range(4)]
    result = run_mndiag(monkeypatch, 0, report("Fail", results))
    assert result["record"]["verdict"] == "fail" and not result.get("failed") and "rc" not in result
    assert [r["subject"] for r in result["host_records"]["t1"] if r["verdict"] == "fail"] == ["GPU 1"]
    launched = run_mndiag(monkeypatch, 0, report(), launcher=["srun", "-N", "2", "-w", "rack-t1,rack-t2"])
    assert launched["record"]["verdict"] == "pass"
    broken = run_mndiag(monkeypatch, 255, "Error: invalid multi-node diagnostic request\n")
    assert broken["record"]["verdict"] == "fail" and "cannot check" in broken["record"]["reason"]
    assert "exited 255: Error: invalid multi-node diagnostic request" in broken["record"]["reason"]
    skipped = run_mndiag(monkeypatch, 0, "", check_mode=True)
    assert skipped["record"]["verdict"] == "skip" and skipped["command_rc"] is None


def test_the_module_refuses_a_host_list_dcgm_would_misread(monkeypatch):
    Node(monkeypatch, {}, {})
    exited = run_module(mndiag_run.main, {"hosts": {"a;b": "a", "c": "c"}, "subject": "s"})
    assert exited.failed and "without ';'" in exited.result["msg"]


def test_the_report_drains_the_tray_of_a_failed_gpu_and_lists_a_failed_run_on_every_tray(monkeypatch, tmp_path):
    Node(monkeypatch, {}, {})
    gpu = v.record("mndiag", "GPU 1", "Pass", "Fail", "fail", "GPU reported an error")
    failed = {
        "record": v.record("mndiag", "rack", "Pass on every GPU", "Fail", "fail", "GPUs failed on n2"),
        "host_records": {"n2": [gpu]},
        "item": {"hosts": ["n1", "n2"]},
    }
    args = _report_args(tmp_path, cluster_mndiag=[failed])
    args["nodes"]["n2"]["checks"] = []
    result = run_module(validation_report.main, args).result
    assert result["drain"] == {"n2": "gpuops-validate: mndiag GPU 1"}
    assert result["resume"] == [] and set(result["findings_by_host"]) == {"n1", "n2"}
    assert "mndiag" in result["records"]["n2"]["failed_checks"]


def test_srun_asks_for_the_partitions_that_hold_every_node_of_a_run():
    """Without --partition srun asks the default partition: a node outside it (a PCIe node of its own
    partition beside an NVL72 rack's) cannot be validated through Slurm."""
    sinfo = "rack-t1|nvl72\nrack-t2|nvl72\nrack-x|pcie\nrack-t1|all\nrack-t2|all\nrack-x|all\n"
    assert v.common_partitions(sinfo, ["rack-x"]) == ["pcie", "all"]
    assert v.common_partitions(sinfo, ["rack-t1", "rack-t2"]) == ["nvl72", "all"]
    assert v.common_partitions(sinfo, ["rack-t1", "rack-x"]) == ["all"]
    assert v.common_partitions("rack-t1|nvl72\nrack-x|pcie\n", ["rack-t1", "rack-x"]) == []
    assert v.common_partitions("", ["rack-x"]) == []
