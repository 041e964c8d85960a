# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_platform
short_description: What the control side applies for the GPU nodes, from their facts and variables
version_added: 1.0.0
description:
  - The Helm values of the GPU Operator over the host stack (driver, toolkit and DCGM off, CDI on,
    NFD only where none runs, the MIG strategy and owner from the nodes' layouts, DRA as an
    option), or of the device plugin chart with GPU Feature Discovery (the light variant), each with
    its reason.
  - The manifests applied before the chart - the operator's namespace at the privileged Pod
    Security level, the RuntimeClass nvidia - and the workload tiers' PriorityClasses.
  - Each node's expected allocatable resources (C(nvidia.com/gpu), or its MIG slices), for the
    gate after the chart.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description:
      - The GPU nodes, each C({name, nvidia_gpu, mig_layout, mig_owner, dcgm_exporter}) (name as the
        cluster knows it; dcgm_exporter whether the host runs the dcgm role's exporter).
    type: list
    elements: dict
    required: true
  variant:
    description: C(operator) (the GPU Operator) or C(light) (the device plugin chart with GFD).
    type: str
    default: operator
  chart:
    description: The GPU Operator chart version (module_utils/k8s.py CHARTS).
    type: str
    default: v26.7.0
  nfd_present:
    description: Whether Node Feature Discovery runs already (outside the operator's namespace).
    type: bool
    default: false
  kubernetes_version:
    description: The cluster's version (for DRA).
    type: str
    default: ""
  dra:
    description: Deploy the GPU Operator's DRA driver (GPUCluster) instead of the ClusterPolicy.
    type: bool
    default: false
  namespace:
    description: The operator's namespace.
    type: str
    default: gpu-operator
  tiers:
    description: The PriorityClasses of the workload tiers (the C(workload_tiers) filter's C(priority_classes)).
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Work out the platform
  ansible.builtin.set_fact:
    __platform: "{{ __nodes | gpuops.cluster.k8s_platform(chart='v26.7.0', nfd_present=false) }}"
"""

RETURN = r"""
_value:
  description: The platform.
  type: dict
  contains:
    values:
      description: The chart's values.
      type: dict
    reasons:
      description: Each value's reason, by its dotted path.
      type: dict
    manifests:
      description: The objects to apply before the chart.
      type: list
      elements: dict
    expected:
      description: Each node's expected allocatable resources.
      type: dict
    mig_strategy:
      description: The cluster's MIG strategy (none, single, mixed).
      type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.k8s import platform


def k8s_platform(nodes, **options):
    try:
        return platform(nodes, **options)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"k8s_platform: {exc}") from None


class FilterModule:
    def filters(self):
        return {"k8s_platform": k8s_platform}
