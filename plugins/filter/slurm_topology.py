# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: slurm_topology
short_description: Slurm's topology plugin and topology.conf from the fleet's NVLink domains or a switch map
version_added: 1.1.0
description:
  - Takes what the fleet state says of the compute nodes (the C(slurm) section's answer of
    P(gpuops.cluster.fleet_files#filter), or C(files) of M(gpuops.cluster.fleet_state)) and decides the cluster's
    topology for Slurm.
  - C(block) writes one C(BlockName) per multi-node NVLink domain (the nodes whose GPUs registered in one cluster
    UUID and clique, an NVL72 rack's trays), for Slurm's C(topology/block) (Slurm 23.11 and later); blocks of
    unequal node counts get an explicit C(BlockSizes), since Slurm takes the first block's count as the base and
    refuses a smaller block after it.
  - C(tree) writes the declared switches as C(topology/tree)'s C(SwitchName) lines; every compute node must hang
    off one leaf, each switch has one parent, and a switch lists nodes or switches, not both.
  - C(auto) takes C(block) where a compute node registered in an NVLink domain, else C(tree) where switches are
    declared, else no topology. C(none) writes none.
  - A domain of more than 72 GPUs (the largest NVLink rack, NVL72), an unknown node or switch in the map, a node
    on two leaves or on none, and a loop of switches are refused, naming the variable and the fix.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The C(slurm) section's files (with C(domains) and C(hostnames)).
    type: dict
    required: true
  mode:
    description: C(auto), C(none), C(block) or C(tree).
    type: str
    default: auto
  switches:
    description:
      - The switch map, each a mapping with C(name) and either C(nodes) (inventory names, a list or a hostlist
        expression) or C(switches) (the names of the switches below it).
    type: list
    elements: dict
    default: []
  discover:
    description:
      - Add the InfiniBand leaves the nodes read (the files' C(ib_leaves), recorded by the slurm role's discovery)
        to the switch map - one leaf per group of nodes that share a leaf switch, and one switch above them.
    type: bool
    default: false
    version_added: 1.2.0
"""

EXAMPLES = r"""
- name: Decide the topology
  ansible.builtin.set_fact:
    topology: >-
      {{ fleet_result.files | gpuops.cluster.slurm_topology('tree',
         [{'name': 'leaf1', 'nodes': 'gpu[01-18]'}, {'name': 'leaf2', 'nodes': 'gpu[19-36]'},
          {'name': 'spine', 'switches': ['leaf1', 'leaf2']}]) }}
  # topology.plugin: topology/tree; topology.lines: SwitchName=leaf1 Nodes=gpu[01-18], ...
"""

RETURN = r"""
_value:
  description:
    - C(plugin) (C(topology/block), C(topology/tree) or None), C(lines) (topology.conf's lines), C(why) (the
      decision in words) and C(outside) (inventory names of the compute nodes outside every block).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import plain_data
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm_topology import TopologyError, topology


def slurm_topology(files, mode="auto", switches=None, discover=False):
    if not isinstance(files, Mapping) or "hostnames" not in files:
        raise AnsibleFilterError(
            "slurm_topology: expected the slurm section's files (fleet_files('slurm'), or fleet_state's files)."
        )
    try:
        return topology(plain_data(files), str(mode), plain_data(switches or []), bool(discover))
    except TopologyError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    def filters(self):
        return {"slurm_topology": slurm_topology}
