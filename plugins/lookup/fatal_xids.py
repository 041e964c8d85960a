# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: fatal_xids
short_description: The Xid errors that take a GPU out of service
version_added: 1.1.0
description:
  - The Xid numbers validation, C(gpuops-health) and the dcgm role's alert rules treat as fatal. Those
    are the Xids whose immediate action in NVIDIA's Xid catalogue is a GPU reset, a machine restart or
    a check of the board's power, and the Xids the catalogue's archive lists for GPUs before Ampere.
    Every other Xid concerns one application or is informational, a warning.
  - One list, kept in the collection's validation code. This lookup reads it, so that a rule file or
    a template never keeps a copy of its own.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options: {}
"""

EXAMPLES = r"""
- name: A PromQL regular expression of the fatal Xids
  ansible.builtin.debug:
    msg: "{{ query('gpuops.cluster.fatal_xids') | join('|') }}"
"""

RETURN = r"""
_raw:
  description: The fatal Xid numbers, ascending.
  type: list
  elements: int
"""

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible_collections.gpuops.cluster.plugins.module_utils.validation import FATAL_XIDS


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleError(
                f"gpuops.cluster.fatal_xids takes no terms (got {terms!r}): use query('gpuops.cluster.fatal_xids')"
            )
        self.set_options(var_options=variables, direct=kwargs)
        return sorted(FATAL_XIDS)
