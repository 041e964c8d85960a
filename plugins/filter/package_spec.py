# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: package_spec
short_description: Turn a resolved package into the name the package manager takes
version_added: 1.0.0
description:
  - Writes one of the C(packages) entries of M(gpuops.cluster.stack_check)'s C(resolved) result
    (C(name) and C(version), the version possibly null or ending in a wildcard) as
    C(name=version) for apt or C(name-version) for dnf, or the bare name without a version.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: A dict with C(name) and C(version).
    type: dict
    required: true
  os_family:
    description: V(Debian) for apt, V(RedHat) for dnf.
    type: str
    default: Debian
"""

EXAMPLES = r"""
- name: Install the resolved cuDNN packages
  ansible.builtin.apt:
    name: "{{ gpuops_stack.packages.cudnn | map('gpuops.cluster.package_spec', 'Debian') | list }}"
"""

RETURN = r"""
_value:
  description: The package spec, such as C(libcudnn9-cuda-12=9.10.2.21-1).
  type: str
"""

from ansible.errors import AnsibleFilterError


def package_spec(package, os_family="Debian"):
    if not isinstance(package, dict) or not package.get("name"):
        raise AnsibleFilterError(f"package_spec takes a dict with a name and a version, not {package!r}")
    version = package.get("version")
    if not version:
        return package["name"]
    if os_family == "RedHat":
        return "{}-{}".format(package["name"], version.split(":", 1)[-1])
    return "{}={}".format(package["name"], version)


class FilterModule:
    def filters(self):
        return {"package_spec": package_spec}
