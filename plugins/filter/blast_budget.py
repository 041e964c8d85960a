# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: blast_budget
short_description: Whether the fleet's blast-radius budget lets automation take a node out now
version_added: 1.1.0
description:
  - The node state machine's budget (C(plugins/module_utils/node_state.py)), for a playbook that takes
    nodes out (the rolling driver upgrade); the health check and validation apply the same one.
  - >-
    Counts the nodes Slurm shows out by automation (a reason of this collection's), the nodes taken out
    within O(window) seconds (their C(gpuops: taken out) Comment), and O(also_out); refuses while the
    budget is latched (a C(gpuops: budget spent) Comment, until a person reopens it). A node out already
    costs nothing more.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The output of C(sinfo -h -N -o '%N|%t|%E').
    type: str
    required: true
  comments:
    description: The output of C(sinfo -h -N -O 'NodeList:0|,Comment:0').
    type: str
    required: true
  node:
    description:
      - >-
        The Slurm node to take out, or a list of nodes to take out together (the slurm role's leaving
        nodes); each counts, and the list costs nothing more only when every node in it is out already.
    type: raw
    required: true
  budget_nodes:
    description: The budget's node count (C(validate_health_budget_nodes)).
    type: int
    default: 8
  budget_percent:
    description: The budget's share of the fleet, in percent (C(validate_health_budget_percent)).
    type: float
    default: 10
  window:
    description: How long a take-out counts, in seconds (C(validate_health_budget_window)).
    type: int
    default: 3600
  also_out:
    description: Nodes taken out alongside (the rest of a batch), counted as out.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Refuse to drain past the budget
  ansible.builtin.assert:
    that: __budget.allowed
    fail_msg: "{{ __budget.why }}"
  vars:
    __budget: "{{ sinfo.stdout | gpuops.cluster.blast_budget(comments.stdout, 'gpu07', 8, 10, 3600) }}"
"""

RETURN = r"""
_value:
  description: The budget's word.
  type: dict
  contains:
    allowed:
      description: Whether the node may be taken out.
      type: bool
    why:
      description: The count against the limit, or why not (naming the nodes out, or the latch and how to reopen it).
      type: str
"""

import time

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state


def blast_budget(  # noqa: PLR0917 - the filter's arguments, as a playbook gives them
    text, comments, node, budget_nodes=8, budget_percent=10, window=node_state.BUDGET_WINDOW_S, also_out=None
):
    budget_nodes, budget_percent = node_state.as_number(budget_nodes, int), node_state.as_number(budget_percent, float)
    window = node_state.as_number(window, int)
    names = ("validate_health_budget_nodes", "validate_health_budget_percent")
    problems = node_state.budget_problems(budget_nodes, budget_percent, names)
    problems += node_state.window_problems(window, "validate_health_budget_window")
    if not isinstance(text, str) or not isinstance(comments, str):
        problems.append("blast_budget takes the text of sinfo (the fleet) and of sinfo -O (the nodes' comments)")
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    if isinstance(node, (list, tuple)):  # several together: the budget asked for one not out yet, the rest alongside
        together = [str(each) for each in node]
        if not together:
            raise AnsibleFilterError("blast_budget takes a node, or a list of one node or more")
        _fleet, out = node_state.fleet_out(text)
        pending = [each for each in together if each not in out]
        node, also_out = (pending or together)[0], [*together, *(also_out or [])]
    extra = "".join(f"{other}|drain|gpuops: (taken out alongside)\n" for other in also_out or [] if other != node)
    allowed, why, _spent = node_state.budget(
        text + "\n" + extra,
        str(node),
        budget_nodes,
        budget_percent,
        comments=node_state.comment_rows(comments),
        window=window,
        now=time.time(),
    )
    return {"allowed": allowed, "why": why}


class FilterModule:
    def filters(self):
        return {"blast_budget": blast_budget}
