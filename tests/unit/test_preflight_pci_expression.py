# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's refusal of a GPU host whose PCI bus nobody read, templated from the role's own task:
"no GPU" from a host without lspci is "could not look", and the GPU roles would leave it alone."""

from __future__ import annotations

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import ROOT, trusted

ROLE = ROOT / "roles" / "preflight"
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
TASK = next(
    t
    for t in yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    if t.get("name") == "Keep the findings and the resolved stack for the install roles"
)


def passes(facts, roles):
    variables = dict(VARS, ansible_facts={"nvidia_gpu": facts}, preflight_roles=roles, inventory_hostname="gpu07")
    variables.update(TASK["vars"])
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    problems = templar.template(trusted(TASK["vars"]["__preflight_unlooked"]))
    if problems:
        (problem,) = problems
        assert problem["severity"] == "error" and "install pciutils" in problem["fix"]
        assert "applies nvidia_driver here" in " ".join(problem["message"].split())
    return not problems


@pytest.mark.parametrize(
    "facts, roles, ok",
    [
        ({"present": False, "pci_read": False}, ["os_tuning", "nvidia_driver", "slurm"], False),
        ({"present": False, "pci_read": False}, ["os_tuning", "slurm"], True),  # a controller: no GPU role
        ({"present": False, "pci_read": True}, ["nvidia_driver"], True),  # looked, and found none
        ({"present": True, "pci_read": False}, ["nvidia_driver"], True),  # the driver lists them
        ({"present": False}, ["nvidia_driver"], True),  # facts of an older collection
    ],
)
def test_a_gpu_host_without_lspci_is_refused(facts, roles, ok):
    assert passes(facts, roles) is ok


REPORT = next(
    t
    for t in yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    if t.get("name") == "Report the decisions and the warnings"
)


def test_the_report_is_one_line_per_row_with_no_literal_backslash_n():
    """The decisions, then the warnings: each its own line (a literal '\\n' joined them before)."""
    variables = {
        "__preflight_stack": {"report": "Decisions, with their reasons\n  driver  580  declared"},
        "preflight_problems": [
            {"severity": "warning", "variable": "preflight_kernel_headers", "message": "no headers", "fix": "install"}
        ],
        "inventory_hostname": "gpu07",
        "__header": "Preflight warnings on gpu07",
    }
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    lines = templar.template(trusted(REPORT["ansible.builtin.debug"]["msg"]))
    assert lines[:2] == ["Decisions, with their reasons", "  driver  580  declared"]
    assert lines[2].startswith("Preflight warnings on gpu07")
    assert not any("\\n" in line for line in lines)
