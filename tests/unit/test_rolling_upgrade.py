# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/rolling_driver_upgrade.yml: which nodes it drains, and whose drain reason it keeps."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from conftest import ROOT

PLAY = yaml.safe_load((ROOT / "playbooks" / "rolling_driver_upgrade.yml").read_text())[1]


def task(name, tasks=None):
    for item in tasks if tasks is not None else PLAY["tasks"]:
        if item.get("name") == name:
            return item
        for part in ("block", "rescue"):
            found = task(name, item.get(part, [])) if part in item else None
            if found:
                return found
    return None


def evaluate(expression, **variables):
    templar = Templar(loader=DataLoader(), variables=variables)
    text = expression if "{{" in expression else "{{ " + expression + " }}"
    return templar.template(trust_as_template(text))


FAILED_BEFORE = "NodeName=gpu01 State=IDLE+DRAIN Reason=gpuops driver upgrade to 580.95.05 failed at: Check that"
OPERATOR = "NodeName=gpu01 State=IDLE+DRAIN Reason=bad fan [ops@2026-11-20T10:00:00]"


@pytest.mark.parametrize(
    ("gpu", "slurm", "needed"),
    [
        ({"present": True, "driver_version": "570.133.20"}, "NodeName=gpu01 State=IDLE", True),
        ({"present": True, "driver_version": "580.95.05"}, "NodeName=gpu01 State=IDLE", False),
        # A CPU-only compute node: no driver version. It used to "need" the upgrade and be drained.
        ({"present": False, "driver_version": None}, None, False),
        # On the target, but left drained by a rollout that failed after the driver step: taken again.
        ({"present": True, "driver_version": "580.95.05"}, FAILED_BEFORE, True),
        # On the target and drained by an operator: left alone.
        ({"present": True, "driver_version": "580.95.05"}, OPERATOR, False),
        # Resumed since, with the old reason still there (Slurm 23.02 to 24.11 without slurmdbd
        # keep it until a job lands): not drained again.
        ({"present": True, "driver_version": "580.95.05"}, FAILED_BEFORE.replace("IDLE+DRAIN", "IDLE"), False),
        ({"present": True, "driver_version": "580.95.05"}, FAILED_BEFORE.replace("IDLE+DRAIN", "MIXED+DRAIN"), True),
    ],
)
def test_gpu_nodes_on_another_driver_or_left_drained_by_a_rollout_need_it(gpu, slurm, needed):
    expression = task("Decide whether this node needs the upgrade")["ansible.builtin.set_fact"]["__rolling_needed"]
    before = {"skipped": True} if slurm is None else {"stdout": slurm}
    result = evaluate(
        expression, ansible_facts={"nvidia_gpu": gpu}, nvidia_driver_version="580.95.05", __rolling_before=before
    )
    assert str(result).strip() == str(needed)


def test_a_failure_keeps_the_drain_reason_an_operator_set():
    rescue = task("Keep the node drained, with what failed")
    assert evaluate(rescue["when"], __slurm=True, __rolling_keep_drained=True) is False
    assert evaluate(rescue["when"], __slurm=True, __rolling_keep_drained=False) is True
    assert evaluate(rescue["when"], __slurm=False, __rolling_keep_drained=False) is False


def _k8s_node(unschedulable=False, annotations=None):
    return {
        "stdout": json.dumps({"spec": {"unschedulable": unschedulable}, "metadata": {"annotations": annotations or {}}})
    }


