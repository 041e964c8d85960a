# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_version_problems
short_description: Why a Kubernetes version should not be used
version_added: 1.0.0
description:
  - Checks an exact Kubernetes version against the collection's table of minors (module_utils/k8s.py,
    from kubernetes.io/releases and the GPU Operator's platform support).
  - A minor past its end of life, or not in the table, is an error; one the GPU Operator does not
    validate yet is a warning. Each problem names the variable and the fix.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The version, such as C(1.36.4).
    type: str
    required: true
  today:
    description: The day the end of life is checked against, YYYY-MM-DD.
    type: str
    required: true
  variable:
    description: The variable's name, for the messages.
    type: str
    default: k8s_node_kubernetes_version
"""

EXAMPLES = r"""
- name: Refuse a Kubernetes minor past its end of life
  ansible.builtin.assert:
    that: __problems | selectattr('severity', 'eq', 'error') | list | length == 0
    fail_msg: "{{ __problems | map(attribute='text') | join(' ') }}"
  vars:
    __problems: "{{ k8s_node_kubernetes_version | gpuops.cluster.k8s_version_problems(today='2026-11-25') }}"
"""

RETURN = r"""
_value:
  description:
    - The problems, each with C(severity) (error or warning), C(variable), C(message), C(fix) and
      C(text) (the whole sentence).
  type: list
  elements: dict
"""

from ansible_collections.gpuops.cluster.plugins.module_utils.k8s import version_problems


def k8s_version_problems(version, today, variable="k8s_node_kubernetes_version"):
    return [dict(p, text=f"{p['message']}: {p['fix']}.") for p in version_problems(version, str(today), variable)]


class FilterModule:
    def filters(self):
        return {"k8s_version_problems": k8s_version_problems}
