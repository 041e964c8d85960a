#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: declared_facts
short_description: The facts of a host that cannot be reached, from what the inventory declares of it
version_added: 1.1.0
description:
  - For C(playbooks/bundle.yml) on a connected host that does not reach the cluster. Turns the
    inventory's C(bundle_hardware) of a host (its distribution, architecture, kernel and its GPUs,
    NVSwitches and HCAs as PCI device IDs) into the facts site.yml reads on the host itself, so that
    the stack resolves as it will there.
  - C(nvidia_gpu) is built as M(gpuops.cluster.gpu_facts) builds it before a driver is in (from the
    PCI bus), with the same device tables; the packages are those of a fresh node.
  - Run it with C(delegate_to) localhost; the facts go to the inventory host.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
options:
  hardware:
    description:
      - The host's C(bundle_hardware).
      - C(distribution) (C(Debian) or C(Ubuntu)), C(distribution_version) (C("12"), C("13"),
        C("22.04"), C("24.04")), C(architecture) (C(x86_64) or C(aarch64)) and C(kernel) (C(uname -r)).
      - "C(gpus) and C(hcas), the count of each PCI device ID as C(lspci -nn) prints it
        (C({'10de:2330': 8}), C({'15b3:1021': 8})), and C(nvswitches), a count."
    type: dict
    required: true
  ubuntu_mirror:
    description:
      - The Ubuntu archive whose C(Packages) files tell a declared Ubuntu host's Canonical driver packages
        (returned as C(gpuops_package_indexes)); empty takes C(http://archive.ubuntu.com/ubuntu), or
        C(http://ports.ubuntu.com/ubuntu-ports) for C(aarch64).
    type: str
    default: ""
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
seealso:
  - module: gpuops.cluster.gpu_facts
  - module: gpuops.cluster.bundle_manifest
"""

EXAMPLES = r"""
- name: Take the declared hardware of a host this host does not reach
  gpuops.cluster.declared_facts:
    hardware:
      distribution: Ubuntu
      distribution_version: "24.04"
      architecture: x86_64
      kernel: 6.8.0-60-generic
      gpus: {"10de:2330": 8}
      nvswitches: 4
      hcas: {"15b3:1021": 8}
  delegate_to: localhost
"""

RETURN = r"""
ansible_facts:
  description: The platform facts site.yml reads, C(nvidia_gpu), and empty C(packages) and C(infiniband).
  returned: success
  type: dict
  contains:
    nvidia_gpu:
      description: As M(gpuops.cluster.gpu_facts) returns it, from the declared PCI devices.
      type: dict
    distribution:
      description: The declared distribution.
      type: str
    distribution_release:
      description: Its release's code name (C(noble)).
      type: str
    gpuops_package_indexes:
      description: For Ubuntu, the archive's C(Packages) files Canonical's driver packages are read from.
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils import bundle
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify


def main():
    module = AnsibleModule(
        argument_spec={"hardware": {"type": "dict", "required": True}, "ubuntu_mirror": {"type": "str", "default": ""}},
        supports_check_mode=True,
    )
    hardware = module.params["hardware"]
    try:
        facts = bundle.declared_platform(hardware)
        facts["nvidia_gpu"] = build_gpu_facts(classify(bundle.declared_devices(hardware)))
    except bundle.BundleError as err:
        module.fail_json(msg=f"{err} (the host's bundle_hardware in the inventory)")
    facts.update(
        packages={},
        infiniband={},
        gpuops_declared=True,
        gpuops_package_indexes=bundle.ubuntu_indexes(facts, module.params["ubuntu_mirror"]),
    )
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()
