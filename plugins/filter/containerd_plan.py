# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: containerd_plan
short_description: The configuration version and layout a node's containerd files must have
version_added: 1.0.0
description:
  - From C(containerd --version) and the root configuration, the version every drop-in must carry
    and where the CRI runtimes go, with the reason.
  - The installed containerd reads configuration version 2 (1.x), 3 (2.0 to 2.2) or 4 (2.3 and
    later). A drop-in takes the root configuration's version - containerd 2.x refuses a drop-in of a
    higher version than the root, and containerd 1.6 silently ignores the plugin tables of one,
    dropping the nvidia runtime. A root configuration without a version line, or of a version the
    installed containerd cannot read, is a problem to fix by hand, never overwritten.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The output of C(containerd --version).
    type: str
    required: true
  root_text:
    description: The root configuration's text; omit or null when there is none.
    type: str
  root_path:
    description: Its path, for the messages.
    type: str
    default: /etc/containerd/config.toml
  dropin_glob:
    description: The drop-ins' glob the root configuration must import, for RV(_value.imports_line).
    type: str
"""

EXAMPLES = r"""
- name: Work out the containerd configuration version
  ansible.builtin.set_fact:
    __plan: "{{ __version.stdout | gpuops.cluster.containerd_plan(root_text=__root_text) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    version:
      description: The configuration version of the installed containerd.
      type: int
    reason:
      description: Why.
      type: str
    root_version:
      description: The root configuration's version; null without one.
      type: int
    dropin_version:
      description: The version a drop-in must carry.
      type: int
    cri_plugin:
      description: The plugin table of the CRI runtimes at that version.
      type: str
    cdi:
      description: Whether the installed containerd can inject CDI devices (1.7 and later).
      type: bool
    imports:
      description:
        - The root configuration's imports, as containerd reads them (basic or literal TOML strings);
          empty without one.
      type: list
      elements: str
    imports_line:
      description:
        - The root configuration's imports line to write, its list with O(dropin_glob) added when
          missing. A list over several lines is a problem instead (it is replaced in place).
      type: str
    problems:
      description: What must be fixed by hand first, one sentence each; empty when none.
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.k8s import containerd_plan as plan


def containerd_plan(version_output, root_text=None, root_path="/etc/containerd/config.toml", dropin_glob=None):
    try:
        return plan(version_output, root_text, root_path, dropin_glob)
    except ValueError as exc:
        raise AnsibleFilterError(f"containerd --version: {exc}; is this containerd?") from None


class FilterModule:
    def filters(self):
        return {"containerd_plan": containerd_plan}
