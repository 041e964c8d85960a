# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: slurm_node_spec
short_description: Describe a node for slurm.conf and gres.conf from its hardware facts
version_added: 1.0.0
description:
  - Reads the output of C(lscpu -p=CPU,CORE,SOCKET,NODE) and the C(nvidia_gpu) facts of
    M(gpuops.cluster.gpu_facts) and returns the values of the node's slurm.conf line and its
    gres.conf records.
  - CPUs, Boards (always 1), SocketsPerBoard, CoresPerSocket and ThreadsPerCore come from lscpu.
    RealMemory is the memory less a headroom (the larger of a percentage and a minimum).
  - Each GPU becomes one gres.conf record in PCI bus order (Slurm's device numbering), with C(File)
    from its minor number, C(Cores) from its CPU affinity converted to Slurm's logical core indices
    (core k of the s-th socket is s x CoresPerSocket + k, the cores of a socket ordered by their
    lowest CPU), and C(Links) from the NVLink matrix (NV<n> counts n, the GPU itself -1).
  - C(Cores) is left out where the affinity is unknown or covers every core, C(Links) where no GPUs
    share NVLinks.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The standard output of C(lscpu -p=CPU,CORE,SOCKET,NODE).
    type: str
    required: true
  nvidia_gpu:
    description: The C(nvidia_gpu) facts; empty for a node without GPUs.
    type: dict
    required: true
  memtotal_mib:
    description: The node's memory in MiB (C(ansible_facts.memtotal_mb)).
    type: int
    required: true
  reserve_percent:
    description: Headroom, as a percentage of the memory.
    type: float
    default: 5
  reserve_min_mib:
    description: Headroom at least, in MiB.
    type: int
    default: 1024
  gres_type:
    description: The gres type of the GPUs; defaults to the facts' C(slug) (C(h100)).
    type: str
"""

EXAMPLES = r"""
- name: Describe this node
  ansible.builtin.set_fact:
    slurm_node: >-
      {{ __lscpu.stdout | gpuops.cluster.slurm_node_spec(ansible_facts.nvidia_gpu,
         ansible_facts.memtotal_mb, reserve_percent=5, reserve_min_mib=4096) }}
"""

RETURN = r"""
_value:
  description: The node description.
  type: dict
  contains:
    cpus: {description: CPUs (hardware threads), type: int}
    boards: {description: Always 1, type: int}
    sockets_per_board: {description: Sockets, type: int}
    cores_per_socket: {description: Cores per socket, type: int}
    threads_per_core: {description: Threads per core, type: int}
    real_memory: {description: RealMemory in MiB, type: int}
    gres: {description: "The node's Gres value (gpu:h100:8), empty without GPUs", type: str}
    gres_devices:
      description: One record per GPU with C(file), C(type), and where they apply C(cores) and C(links).
      type: list
      elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import SlurmSpecError, node_spec


def slurm_node_spec(lscpu, nvidia_gpu, memtotal_mib, *, reserve_percent=5, reserve_min_mib=1024, gres_type=None):
    try:
        return node_spec(
            lscpu,
            nvidia_gpu,
            memtotal_mib,
            reserve_percent=reserve_percent,
            reserve_min_mib=reserve_min_mib,
            gres_type=gres_type or None,
        )
    except (ParseError, SlurmSpecError) as err:
        raise AnsibleFilterError(f"slurm_node_spec: {err}") from err


class FilterModule:
    def filters(self):
        return {"slurm_node_spec": slurm_node_spec}
