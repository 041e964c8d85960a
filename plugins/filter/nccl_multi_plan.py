# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: nccl_multi_plan
short_description: The NCCL measurements across nodes the validate role runs
version_added: 1.0.0
description:
  - Disjoint pairs of nodes on the same compute fabric (an odd node out pairs with a validated
    node of its fabric out of this run where there is one, else with the first),
    then the whole set of each fabric when it has more than two nodes, each with the bus
    bandwidth to expect (C(NCCL_ALGO=Ring) measures the NICs; the node with the fewest or slowest
    Active compute ports sets it) and the floor.
  - Nodes without an Active compute port, and a fabric's only node, are returned as skipped
    records with the reason.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: Per host, its M(gpuops.cluster.node_health) result (C(fabric), C(compute_ports), C(gpus)).
    type: dict
    required: true
  thresholds:
    description: The validate role's C(validate_thresholds) (C(nccl_multi_busbw_gbps), C(nic_floor_share)).
    type: dict
  whole_set:
    description: Also measure each fabric's whole set of nodes.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Plan the runs across nodes
  ansible.builtin.set_fact:
    plan: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'health')))
      | gpuops.cluster.nccl_multi_plan }}"
"""

RETURN = r"""
_value:
  description:
    - C(runs) (C(check), C(subject), C(hosts), C(gpus_per_node), C(expectation)) and C(skipped)
      (check records).
  type: dict
"""

from ansible_collections.gpuops.cluster.plugins.module_utils.validation import multi_node_plan


def nccl_multi_plan(nodes, thresholds=None, whole_set=True, partners=None):
    return multi_node_plan(nodes, thresholds, whole_set, partners)


class FilterModule:
    def filters(self):
        return {"nccl_multi_plan": nccl_multi_plan}
