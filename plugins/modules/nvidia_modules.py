#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_modules
short_description: Say, per kernel, whether the NVIDIA driver's modules are there and would load under Secure Boot
version_added: 1.1.0
description:
  - Looks for the NVIDIA driver's kernel modules under C(/lib/modules/<kernel>) for each of
    O(kernels) (DKMS's C(updates/dkms) first, as modprobe does, then the rest of the tree, where
    Canonical's precompiled modules are) and reads each with C(modinfo), changing nothing.
  - A kernel is good when every module is there, carries the driver version O(version) and, with
    O(certificate), is signed by that certificate (C(modinfo)'s C(signer) is its common name and
    C(sig_key) its serial), which is what the kernel checks under Secure Boot once the certificate
    is enrolled. A module DKMS signed with its own key, or left unsigned, is reported with the
    signer it has.
  - The modules are those the driver's C(dkms.conf) builds (C(/usr/src/nvidia-<version>/dkms.conf),
    C(BUILT_MODULE_NAME)), else O(modules).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.root
options:
  kernels:
    description: The kernel releases to check, such as V(6.1.0-57-amd64).
    type: list
    elements: str
    required: true
  version:
    description: The driver version every module must carry, such as V(580.95.05); empty checks none.
    type: str
    default: ""
  certificate:
    description:
      - The signing certificate (DER or PEM) every module must be signed with; empty checks no signature.
    type: path
  installed:
    description:
      - Also check every kernel installed on the node (C(/lib/modules/<kernel>/modules.order), which a kernel
        image package ships, or C(/boot/vmlinuz-<kernel>)), after O(kernels).
    type: bool
    default: false
  modules:
    description: The modules to look for where the driver's dkms.conf does not say.
    type: list
    elements: str
    default: [nvidia, nvidia-modeset, nvidia-drm, nvidia-uvm]
seealso:
  - module: gpuops.cluster.mok_enrolment
  - module: gpuops.cluster.driver_state
"""

EXAMPLES = r"""
- name: Check that the modules for the next kernel are built and signed with the node's key
  gpuops.cluster.nvidia_modules:
    kernels: [6.1.0-57-amd64]
    version: 580.95.05
    certificate: /var/lib/gpuops/mok/mok.der
  register: modules

- name: Refuse a reboot into a kernel without them
  ansible.builtin.assert:
    that: modules.broken | length == 0
    fail_msg: "{{ modules.kernels | map(attribute='problems') | flatten | join('; ') }}"
"""

RETURN = r"""
kernels:
  description:
    - One entry per kernel of O(kernels), in their order, then per installed kernel (O(installed)).
    - C(kernel); C(headers) (C(/lib/modules/<kernel>/build) exists, so DKMS can build for it); C(modules), each
      with C(name), C(path), C(version), C(signer) and C(sig_key) as modinfo printed them; C(problems),
      sentences; C(ok).
  returned: always
  type: list
  elements: dict
  sample:
    - kernel: 6.1.0-57-amd64
      headers: true
      modules: [{name: nvidia, path: /lib/modules/6.1.0-57-amd64/updates/dkms/nvidia.ko, version: 580.95.05,
                 signer: sb-l40s gpuops.cluster module signing, sig_key: "1F:70:3A:5B"}]
      problems: []
      ok: true
broken:
  description: The kernels of O(kernels) whose modules are missing, of another version, or not signed as asked.
  returned: always
  type: list
  elements: str
certificate:
  description: The certificate's C(common_name) and C(serial) (hex, no colons), or null without O(certificate).
  returned: always
  type: dict
  sample: {common_name: sb-l40s gpuops.cluster module signing, serial: 1F703A5B5798A430C8C21B34254749BE5875B966}
installed_kernels:
  description: The kernels installed on the node, oldest first (read with O(installed) only; empty otherwise).
  returned: always
  type: list
  elements: str
names:
  description: The modules looked for.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.host import ROOT_OPTION, Host
from ansible_collections.gpuops.cluster.plugins.module_utils.kernel_modules import (
    installed_kernels,
    read_kernel_modules,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.secureboot import DEFAULT_MODULES


def main():
    module = AnsibleModule(
        argument_spec={
            "kernels": {"type": "list", "elements": "str", "required": True},
            "version": {"type": "str", "default": ""},
            "installed": {"type": "bool", "default": False},
            "certificate": {"type": "path"},
            "modules": {"type": "list", "elements": "str", "default": list(DEFAULT_MODULES)},
            **ROOT_OPTION,
        },
        supports_check_mode=True,
    )
    params = module.params
    for kernel in params["kernels"]:
        if not kernel or "/" in kernel or kernel.startswith("."):
            module.fail_json(msg=f"kernels: {kernel!r} is not a kernel release such as 6.1.0-57-amd64 (uname -r).")
    host = Host(module)
    installed = installed_kernels(host) if params["installed"] else []
    kernels = list(dict.fromkeys([*params["kernels"], *installed]))
    result = read_kernel_modules(module, host, kernels, params["version"], params["certificate"], params["modules"])
    module.exit_json(changed=False, installed_kernels=installed, **result)


if __name__ == "__main__":
    main()
