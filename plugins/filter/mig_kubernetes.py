# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: mig_kubernetes
short_description: What Kubernetes needs of the nodes' MIG layouts
version_added: 1.0.0
description:
  - From each node's C(mig_layout), C(mig_owner) and GPU facts, the MIG side of a Kubernetes
    cluster, from the same definition the host and Slurm follow.
  - The GPU Operator's one C(mig.strategy) (C(mixed) if any node has more than one profile or GPUs
    without MIG beside MIG ones, else C(single) if any node has MIG, else C(none)), with its reason.
  - Per node the labels of its MIG owner (C(nvidia.com/mig.config) where the operator's MIG
    manager owns MIG, C(nvidia.com/gpu.deploy.mig-manager=false) where the host's service does,
    one owner and never both) and the extended resources it should show.
  - The nvidia-mig-parted config of the layouts the operator owns, for its custom MIG ConfigMap.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description:
      - The nodes, each a dict with C(name), C(mig_layout) (empty for none), C(mig_owner)
        (C(host) or C(operator)) and C(nvidia_gpu) (the node's C(ansible_facts.nvidia_gpu)).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Work out the labels and resources of this node's MIG layout
  ansible.builtin.set_fact:
    __mig: "{{ [__node] | gpuops.cluster.mig_kubernetes }}"
  vars:
    __node:
      name: "{{ inventory_hostname }}"
      mig_layout: "{{ mig_layout }}"
      mig_owner: "{{ mig_owner }}"
      nvidia_gpu: "{{ ansible_facts.nvidia_gpu }}"
"""

RETURN = r"""
_value:
  description: The MIG settings of the cluster and of each node.
  type: dict
  contains:
    strategy:
      description: The GPU Operator's C(mig.strategy), C(none), C(single) or C(mixed).
      type: str
    reason:
      description: Why that strategy (the node that decides it).
      type: str
    mig_manager:
      description: Whether the operator's MIG manager is needed (a node has C(mig_owner=operator)).
      type: bool
    parted_config:
      description: The nvidia-mig-parted v1 config of the layouts the operator owns (with C(all-disabled)).
      type: dict
    nodes:
      description:
        - Per node name, its C(labels), C(allocatable) (resource to count), C(strategy), C(reason)
          and C(owner).
      type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils import mig


def mig_kubernetes(nodes):
    try:
        return mig.kubernetes_cluster(nodes)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"mig_kubernetes": mig_kubernetes}
