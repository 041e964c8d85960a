# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_run: a run is judged at its largest size; a failed command or unreadable output is a failed
check, never a failed task (no rc key: Ansible would fail the task on it)."""

from __future__ import annotations

from ansible_collections.gpuops.cluster.plugins.modules import nccl_run
from conftest import fixture
from module_harness import Node, run_module

ARGV = ("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8")
EXPECT = {"expected": 473.3, "floor": 435.4, "reason": "18 NVLink links"}


def run(monkeypatch, rc, out, err="", check_mode=False, **extra):
    Node(monkeypatch, {}, {ARGV: (rc, out, err)})
    args = {"argv": list(ARGV), "check": "nccl_node", "subject": "n1", "expectation": EXPECT, **extra}
    return run_module(nccl_run.main, args, check_mode=check_mode).result


def test_the_largest_size_is_judged_and_the_series_returned(monkeypatch):
    out = fixture("nccl_tests", "all_reduce_h100_a3mega_2node_16rank_wrong_root_format_no_final_hash.txt")
    result = run(monkeypatch, 0, out, expectation={"floor": 330.0, "reason": "r"})
    assert result["record"]["verdict"] == "pass" and result["busbw"] == 338.82
    assert len(result["series"]) == 31 and "rc" not in result and result["command_rc"] == 0
    low = run(monkeypatch, 0, out)
    assert low["record"]["verdict"] == "fail" and low["record"]["floor"] == 435.4


def test_a_failed_command_is_a_failed_check_not_a_failed_task(monkeypatch):
    result = run(
        monkeypatch, 1, "", "srun: error: Unable to allocate resources: Requested node configuration is not available"
    )
    assert not result.get("failed") and "rc" not in result
    assert result["record"]["verdict"] == "fail"
    assert "exited 1: srun: error: Unable to allocate resources" in result["record"]["reason"]


def test_a_non_zero_exit_after_a_good_table_still_fails_the_check(monkeypatch):
    out = fixture("nccl_tests", "all_reduce_v100_sxm2_16gb_1node_8gpu_single_thread_g8_1g_only.txt")
    result = run(monkeypatch, 3, out, "NCCL WARN Cuda failure", expectation={"floor": 100.0, "reason": "r"})
    assert result["record"]["verdict"] == "fail" and "exited 3 after its table" in result["record"]["reason"]


def test_a_baseline_replaces_the_floor(monkeypatch):
    out = fixture("nccl_tests", "all_reduce_v100_sxm2_16gb_1node_8gpu_single_thread_g8_1g_only.txt")
    result = run(monkeypatch, 0, out, expectation={"floor": 100.0, "reason": "r"}, baseline=150.0)
    assert result["record"]["floor"] == 142.5 and result["record"]["verdict"] == "fail"


def test_check_mode_runs_nothing(monkeypatch):
    Node(monkeypatch, {}, {})
    args = {"argv": list(ARGV), "check": "nccl_node", "subject": "n1", "expectation": EXPECT}
    result = run_module(nccl_run.main, args, check_mode=True).result
    assert result["record"]["verdict"] == "skip" and "rc" not in result
