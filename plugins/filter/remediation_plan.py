# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: remediation_plan
short_description: What playbooks/remediate.yml does with each node, from sinfo
version_added: 1.1.0
description:
  - The repair ladder's third rung, planned from the fleet as C(sinfo -h -N -o '%N|%t|%E') prints it.
  - V(power_cycle) for a node the health check took out (its reason starts with C(gpuops-health:)) that
    Slurm has down or not responding (a reboot that never came back, C(reboot timed out); a hung node), or
    that owes a power cycle (C(power node) in its reason), at most the blast-radius budget's limit a run
    (the rest V(refused)); V(none) for every other node, with the reason (in service; out for a person's
    or another tool's reason, never touched; the node's own check has the repair in hand).
  - The decisions are the node state machine's (C(plugins/module_utils/node_state.py)).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The output of C(sinfo -h -N -o '%N|%t|%E').
    type: str
    required: true
  nodes:
    description: The nodes asked for (an alert's); empty, every node Slurm lists.
    type: list
    elements: str
    default: []
  budget_nodes:
    description: The budget's node count (the smaller of it and O(budget_percent) of the fleet).
    type: int
    default: 8
  budget_percent:
    description: The budget's share of the fleet, in percent.
    type: float
    default: 10
"""

EXAMPLES = r"""
- name: Plan the power cycles
  ansible.builtin.set_fact:
    plan: "{{ sinfo.stdout | gpuops.cluster.remediation_plan(['gpu07'], 8, 10) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    plan:
      description: One entry per node asked for, C(node), C(action) (V(power_cycle), V(refused), V(none)) and C(why).
      type: list
      elements: dict
    problems:
      description: Nodes asked for that Slurm does not list; the playbook refuses before any change.
      type: list
      elements: str
    limit:
      description: The power cycles the budget allows a run.
      type: int
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state


def remediation_plan(text, nodes=None, budget_nodes=node_state.BUDGET_NODES, budget_percent=node_state.BUDGET_PERCENT):
    budget_nodes, budget_percent = node_state.as_number(budget_nodes, int), node_state.as_number(budget_percent, float)
    problems = node_state.budget_problems(
        budget_nodes, budget_percent, ("remediate_budget_nodes", "remediate_budget_percent")
    )
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    if not isinstance(nodes or [], list):
        raise AnsibleFilterError(f"remediate_nodes is {nodes!r}: give a list of Slurm node names, or [] for every node")
    return node_state.remediation_plan(text, nodes or [], budget_nodes, budget_percent)


class FilterModule:
    def filters(self):
        return {"remediation_plan": remediation_plan}
