# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: arch_name
short_description: A CPU architecture by the name a vendor's packages or repository give it
version_added: 1.2.0
description:
  - Takes the kernel's name for the host's CPU architecture (C(ansible_facts.architecture), V(x86_64) or
    V(aarch64); dpkg's V(amd64) and V(arm64) too) and gives the name one vendor uses for it, from the
    collection's one architecture table.
  - V(debian) - dpkg's (V(amd64), V(arm64)); V(cuda) - the CUDA repository's folder (V(x86_64), V(sbsa));
    V(doca) - DOCA-Host's folder (V(x86_64), V(arm64-sbsa)); V(rpm) - the RPM's (V(x86_64), V(aarch64));
    V(ubuntu_archive) - where Canonical publishes its packages (the ports archive for arm64).
  - Another architecture fails, naming it and the supported ones.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The kernel's name for the architecture.
    type: str
    required: true
  kind:
    description: Whose name to give.
    type: str
    required: true
    choices: [debian, cuda, doca, rpm, ubuntu_archive]
"""

EXAMPLES = r"""
- name: The container toolkit's package architecture on this host
  ansible.builtin.debug:
    msg: "{{ ansible_facts.architecture | gpuops.cluster.arch_name('debian') }}"
"""

RETURN = r"""
_value:
  description: The vendor's name for the architecture, such as C(arm64) or C(sbsa).
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.compat import architecture_names


def arch_name(machine, kind):
    try:
        names = architecture_names(machine)
    except ValueError as err:
        raise AnsibleFilterError(f"arch_name: {err}") from None
    if kind not in names:
        raise AnsibleFilterError(f"arch_name: {kind!r} is not one of {', '.join(names)}.")
    return names[kind]


class FilterModule:
    def filters(self):
        return {"arch_name": arch_name}
