# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: slurm_partitions
short_description: The Slurm partitions that hold every one of some nodes, from sinfo
version_added: 1.2.0
description:
  - Read from C(sinfo -h -N -o '%N|%R'), which lists a node once per partition. The validate role
    gives its C(srun) these partitions, because without C(--partition) srun asks the cluster's
    default partition, which need not hold the nodes it names.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The output of C(sinfo -h -N -o '%N|%R'), or empty.
    type: str
    required: true
  nodes:
    description: Slurm node names.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The partitions a run over two nodes can ask for
  ansible.builtin.debug:
    msg: "{{ partitions.stdout | gpuops.cluster.slurm_partitions(['gpu01', 'gpu02']) | join(',') }}"
"""

RETURN = r"""
_value:
  description: The partitions that hold every node, in sinfo's order (empty where none does).
  type: list
  elements: str
"""

from ansible_collections.gpuops.cluster.plugins.module_utils.validation import common_partitions


def slurm_partitions(text, nodes):
    return common_partitions(text or "", list(nodes or []))


class FilterModule:
    def filters(self):
        return {"slurm_partitions": slurm_partitions}
