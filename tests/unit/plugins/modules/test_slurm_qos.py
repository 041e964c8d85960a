# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_qos against sacctmgr's real listing (Debian 12's Slurm 22.05.8, tests/unit/fixtures/sacctmgr):
QOS already as wanted left alone, missing ones added before any is modified, check mode runs
nothing, a failing sacctmgr named with the fix."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import slurm
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.modules import slurm_qos
from conftest import fixture
from module_harness import Node, run_module

BIN = "/usr/bin/sacctmgr"
SHOW = (BIN, "--noheader", "--parsable2", "show", "qos", "format=Name,Priority,Preempt,PreemptMode,GraceTime")
LISTED = fixture("sacctmgr", "show_qos.txt")
TRAINING = {"name": "training", "priority": 1000, "preempt": ["normal", "inference"], "grace_time": 0}
INFERENCE = {"name": "inference", "priority": 100, "preempt": [], "grace_time": 65}


def test_parse_the_real_listing():
    assert slurm.parse_qos(LISTED) == {
        "normal": {"priority": 0, "preempt": [], "preempt_mode": "cluster", "grace_time": 0},
        "training": {"priority": 1000, "preempt": ["inference", "normal"], "preempt_mode": "cluster", "grace_time": 0},
        "inference": {"priority": 100, "preempt": [], "preempt_mode": "cluster", "grace_time": 65},
    }


@pytest.mark.parametrize(("text", "seconds"), [("00:01:05", 65), ("1-00:00:00", 86400), ("05:00", 300), ("x", None)])
def test_sacctmgr_times(text, seconds):
    assert slurm.seconds(text) == seconds


@pytest.mark.parametrize("line", ["normal|0||cluster", "normal|high||cluster|00:00:00", "normal|0||cluster|soon"])
def test_a_line_it_cannot_read_is_named(line):
    with pytest.raises(ParseError, match=r"sacctmgr --noheader --parsable2 show qos.*at line 2"):
        slurm.parse_qos("normal|0||cluster|00:00:00\n" + line)


def test_qos_as_wanted_are_left_alone(monkeypatch):
    node = Node(monkeypatch, {"sacctmgr": BIN}, {SHOW: (0, LISTED, "")})
    exited = run_module(slurm_qos.main, {"qos": [TRAINING, INFERENCE]})
    assert not exited.failed and exited.result["changed"] is False
    assert node.calls == [list(SHOW)]


def test_missing_qos_are_added_before_any_is_modified(monkeypatch):
    empty = "normal|0||cluster|00:00:00\n"
    outputs = {SHOW: (0, empty, "")}
    node = Node(monkeypatch, {"sacctmgr": BIN}, outputs)
    for name in ("training", "inference"):
        outputs[BIN, "-i", "add", "qos", name] = (0, " Adding QOS(s)\n", "")
    modify_training = (
        BIN,
        "-i",
        "modify",
        "qos",
        "where",
        "name=training",
        "set",
        "Priority=1000",
        "Preempt=inference,normal",
        "PreemptMode=cluster",
        "GraceTime=0",
    )
    modify_inference = (
        BIN,
        "-i",
        "modify",
        "qos",
        "where",
        "name=inference",
        "set",
        "Priority=100",
        "Preempt=",
        "PreemptMode=cluster",
        "GraceTime=65",
    )

    def answer(_module, argv, **kwargs):
        result = node.run_command(argv, **kwargs)
        if tuple(argv) == modify_inference:
            outputs[SHOW] = (0, LISTED, "")
        return result

    outputs[modify_training] = outputs[modify_inference] = (0, " Modified qos...\n", "")
    monkeypatch.setattr(slurm_qos.AnsibleModule, "run_command", answer)
    exited = run_module(slurm_qos.main, {"qos": [TRAINING, INFERENCE]})
    assert not exited.failed and exited.result["changed"] is True
    assert [c["action"] for c in exited.result["changes"]] == ["add", "add"]
    assert [c[:4] for c in node.calls[1:3]] == [[BIN, "-i", "add", "qos"]] * 2
    assert node.calls[3:5] == [list(modify_training), list(modify_inference)]


def test_check_mode_says_what_would_change_and_runs_nothing(monkeypatch):
    node = Node(monkeypatch, {"sacctmgr": BIN}, {SHOW: (0, LISTED, "")})
    longer = dict(INFERENCE, grace_time=120)
    exited = run_module(slurm_qos.main, {"qos": [TRAINING, longer]}, check_mode=True, diff=True)
    assert exited.result["changed"] is True
    (change,) = exited.result["changes"]
    assert (
        change["name"] == "inference" and change["before"]["grace_time"] == 65 and change["after"]["grace_time"] == 120
    )
    assert (
        "inference: priority 100, preempts nothing, preempt mode cluster, grace time 120 s"
        in exited.result["diff"]["after"]
    )
    assert node.calls == [list(SHOW)]


def test_sacctmgr_failing_is_named_with_the_fix(monkeypatch):
    Node(
        monkeypatch,
        {"sacctmgr": BIN},
        {SHOW: (1, "", "sacctmgr: error: Problem talking to the database: Connection refused")},
    )
    exited = run_module(slurm_qos.main, {"qos": [TRAINING]})
    assert exited.failed
    assert "Connection refused" in exited.result["msg"] and "systemctl status slurmdbd" in exited.result["msg"]


def test_no_sacctmgr_here(monkeypatch):
    Node(monkeypatch, {}, {})
    exited = run_module(slurm_qos.main, {"qos": [TRAINING]})
    assert exited.failed and "run slurm_qos on the Slurm controller" in exited.result["msg"]
