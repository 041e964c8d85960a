#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: package_hold
short_description: Hold or release a list of Debian packages in one call
version_added: 1.0.0
description:
  - Reads dpkg's status file once, and sets the selections that differ with one
    C(dpkg --set-selections); packages already in the wanted state are not touched.
  - One call for a whole package set, where M(ansible.builtin.dpkg_selections) takes one call per
    package (a loop of eight on an NVIDIA driver).
  - A package dpkg does not know (not installed) cannot be held; the module fails and names it,
    since a hold that dpkg ignores would look set and protect nothing. In check mode it is
    reported as a change with a warning instead, because the install before it was only simulated.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.dpkg
  - gpuops.cluster.root
options:
  name:
    description: The packages, by name (C(nvidia-driver-580-open)), without version or architecture.
    type: list
    elements: str
    required: true
  state:
    description:
      - V(held) keeps apt from upgrading, downgrading or removing them (C(apt-mark hold)).
      - V(released) gives them back to apt (C(apt-mark unhold)).
    type: str
    choices: [held, released]
    default: held
seealso:
  - module: ansible.builtin.dpkg_selections
"""

EXAMPLES = r"""
- name: Hold cuDNN at its version
  gpuops.cluster.package_hold:
    name: [libcudnn9-cuda-12, libcudnn9-dev-cuda-12]

- name: Release the old branch's packages before removing them
  gpuops.cluster.package_hold:
    name: "{{ old_driver_packages }}"
    state: released
"""

RETURN = r"""
changed_packages:
  description: The packages whose selection this call changed (or would change, in check mode).
  returned: always
  type: list
  elements: str
  sample: [libnccl2, libnccl-dev]
held:
  description: The packages of O(name) that are held afterwards.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.dpkg import (
    NAME,
    package_states,
    selection_changes,
    set_selections,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.host import ROOT_OPTION, Host


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "list", "elements": "str", "required": True},
            "state": {"type": "str", "choices": ["held", "released"], "default": "held"},
            **ROOT_OPTION,
        },
        supports_check_mode=True,
    )
    names = module.params["name"]
    state = module.params["state"]
    bad = [name for name in names if not NAME.fullmatch(name or "")]
    if bad:
        module.fail_json(
            msg="name lists {}, which are not Debian package names: give bare names such as libnccl2, without "
            "a version (=2.26.5-1) or an architecture (:amd64).".format(", ".join(repr(b) for b in bad))
        )
    host = Host(module)
    status = host.read("/var/lib/dpkg/status")
    if status is None:
        module.fail_json(
            msg="{} is missing: package_hold works on dpkg systems only.".format(host.path("/var/lib/dpkg/status"))
        )
    states = package_states(status, names)
    current = {name: entry["selection"] for name, entry in states.items()}
    target = "hold" if state == "held" else "install"
    change = selection_changes(states, names, target)
    unknown = list(dict.fromkeys(name for name in names if name not in current))

    if unknown and state == "held":
        message = "cannot hold {}: dpkg does not know {} (not installed). Install {} before holding {}.".format(
            ", ".join(unknown),
            "it" if len(unknown) == 1 else "them",
            "it" if len(unknown) == 1 else "them",
            "it" if len(unknown) == 1 else "them",
        )
        if not module.check_mode:
            module.fail_json(msg=message, unknown=unknown)
        module.warn(message + " Check mode: reported as a change, since the install before it was simulated.")
        change = change + unknown

    after = dict(current, **{name: target for name in change})
    result = {
        "changed": bool(change),
        "changed_packages": change,
        "held": sorted(name for name in dict.fromkeys(names) if after.get(name) == "hold"),
    }
    if module._diff:
        result["diff"] = {
            "before": "".join(f"{name} {current.get(name, 'unknown')}\n" for name in change),
            "after": "".join(f"{name} {target}\n" for name in change),
        }
    if change and not module.check_mode:
        set_selections(module, lambda: host.read("/var/lib/dpkg/status"), change, target)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
