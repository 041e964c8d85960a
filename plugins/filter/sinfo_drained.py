# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: sinfo_drained
short_description: The drained Slurm nodes and their reasons, from sinfo
version_added: 1.0.0
description:
  - The nodes that are drained or draining, with their reason, read from
    C(sinfo -h -N -o '%N|%t|%E'); the validation report reads drain reasons the same way.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The output of C(sinfo -h -N -o '%N|%t|%E'), or empty.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Name the nodes validation drained
  ansible.builtin.debug:
    msg: "{{ sinfo.stdout | gpuops.cluster.sinfo_drained | dict2items | selectattr('value', 'match', 'gpuops-') }}"
"""

RETURN = r"""
_value:
  description: Slurm node name to its drain reason.
  type: dict
"""

from ansible_collections.gpuops.cluster.plugins.module_utils.validation import parse_sinfo_reasons


def sinfo_drained(text):
    return parse_sinfo_reasons(text or "")


class FilterModule:
    def filters(self):
        return {"sinfo_drained": sinfo_drained}
