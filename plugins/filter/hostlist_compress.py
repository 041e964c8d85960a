# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: hostlist_compress
short_description: Write host names as a Slurm hostlist expression
version_added: 1.0.0
description:
  - Groups names that differ only in their last number into C(prefix[range,...]suffix), as Slurm
    writes them (C(node[01-04,07])). Zero padding is part of a group, so C(node1) and C(node01) stay
    apart, and C(node10) joins C(node01)...C(node09) as C(node[01-10]).
  - Names without a number are kept as they are. The result is sorted by prefix, then by number;
    duplicates are dropped. A string input is expanded first (see P(gpuops.cluster.hostlist_expand#filter)).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: Host names, or a hostlist expression.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: One NodeName line for identical nodes
  ansible.builtin.debug:
    msg: "NodeName={{ ['gpu01', 'gpu02', 'gpu03', 'gpu07'] | gpuops.cluster.hostlist_compress }}"
    # NodeName=gpu[01-03,07]
"""

RETURN = r"""
_value:
  description: The hostlist expression.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import (
    HostlistError,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import (
    hostlist_compress as _hostlist_compress,
)


def hostlist_compress(value):
    try:
        return _hostlist_compress(value)
    except HostlistError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    def filters(self):
        return {"hostlist_compress": hostlist_compress}