@pytest.mark.parametrize(
    ("node", "needed", "keep"),
    [
        (_k8s_node(), False, False),
        # Left cordoned by a rollout that failed after the driver step: taken again, and uncordoned.
        (
            _k8s_node(True, {"gpuops.cluster/driver-upgrade": "gpuops driver upgrade to 580.95.05 failed at: Check"}),
            True,
            False,
        ),
        # Cordoned by someone else: left alone here, and kept cordoned by a rollout that takes it.
        (_k8s_node(True, {"ops/reason": "bad fan"}), False, True),
    ],
)
def test_kubernetes_nodes_left_cordoned_by_a_rollout_are_taken_again_others_stay_cordoned(node, needed, keep):
    decide = task("Decide whether this node needs the upgrade")["ansible.builtin.set_fact"]
    variables = {
        "ansible_facts": {"nvidia_gpu": {"present": True, "driver_version": "580.95.05"}},
        "nvidia_driver_version": "580.95.05",
        "__rolling_before": {"skipped": True},
        "__rolling_k8s_before": node,
        "__annotation": "gpuops.cluster/driver-upgrade",
        "__k8s": True,
        "__slurm": False,
    }
    # The play's own (lazy) variable, as the set_fact reads it.
    variables["__k8s_annotations"] = evaluate(PLAY["vars"]["__k8s_annotations"], **variables)
    assert "__k8s_annotations" not in decide
    assert str(evaluate(decide["__rolling_needed"], **variables)).strip() == str(needed)
    note = task("Note a drain or cordon someone else set, which the rollout keeps")["ansible.builtin.set_fact"]
    assert str(evaluate(note["__rolling_keep_cordoned"], **variables)).strip() == str(keep)
    rescue = task("Keep the node cordoned in Kubernetes, annotated with what failed")
    assert evaluate(rescue["when"], __k8s=True, __rolling_keep_cordoned=keep) is (not keep)


@pytest.mark.parametrize(
    ("failed", "batch", "limit", "stop"),
    [
        ([], ["n3", "n4"], 0, False),
        (["n1"], ["n3", "n4"], 0, True),
        (["n1"], ["n3", "n4"], 50, False),
        (["n1", "n2"], ["n3", "n4"], 50, True),
    ],
)
def test_the_limit_is_checked_between_batches(failed, batch, limit, stop):
    play = yaml.safe_load((ROOT / "playbooks" / "rolling_driver_upgrade.yml").read_text())[1]
    # Ansible's own limit would stop the play in the middle of a batch, with nodes half upgraded.
    assert play["max_fail_percentage"] == 100
    check = play["tasks"][0]
    assert check["name"] == "Stop before this batch when the nodes failed so far pass the limit"
    hosts_all = ["n1", "n2", "n3", "n4"]
    variables = {
        "ansible_play_hosts_all": hosts_all,
        "ansible_play_hosts": [h for h in hosts_all if h not in failed],
        "ansible_play_batch": batch,
        "rolling_upgrade_max_fail_percentage": limit,
    }
    variables["__failed"] = evaluate(check["vars"]["__failed"], **variables)
    variables["__limit"] = evaluate(check["vars"]["__limit"], **variables)
    assert evaluate(check["when"], **variables) is stop


def test_the_budget_counts_the_batch_s_earlier_nodes_that_need_the_upgrade():
    check = task("Refuse to drain the node past the blast-radius budget")
    hostvars = {
        "n1": {"__rolling_needed": True, "ansible_facts": {"hostname": "gpu01"}},
        "n2": {"__rolling_needed": False, "ansible_facts": {"hostname": "gpu02"}},  # on the target: not drained
        "n3": {"__rolling_needed": "True", "ansible_facts": {"hostname": "gpu03"}},
        "n4": {"__rolling_needed": True, "ansible_facts": {"hostname": "gpu04"}},
    }
    before = evaluate(
        check["vars"]["__batch_before"], ansible_play_batch=list(hostvars), inventory_hostname="n4", hostvars=hostvars
    )
    assert before == ["gpu01", "gpu03"]
    # A node drained already (by anyone) is not counted again, nor checked.
    drained = {"stdout": "NodeName=gpu04 State=IDLE+DRAIN Reason=gpuops: leaving"}
    assert evaluate(check["vars"]["__drained_already"], __rolling_before=drained) is True
    assert evaluate(check["vars"]["__drained_already"], __rolling_before={"stdout": "State=IDLE"}) is False
