# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: problems_report
short_description: Turn a list of stack or host problems into one readable message
version_added: 1.0.0
description:
  - Formats the C(problems) lists of M(gpuops.cluster.stack_check) and M(gpuops.cluster.host_check)
    as one message, errors first, one line per problem with its variable and fix.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The problems, each a dict with C(severity), C(variable), C(message) and C(fix).
    type: list
    elements: dict
    required: true
  header:
    description: First words of the message.
    type: str
    default: The declared stack cannot work on this node
"""

EXAMPLES = r"""
- name: Stop on the errors
  ansible.builtin.fail:
    msg: "{{ stack.problems | gpuops.cluster.problems_report(header='Preflight failed on ' ~ inventory_hostname) }}"
  when: stack.error_count > 0
"""

RETURN = r"""
_value:
  description: The message.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.stack import SEVERITIES, format_problems

KEYS = ("severity", "variable", "message", "fix")


def problems_report(problems, header="The declared stack cannot work on this node"):
    if not isinstance(problems, list):
        raise AnsibleFilterError(f"problems_report expects a list of problems, got {type(problems).__name__}")
    for item in problems:
        if not isinstance(item, dict) or any(key not in item for key in KEYS) or item["severity"] not in SEVERITIES:
            raise AnsibleFilterError("problems_report: not a problem (needs {}): {!r}".format(", ".join(KEYS), item))
    return format_problems(problems, header=header)


class FilterModule:
    def filters(self):
        return {"problems_report": problems_report}
