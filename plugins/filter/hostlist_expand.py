# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: hostlist_expand
short_description: Every host name of a Slurm hostlist expression
version_added: 1.0.0
description:
  - Expands C(node[01-04,07]) to C(node01) ... C(node07) with Slurm's semantics - several ranges in
    one bracket, zero padding from a range's first bound, several bracketed parts in one name (their
    product), several comma-separated expressions. Order is kept and duplicates are dropped.
  - A bad expression (unbalanced or nested brackets, a range that runs backwards, something that is
    not a number) fails with the expression and what is wrong.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: A hostlist expression, or a list of them.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Every host of an expression
  ansible.builtin.debug:
    msg: "{{ 'rack[1-2]-gpu[01-02]' | gpuops.cluster.hostlist_expand }}"
    # [rack1-gpu01, rack1-gpu02, rack2-gpu01, rack2-gpu02]
"""

RETURN = r"""
_value:
  description: The host names.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import (
    HostlistError,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import (
    hostlist_expand as _hostlist_expand,
)


def hostlist_expand(value):
    try:
        return _hostlist_expand(value)
    except HostlistError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    def filters(self):
        return {"hostlist_expand": hostlist_expand}
