# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: mig_parted_config
short_description: MIG layouts as one nvidia-mig-parted config
version_added: 1.0.0
description:
  - Writes one or more layouts (the mig role's C(mig_layout)) as an nvidia-mig-parted v1 config,
    C(all-disabled) included; the host's MIG manager file and the GPU Operator's custom MIG
    ConfigMap are both written from it.
  - Two different layouts under one name are refused.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: A layout (a dict with C(name) and C(gpus)) or a list of them.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Write the MIG manager's config
  ansible.builtin.copy:
    content: "{{ mig_layout | gpuops.cluster.mig_parted_config | to_nice_yaml(indent=2) }}"
    dest: /etc/nvidia-mig-manager/gpuops-config.yaml
    mode: "0644"
"""

RETURN = r"""
_value:
  description:
    - The config, C(version) v1 and C(mig-configs) (name to a list of entries with C(devices),
      C(mig-enabled) and C(mig-devices)).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.mig import parted_config


def mig_parted_config(layouts):
    try:
        return parted_config(layouts)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"mig_parted_config": mig_parted_config}
