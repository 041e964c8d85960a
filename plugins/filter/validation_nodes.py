# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: validation_nodes
short_description: Gather every node's validation results for the report
version_added: 1.0.0
description:
  - Per host that ran M(gpuops.cluster.node_health), its checks, HCAs, compute ports and fabric,
    its M(gpuops.cluster.nccl_run) result, its GPU facts and its current Slurm drain reason; the
    C(nodes) option of M(gpuops.cluster.validation_report).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The hosts, in play order.
    type: list
    elements: str
    required: true
  health:
    description: Each host's node_health result, in the same order (skipped results are left out).
    type: list
    required: true
  nccl:
    description: Each host's nccl_run result, in the same order.
    type: list
    required: true
  facts:
    description: Each host's C(ansible_facts.nvidia_gpu), in the same order.
    type: list
    required: true
  sinfo:
    description: The output of C(sinfo -h -N -o '%N|%t|%E') (the nodes' states and reasons), or empty.
    type: str
    default: ""
  names:
    description: Each host's Slurm node name (its short host name), in the same order; the hosts by default.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Collect
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts | gpuops.cluster.validation_nodes(health_list, nccl_list, facts_list) }}"
"""

RETURN = r"""
_value:
  description: Host to C(checks), C(hcas), C(compute_ports), C(fabric), C(nccl), C(nvidia_gpu), C(drained).
  type: dict
"""

from ansible_collections.gpuops.cluster.plugins.module_utils.validation import report_nodes


def validation_nodes(hosts, health, nccl, facts, sinfo="", names=None):  # noqa: PLR0917 - parallel lists
    return report_nodes(list(hosts), list(health), list(nccl), list(facts), sinfo or "", names)


class FilterModule:
    def filters(self):
        return {"validation_nodes": validation_nodes}
