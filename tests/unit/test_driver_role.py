# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia_driver role on a live node: no branch change under running work, and the GPU services
it stops to swap the module are started again whatever happens.

The module swap needs a real kernel, which the test containers do not have (the role skips it
there, saying so), so these evaluate the role's own expressions the way Ansible does."""

from __future__ import annotations

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from conftest import ROOT

TASKS = ROOT / "roles" / "nvidia_driver" / "tasks"
VARS = yaml.safe_load((ROOT / "roles" / "nvidia_driver" / "vars" / "main.yml").read_text())


def find(tasks, name):
    for item in tasks:
        if item.get("name") == name:
            return item
        for part in ("block", "rescue", "always"):
            found = find(item.get(part, []), name) if part in item else None
            if found:
                return found
    return None


def evaluate(expression, **variables):
    templar = Templar(
        loader=DataLoader(),
        variables={k: trust_as_template(v) if isinstance(v, str) else v for k, v in variables.items()},
    )
    text = expression if "{{" in expression else "{{ " + expression + " }}"
    return templar.template(trust_as_template(text))


def refused(work):
    task = find(
        yaml.safe_load((TASKS / "branch.yml").read_text()),
        "Refuse a branch change on a node with running work that is not drained",
    )
    variables = {"__nvidia_driver_work": {"changed": False, "work": work}, **task["vars"]}
    return all(evaluate(condition, **variables) for condition in task["when"])


@pytest.mark.parametrize(
    ("work", "refuse"),
    [
        (
            {
                "gpu_processes": [{"pid": 1, "process_name": "python3"}],
                "slurm_jobs": [],
                "slurm_state": None,
                "drained": False,
            },
            True,
        ),
        ({"gpu_processes": [], "slurm_jobs": ["12"], "slurm_state": "draining", "drained": False}, True),
        ({"gpu_processes": [], "slurm_jobs": [], "slurm_state": "idle", "drained": False}, False),
        # Drained by the operator or the rolling upgrade: its business, the swap is tried.
        (
            {
                "gpu_processes": [{"pid": 1, "process_name": "dcgm"}],
                "slurm_jobs": [],
                "slurm_state": "drained",
                "drained": True,
            },
            False,
        ),
    ],
)
def test_a_branch_change_is_refused_under_running_work_unless_drained(work, refuse):
    assert refused(work) is refuse


def test_the_refusal_comes_before_anything_of_the_old_branch_is_touched():
    branch = [t["name"] for t in yaml.safe_load((TASKS / "branch.yml").read_text())]
    refusal = branch.index("Refuse a branch change on a node with running work that is not drained")
    assert refusal < branch.index("Release the holds on the driver packages of other branches")
    assert refusal < branch.index("Remove the driver packages of other branches")
    # The branch change (included only where another branch's packages are) comes before the install.
    tasks = yaml.safe_load((TASKS / "packages-Debian.yml").read_text())
    names = [t["name"] for t in tasks]
    change = find(tasks, "Change branch, where the node has packages of another branch")
    assert change["ansible.builtin.include_tasks"]["file"] == "branch.yml"
    assert change["when"] == "__nvidia_driver_before.other_branches | length > 0"
    assert names.index(change["name"]) < names.index("Install the driver")


def test_the_services_stopped_for_the_swap_are_started_again_on_every_path():
    swap = find(
        yaml.safe_load((TASKS / "load.yml").read_text()), "Replace an older loaded module with the installed one"
    )
    noted = find(swap["block"], "Note the GPU services that run now")
    services = {
        "nvidia-dcgm.service": {"state": "running"},
        "nvidia-fabricmanager.service": {"state": "running"},
        "nvidia-persistenced.service": {"state": "stopped"},
        "ssh.service": {"state": "running"},
    }
    expression = noted["ansible.builtin.set_fact"]["__nvidia_driver_stopped"]
    stopped = evaluate(
        expression,
        ansible_facts={"services": services},
        __running=noted["vars"]["__running"],
        __nvidia_driver_gpu_services=VARS["__nvidia_driver_gpu_services"],
    )
    assert stopped == ["nvidia-dcgm", "nvidia-fabricmanager"]
    stop = find(swap["block"], "Stop the services that hold the GPUs")
    assert stop["loop"] == "{{ __nvidia_driver_stopped }}"
    # always: runs after the block succeeded, and after the rescue of a module that would not unload.
    start = swap["always"][0]
    assert start["ansible.builtin.systemd_service"]["state"] == "started"
    assert evaluate(start["loop"], __nvidia_driver_stopped=stopped) == ["nvidia-fabricmanager", "nvidia-dcgm"]
    assert "rescue" in swap
