# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_files
short_description: What the cluster-wide files say of a fleet-state section's nodes
version_added: 1.1.0
description:
  - Takes a section's nodes (inventory name to the section's data, the C(nodes) that M(gpuops.cluster.fleet_state)
    returns) and works out, once, what the cluster-wide files need of them.
  - For C(slurm), the node lines of slurm.conf and gres.conf. C(groups) (one entry per distinct node
    description, C(nodes) a hostlist expression of host names, and C(spec)), C(gpu_types) (the C(gres/gpu:<type>)
    names, sorted), C(hostnames) (inventory name to host name) and C(domains) (the multi-node NVLink domains of
    the nodes, each with C(name), C(cluster_uuid), C(clique_id), C(members), C(nodes), C(count) and C(gpus)).
  - For C(scrape), each job's Prometheus file_sd entries (a C(targets) list and C(labels) with C(node)), in node
    order. For C(imex), C(domains) (each NVLink domain with C(cluster_uuid), C(clique_id), C(members) and C(nodes),
    its IMEX node list). For C(validation), an empty mapping.
  - M(gpuops.cluster.fleet_state) returns the same answer as its C(files) key; this filter gives it where no fleet
    host keeps a state.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: Inventory name to the section's data.
    type: dict
    required: true
  section:
    description: The fleet-state section.
    type: str
    required: true
    choices: [slurm, scrape, validation, imex]
"""

EXAMPLES = r"""
- name: One NodeName line per hardware type
  ansible.builtin.debug:
    msg: "NodeName={{ item.nodes }} CPUs={{ item.spec.cpus }}"
  loop: "{{ (fleet_result.nodes | gpuops.cluster.fleet_files('slurm')).groups }}"
"""

RETURN = r"""
_value:
  description: What the section's files say of its nodes (see the description).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.fleet import SECTIONS, FleetError, check_section, files
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import HostlistError


def fleet_files(nodes, section):
    if not isinstance(nodes, Mapping):
        raise AnsibleFilterError(f"fleet_files: expected inventory name to section data, got {type(nodes).__name__}")
    if section not in SECTIONS:
        raise AnsibleFilterError(
            f"fleet_files: {section!r} is not a fleet-state section; the sections are {', '.join(sorted(SECTIONS))}."
        )
    try:
        for node, data in nodes.items():
            check_section(section, data, node, None)
        return files(section, nodes)
    except (FleetError, HostlistError) as err:
        raise AnsibleFilterError(f"fleet_files: {err}") from err


class FilterModule:
    def filters(self):
        return {"fleet_files": fleet_files}
