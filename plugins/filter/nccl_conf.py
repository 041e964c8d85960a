# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: nccl_conf
short_description: NCCL's settings for a node, from its hardware facts
version_added: 1.0.0
description:
  - Derives the C(/etc/nccl.conf) settings of a node from C(ansible_facts.infiniband)
    (M(gpuops.cluster.ib_facts)) and C(ansible_facts.nvidia_gpu) (M(gpuops.cluster.gpu_facts)).
  - C(NCCL_IB_HCA) lists, with exact names (C(=mlx5_0:1,...)), the Active ports of the compute
    fabric only; ports that are Down, or on the other link layer, are left out.
  - C(NCCL_NET_GDR_LEVEL) is the largest distance between a GPU and its nearest compute-fabric NIC,
    so that every GPU uses GPUDirect RDMA with that NIC; a NIC reachable only across the CPU
    sockets (C(SYS)) is capped at C(PHB), and no GPUDirect at all gives C(LOC).
  - Returns C(env) (the settings, in file order) and C(notes) (why, one line each, for the file's
    comments).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: C(ansible_facts.infiniband).
    type: dict
    required: true
  nvidia_gpu:
    description: C(ansible_facts.nvidia_gpu); its topology gives the GPU to NIC distances.
    type: dict
    required: true
  fabric:
    description:
      - The compute fabric's link layer. V(auto) takes InfiniBand when an InfiniBand port is
        Active, otherwise Ethernet (RoCE).
    type: str
    choices: [auto, InfiniBand, Ethernet]
    default: auto
  hcas:
    description: Only these adapters (names such as V(mlx5_0)); empty for every adapter of the fabric.
    type: list
    elements: str
  exclude_hcas:
    description: Adapters never to use (a storage or management port on the same fabric).
    type: list
    elements: str
  socket_ifname:
    description: Interface for NCCL's bootstrap and socket traffic, written as an exact name; empty leaves it out.
    type: str
  gid_index:
    description: C(NCCL_IB_GID_INDEX) on RoCE; V(auto) is 3, the RoCE v2 IPv4 entry of ConnectX's GID table.
    type: raw
    default: auto
  gdr_level:
    description: C(NCCL_NET_GDR_LEVEL); V(auto) derives it from the topology.
    type: str
    default: auto
  gpudirect:
    description: The GPUDirect RDMA method preflight resolved (peermem, dmabuf or none).
    type: str
    default: none
  collnet:
    description: Set C(NCCL_COLLNET_ENABLE=1) (SHARP).
    type: bool
    default: false
  overrides:
    description: Users' settings, merged last; a null or empty value removes a setting.
    type: dict
"""

EXAMPLES = r"""
- name: Write /etc/nccl.conf
  ansible.builtin.copy:
    content: "{{ __conf.env | dict2items | map(attribute='key') | zip(__conf.env.values()) | map('join', '=')
      | join('\n') }}\n"
    dest: /etc/nccl.conf
    mode: "0644"
  vars:
    __conf: "{{ ansible_facts.infiniband | gpuops.cluster.nccl_conf(ansible_facts.nvidia_gpu, gpudirect='peermem') }}"
"""

RETURN = r"""
_value:
  description:
    - C(env) (name to value, in file order), C(notes) (list of str), C(hcas) (the ports used) and
      C(warnings) (each HCA nccl_hcas names that has no Active compute port; also shown as warnings).
  type: dict
  sample:
    env: {NCCL_IB_HCA: "=mlx5_0:1,mlx5_3:1", NCCL_NET_GDR_LEVEL: PIX}
    notes: ["compute fabric: InfiniBand, 2 Active ports"]
    hcas: ["mlx5_0:1", "mlx5_3:1"]
"""

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display
from ansible_collections.gpuops.cluster.plugins.module_utils.nccl import NcclConfigError, settings


def nccl_conf(infiniband, nvidia_gpu, **options):
    try:
        result = settings(infiniband, nvidia_gpu, **options)
    except NcclConfigError as err:
        raise AnsibleFilterError(str(err)) from err
    for warning in result["warnings"]:
        Display().warning(warning)
    return result


class FilterModule:
    def filters(self):
        return {"nccl_conf": nccl_conf}
