# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_node_plan
short_description: A Kubernetes GPU node's labels and kubelet settings, with their reasons and problems
version_added: 1.0.0
description:
  - The node's labels, from its facts (GPU product and count under the C(gpuops.cluster/) prefix),
    the GPU Operator's per-node opt-outs (C(nvidia.com/gpu.deploy.<component>=false)) for what the
    host roles run, the MIG owner's labels, and the user's labels last.
  - The KubeletConfiguration fields the k8s_node role sets (systemd cgroup driver, containerd's
    socket, parallel image pulls, graceful shutdown, the optional CPU and topology managers).
  - The problems of the user's labels (syntax, and the kubernetes.io labels a kubelet may not set
    on itself), taints and kubelet settings, each naming its variable and the fix.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The node's C(nvidia_gpu) facts (gpu_facts).
    type: dict
    required: true
  host_components:
    description: Which of driver, container-toolkit, dcgm and dcgm-exporter the host runs (true or false each).
    type: dict
    required: true
  mig_labels:
    description: The MIG owner's labels (the C(mig_kubernetes) filter's node labels).
    type: dict
    default: {}
  labels:
    description: The user's labels (k8s_node_labels).
    type: dict
    default: {}
  taints:
    description: The user's taints (k8s_node_taints).
    type: list
    elements: dict
    default: []
  kubelet:
    description:
      - The kubelet settings, as keyword arguments of module_utils/k8s.py's kubelet_settings
        (max_parallel_image_pulls, shutdown_grace_period, shutdown_grace_period_critical_pods,
        cpu_manager_policy, reserved_system_cpus, topology_manager_policy, topology_manager_scope).
    type: dict
    default: {}
  token_ttl:
    description:
      - The join token's lifetime (k8s_node_token_ttl, kubeadm's C(--ttl)). A problem when it is
        not a duration, 0 (kubeadm's token that never expires) or longer than an hour.
    type: str
    default: 15m
"""

EXAMPLES = r"""
- name: Refuse labels a kubelet cannot register with
  ansible.builtin.assert:
    that: __plan.problems | length == 0
    fail_msg: "{{ __plan.problems | map(attribute='text') | join(' ') }}"
  vars:
    __plan: >-
      {{ ansible_facts.nvidia_gpu | gpuops.cluster.k8s_node_plan(host_components={'driver': true},
         labels=k8s_node_labels) }}
"""

RETURN = r"""
_value:
  description: The node's plan.
  type: dict
  contains:
    labels:
      description: Every label the node registers with.
      type: dict
    label_reasons:
      description: Each label's reason.
      type: dict
    kubelet:
      description: The KubeletConfiguration fields the role sets.
      type: dict
    kubelet_reasons:
      description: Each field's reason.
      type: dict
    problems:
      description: Each with C(severity), C(variable), C(message), C(fix) and C(text).
      type: list
      elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.k8s import node_plan


def k8s_node_plan(
    nvidia_gpu, host_components, *, mig_labels=None, labels=None, taints=None, kubelet=None, token_ttl="15m"
):
    try:
        return node_plan(
            nvidia_gpu or {},
            host_components=host_components or {},
            mig_labels=mig_labels or {},
            labels=labels or {},
            taints=taints or [],
            kubelet=kubelet or {},
            token_ttl=token_ttl,
        )
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"k8s_node_plan: {exc}") from None


class FilterModule:
    def filters(self):
        return {"k8s_node_plan": k8s_node_plan}
