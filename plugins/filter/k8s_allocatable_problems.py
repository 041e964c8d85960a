# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_allocatable_problems
short_description: The GPU nodes whose allocatable GPUs or MIG slices do not match their facts
version_added: 1.0.0
description:
  - Compares each node's C(status.allocatable) with what its facts and MIG layout expect (the
    C(k8s_platform) filter's C(expected)); a node missing from the cluster, or a resource at another
    count, is a sentence naming the node, the resource, both counts and where to look.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The cluster's Node objects (kubernetes.core.k8s_info's C(resources)).
    type: list
    elements: dict
    required: true
  expected:
    description: Each node's expected resources (node, then resource, then count).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check every GPU node's allocatable GPUs
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems | join(' ') }}"
  vars:
    __problems: "{{ __nodes.resources | gpuops.cluster.k8s_allocatable_problems(expected=__platform.expected) }}"
"""

RETURN = r"""
_value:
  description: The problems, empty when every node matches.
  type: list
  elements: str
"""

from ansible_collections.gpuops.cluster.plugins.module_utils.k8s import allocatable_problems


def k8s_allocatable_problems(nodes, expected):
    return allocatable_problems(list(nodes or []), dict(expected or {}))


class FilterModule:
    def filters(self):
        return {"k8s_allocatable_problems": k8s_allocatable_problems}
