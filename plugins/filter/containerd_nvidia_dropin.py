# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: containerd_nvidia_dropin
short_description: The nvidia runtime drop-in of containerd, carrying the root config's CRI table
version_added: 1.0.0
description:
  - Writes the drop-in at the version of the C(containerd_plan) filter's answer, with the root
    configuration's whole CRI plugin table and the nvidia runtime added to it (and, optionally, as
    the default runtime).
  - containerd 1.x merges an imported file plugin by plugin, so the drop-in's CRI table replaces the
    root's whole; without the root's settings in it, runc's C(SystemdCgroup), the CNI folders and
    the rest of the root's CRI settings silently go back to containerd's defaults.
  - The nvidia runtime takes runc's cgroup driver from that table.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The root configuration's text (empty when there is none).
    type: str
    required: true
  plan:
    description: The C(containerd_plan) filter's answer for the node.
    type: dict
    required: true
  default_runtime:
    description: Make nvidia the CRI's default runtime.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Write the nvidia runtime drop-in
  ansible.builtin.copy:
    content: "{{ (root_text | gpuops.cluster.containerd_nvidia_dropin(plan=__plan)).text }}"
    dest: /etc/containerd/conf.d/99-nvidia.toml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The drop-in.
  type: dict
  contains:
    text:
      description: Its TOML.
      type: str
    systemd_cgroup:
      description: Whether runc (and so the nvidia runtime) uses the systemd cgroup driver.
      type: bool
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.k8s import nvidia_dropin


def containerd_nvidia_dropin(root_text, plan, default_runtime=False):
    try:
        text, systemd = nvidia_dropin(root_text, plan, default_runtime)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return {"text": text, "systemd_cgroup": systemd}


class FilterModule:
    def filters(self):
        return {"containerd_nvidia_dropin": containerd_nvidia_dropin}
