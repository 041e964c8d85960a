# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/rolling_driver_upgrade.yml: which nodes it drains, and whose drain reason it keeps."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    ("gpu", "needed"),
    [
        ({"present": True, "driver_version": "570.133.20"}, True),
        ({"present": True, "driver_version": "580.95.05"}, False),
        # A CPU-only compute node: no driver version. It used to "need" the upgrade and be drained.
        ({"present": False, "driver_version": None}, False),
    ],
)
def test_only_gpu_nodes_on_another_driver_need_the_upgrade(gpu, needed):
    expression = task("Decide whether this node needs the upgrade")["ansible.builtin.set_fact"]["__rolling_needed"]
    result = evaluate(expression, ansible_facts={"nvidia_gpu": gpu}, nvidia_driver_version="580.95.05")
    assert str(result).strip() == str(needed)


def test_a_failure_keeps_the_drain_reason_an_operator_set():
    rescue = task("Keep the node drained, with what failed")
    assert evaluate(rescue["when"], __rolling_keep_drained=True) is False
    assert evaluate(rescue["when"], __rolling_keep_drained=False) is True
