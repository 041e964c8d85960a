# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: budget_comments
short_description: The blast-radius budget's records among the Slurm nodes' Comments
version_added: 1.1.0
description:
  - >-
    The nodes whose Slurm Comment is this collection's, from C(sinfo -h -N -O 'NodeList:0|,Comment:0'):
    C(gpuops: taken out <time>) (a take-out the budget's window counts) and C(gpuops: budget spent <time> ...)
    (the latch that stops every automatic take-out until a person reopens the budget).
  - A person's comment is never among them.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The output of C(sinfo -h -N -O 'NodeList:0|,Comment:0').
    type: str
    required: true
  latch:
    description: Only the nodes that carry the latch.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Clear the budget's records (remediate.yml -e remediate_reopen_budget=true)
  ansible.builtin.command:
    argv: [scontrol, update, "NodeName={{ comments.stdout | gpuops.cluster.budget_comments | join(',') }}", Comment=]
"""

RETURN = r"""
_value:
  description: Node name to its Comment, in the nodes' natural order.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state


def budget_comments(text, latch=False):
    if not isinstance(text, str):
        raise AnsibleFilterError(
            f"budget_comments takes the text of sinfo -h -N -O 'NodeList:0|,Comment:0', not {type(text).__name__}"
        )
    if latch:
        return dict(node_state.latch(node_state.comment_rows(text)))
    rows = node_state.comment_rows(text)
    return {
        node: rows[node]
        for node in sorted(rows, key=node_state.natural_key)
        if rows[node].startswith(node_state.COMMENT_PREFIX)
    }


class FilterModule:
    def filters(self):
        return {"budget_comments": budget_comments}
