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

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import parse_or_fail, run
from ansible_collections.gpuops.cluster.plugins.module_utils.host import ROOT_OPTION, Host
from ansible_collections.gpuops.cluster.plugins.module_utils.secureboot import (
    MODULE_SUFFIXES,
    dkms_module_names,
    module_key,
    module_problems,
    parse_modinfo,
    parse_openssl_x509,
)

# Folders of /lib/modules/<kernel> modprobe prefers (depmod's default search order): DKMS's first.
_FIRST = ("updates", "extra")


def _module_files(host, kernel, wanted):
    """``{module_key: path}`` of the wanted modules' files under /lib/modules/<kernel>."""
    top = host.path(f"/lib/modules/{kernel}")
    found = {}
    if not os.path.isdir(top):
        return found
    walked = []
    for current, folders, files in os.walk(top):
        folders[:] = sorted(f for f in folders if f not in ("build", "source"))
        walked.append((current, sorted(files)))
    # depmod's order: updates/ and extra/ before the kernel's own tree.
    walked.sort(key=lambda item: (not os.path.relpath(item[0], top).startswith(_FIRST), item[0]))
    for current, files in walked:
        for name in files:
            for suffix in MODULE_SUFFIXES:
                if name.endswith(suffix):
                    key = module_key(name[: -len(suffix)])
                    if key in wanted and key not in found:
                        found[key] = os.path.join(current, name)
    return found


def _release_key(release):
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"([0-9]+)", release) if part]


def installed_kernels(host):
    """Kernels with an image on the node, oldest first."""
    found = {
        name for name in host.listdir("/lib/modules") if os.path.exists(host.path(f"/lib/modules/{name}/modules.order"))
    }
    found |= {name.split("vmlinuz-", 1)[1] for name in host.listdir("/boot") if name.startswith("vmlinuz-")}
    return sorted(found, key=_release_key)


def _certificate(module, host, path):
    openssl = module.get_bin_path("openssl", required=True)
    data = host.read(path, binary=True)
    if data is None:
        module.fail_json(msg=f"certificate: {path} cannot be read; give the signing certificate's path (DER or PEM).")
    form = "PEM" if data.lstrip().startswith(b"-----BEGIN") else "DER"
    argv = [openssl, "x509", "-inform", form, "-in", host.path(path), "-noout", "-serial", "-subject"]
    argv += ["-nameopt", "multiline"]
    rc, out, err = run(module, argv)
    if rc != 0:
        module.fail_json(msg=f"`{' '.join(argv)}` failed (rc {rc}): {err.strip()}; {path} is not an X.509 certificate.")
    return parse_or_fail(module, parse_openssl_x509, out, argv)


def main():
    module = AnsibleModule(
        argument_spec={
            "kernels": {"type": "list", "elements": "str", "required": True},
            "version": {"type": "str", "default": ""},
            "installed": {"type": "bool", "default": False},
            "certificate": {"type": "path"},
            "modules": {
                "type": "list",
                "elements": "str",
                "default": ["nvidia", "nvidia-modeset", "nvidia-drm", "nvidia-uvm"],
            },
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
    wanted_kernels = list(dict.fromkeys([*params["kernels"], *installed]))
    version = params["version"]
    conf = host.read(f"/usr/src/nvidia-{version}/dkms.conf") if version else None
    names = list(dkms_module_names(conf) or params["modules"])
    certificate = _certificate(module, host, params["certificate"]) if params["certificate"] else None
    modinfo = module.get_bin_path("modinfo", opt_dirs=["/sbin", "/usr/sbin"])
    wanted = {module_key(name) for name in names}
    kernels = []
    for kernel in wanted_kernels:
        files = _module_files(host, kernel, wanted)
        found, modules = {}, []
        for key, path in sorted(files.items()):
            if modinfo is None:
                module.fail_json(
                    msg="modinfo is not installed (package kmod); it reads the modules' versions and signers"
                )
            argv = [modinfo, path]
            rc, out, err = run(module, argv)
            if rc != 0:
                module.fail_json(msg=f"`{' '.join(argv)}` failed (rc {rc}): {err.strip()}")
            info = parse_or_fail(module, parse_modinfo, out, argv)
            shown = "/" + os.path.relpath(path, host.root) if host.root != "/" else path
            found[key] = {"path": shown, "modinfo": info}
            modules.append(
                {
                    "name": key.replace("_", "-"),
                    "path": shown,
                    "version": info.get("version"),
                    "signer": info.get("signer"),
                    "sig_key": info.get("sig_key"),
                }
            )
        problems = module_problems(kernel, found, names, version or None, certificate)
        kernels.append(
            {
                "kernel": kernel,
                "headers": os.path.exists(host.path(f"/lib/modules/{kernel}/build")),
                "modules": modules,
                "problems": problems,
                "ok": not problems,
            }
        )
    module.exit_json(
        changed=False,
        kernels=kernels,
        broken=[entry["kernel"] for entry in kernels if not entry["ok"]],
        certificate=certificate,
        installed_kernels=installed,
        names=names,
    )


if __name__ == "__main__":
    main()
