# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: slurm_node_groups
short_description: Group hosts of identical hardware under one hostlist expression
version_added: 1.0.0
description:
  - Takes a mapping of host name to node description (see P(gpuops.cluster.slurm_node_spec#filter)) and
    returns one entry per distinct description, its hosts compressed into a Slurm hostlist
    expression (see P(gpuops.cluster.hostlist_compress#filter)), sorted by that expression.
  - slurm.conf then needs one C(NodeName) line per entry, gres.conf one set of records.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: Host name to node description.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: One line per hardware type
  ansible.builtin.debug:
    msg: "NodeName={{ item.nodes }} CPUs={{ item.spec.cpus }}"
  loop: "{{ {'gpu01': spec_a, 'gpu02': spec_a, 'gpu03': spec_b} | gpuops.cluster.slurm_node_groups }}"
  # NodeName=gpu[01-02] ..., NodeName=gpu03 ...
"""

RETURN = r"""
_value:
  description: Entries with C(nodes) (the hostlist expression) and C(spec) (the shared description).
  type: list
  elements: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import HostlistError
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import group_nodes, plain_data


def slurm_node_groups(specs):
    if not isinstance(specs, Mapping):
        raise AnsibleFilterError(
            f"slurm_node_groups: expected a mapping of host to description, got {type(specs).__name__}"
        )
    try:
        return group_nodes(plain_data(specs))
    except HostlistError as err:
        raise AnsibleFilterError(f"slurm_node_groups: {err}") from err


class FilterModule:
    def filters(self):
        return {"slurm_node_groups": slurm_node_groups}
