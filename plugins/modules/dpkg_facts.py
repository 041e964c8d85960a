#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: dpkg_facts
short_description: The installed Debian packages as facts, read from dpkg's status file
version_added: 1.0.0
description:
  - Sets C(ansible_facts.packages) in the shape M(ansible.builtin.package_facts) gives (package
    name to a list of C({name, version, arch, source})), for the packages dpkg has installed.
  - Reads C(/var/lib/dpkg/status) only. M(ansible.builtin.package_facts) opens apt's cache through
    python-apt for the same answer, about 1.5 s per call on a loaded node; the roles read the
    packages several times per run.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.root
seealso:
  - module: ansible.builtin.package_facts
"""

EXAMPLES = r"""
- name: Read the installed packages
  gpuops.cluster.dpkg_facts:

- name: Remove DCGM 3 where it is installed
  gpuops.cluster.apt_packages:
    name: [datacenter-gpu-manager]
    state: absent
  when: "'datacenter-gpu-manager' in ansible_facts.packages"
"""

RETURN = r"""
ansible_facts:
  description: Facts set.
  returned: always
  type: dict
  contains:
    packages:
      description: Installed package name to a list of its installed instances (one per architecture).
      returned: always
      type: dict
      sample: {"libnccl2": [{"name": "libnccl2", "version": "2.26.5-1+cuda12.8", "arch": "amd64", "source": "dpkg"}]}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.dpkg import package_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.host import ROOT_OPTION, Host

STATUS = "/var/lib/dpkg/status"


def main():
    module = AnsibleModule(argument_spec=dict(ROOT_OPTION), supports_check_mode=True)
    host = Host(module)
    status = host.read(STATUS)
    if status is None:
        module.fail_json(
            msg=f"{host.path(STATUS)} is missing: dpkg_facts reads Debian's package database; on other "
            "systems use ansible.builtin.package_facts."
        )
    module.exit_json(changed=False, ansible_facts={"packages": package_facts(status)})


if __name__ == "__main__":
    main()
