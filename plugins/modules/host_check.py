#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: host_check
short_description: Check that a node is ready for the NVIDIA driver install
version_added: 1.0.0
description:
  - Reads the node's state and reports what would break or block the NVIDIA stack's install,
    changing nothing.
  - Kernel headers for the running kernel (installed, or a candidate in the package manager's
    lists), free disk space, C(nouveau) loaded. Secure Boot's state is read and returned; the
    C(nvidia_driver) role's input rules refuse DKMS-built modules under it without module signing
    (C(nvidia_driver_secure_boot=sign)).
  - Leftovers of earlier installs. CUDA repository keys in C(apt-key) keyrings. NVIDIA or Mellanox
    apt sources without C(signed-by), which make apt refuse the same URI with a keyring.
    C(nvidia-docker2). Driver packages of more than one branch.
  - Returns the observations and a list of problems in the form M(gpuops.cluster.stack_check) uses;
    it does not fail on them. The C(preflight) role merges both lists and fails once.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.root
options:
  kernel:
    description: Kernel release to check headers for; empty means the running kernel.
    type: str
  kernel_headers:
    description: Severity of missing kernel headers (DKMS builds the driver's modules with them).
    type: str
    choices: [error, warning, ignore]
    default: error
  min_free_gib:
    description: Free space each path needs, in GiB. A missing path is measured at its nearest existing parent.
    type: dict
    default: {/usr: 12, /var: 4}
  nouveau:
    description: Severity of a loaded C(nouveau) module (the driver role blacklists it; unloading needs a reboot).
    type: str
    choices: [error, warning]
    default: warning
  dkms:
    description:
      - Whether DKMS builds the NVIDIA modules here. V(false) where they come precompiled and signed
        (Canonical's C(linux-modules-nvidia) packages); then the headers are not needed and
        O(kernel_headers) is not checked.
    type: bool
    default: true
seealso:
  - module: gpuops.cluster.stack_check
"""

EXAMPLES = r"""
- name: Read the node's readiness
  gpuops.cluster.host_check:
    min_free_gib: {/usr: 20, /var: 4}
  register: host

- name: Fail on any error it found
  ansible.builtin.assert:
    that: host.problems | selectattr('severity', 'eq', 'error') | list | length == 0
    fail_msg: "{{ host.problems | gpuops.cluster.problems_report }}"
"""

RETURN = r"""
node:
  description: What the module saw.
  returned: always
  type: dict
  contains:
    kernel:
      description: The kernel release checked.
      type: str
    package_manager:
      description: V(apt), V(dnf) or null.
      type: str
    kernel_headers:
      description: C(package), C(installed) (the module build directory exists) and C(candidate) (version or null).
      type: dict
    secure_boot:
      description: V(enabled), V(disabled) or V(unknown) (no EFI variable, e.g. BIOS boot or a container).
      type: str
    nouveau_loaded:
      description: C(nouveau) is in C(/proc/modules).
      type: bool
    nvidia_loaded:
      description: C(nvidia) is in C(/proc/modules).
      type: bool
    packages:
      description: Installed NVIDIA, CUDA, cuDNN, NCCL, DCGM and Mellanox packages with their versions.
      type: dict
    driver_branches:
      description: Installed driver packages per branch.
      type: dict
      sample: {"570": [libnvidia-compute-570, nvidia-utils-570]}
    apt_keys:
      description: apt-key keyrings holding a CUDA repository key, with the key IDs.
      type: list
      elements: dict
    unsigned_sources:
      description: NVIDIA/Mellanox apt sources without signed-by (C(file), C(entry)).
      type: list
      elements: dict
    free_gib:
      description: Free GiB per path of O(min_free_gib).
      type: dict
problems:
  description: Problems found, each with C(severity), C(variable), C(message) and C(fix).
  returned: always
  type: list
  elements: dict
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import run
from ansible_collections.gpuops.cluster.plugins.module_utils.host import (
    ROOT_OPTION,
    SECURE_BOOT_VAR,
    Host,
    apt_candidate,
    driver_branches,
    installed_packages,
    keyring_cuda_keys,
    loaded_modules,
    secure_boot_state,
    unsigned_sources,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.stack import problem

RELEVANT = re.compile(r"^(nvidia|libnvidia|cuda|libcudnn|cudnn|libnccl|datacenter-gpu-manager|mlnx|doca|nvlsm)")


def _headers(host, manager, kernel):
    package = ("linux-headers-" if manager == "apt" else "kernel-devel-") + kernel
    info = {"package": package, "installed": os.path.isdir(host.path(f"/lib/modules/{kernel}/build"))}
    info["candidate"] = None
    if info["installed"] or host.root != "/":
        return info
    if manager == "apt":
        tool = host.module.get_bin_path("apt-cache")
        if tool:
            rc, out, _err = run(host.module, [tool, "policy", package])
            info["candidate"] = apt_candidate(out) if rc == 0 else None
    elif manager == "dnf":
        tool = host.module.get_bin_path("dnf")
        if tool:
            rc, out, _err = run(host.module, [tool, "-q", "--cacheonly", "list", "--available", package])
            info["candidate"] = out.split()[1] if rc == 0 and len(out.split()) > 1 else None
    return info


def _apt_leftovers(host):
    keys, sources = [], []
    keyrings = ["/etc/apt/trusted.gpg"] + [
        "/etc/apt/trusted.gpg.d/" + name for name in host.listdir("/etc/apt/trusted.gpg.d")
    ]
    for keyring in keyrings:
        data = host.read(keyring, binary=True)
        found = keyring_cuda_keys(data) if data else []
        if found:
            keys.append({"file": keyring, "keys": found})
    files = ["/etc/apt/sources.list"] + [
        "/etc/apt/sources.list.d/" + name
        for name in host.listdir("/etc/apt/sources.list.d")
        if name.endswith((".list", ".sources"))
    ]
    for path in files:
        text = host.read(path)
        for entry in unsigned_sources(text or "", path):
            sources.append({"file": path, "entry": entry})
    return keys, sources


def _problems(params, node):
    found = []
    headers = node["kernel_headers"]
    headers_missing = not headers["installed"] and not headers["candidate"]
    if params["kernel_headers"] != "ignore" and params["dkms"] and headers_missing:
        found.append(
            problem(
                params["kernel_headers"],
                "preflight_kernel_headers",
                "no kernel headers for kernel {}: {} is not installed and the package lists have "
                "no candidate, so DKMS cannot build the NVIDIA modules.".format(node["kernel"], headers["package"]),
                "boot a kernel whose headers the repositories carry (or add the repository that has {}), then "
                "refresh the package lists.".format(headers["package"]),
            )
        )
    for path, need in sorted(params["min_free_gib"].items()):
        have = node["free_gib"][path]
        if have < float(need):
            found.append(
                problem(
                    "error",
                    "preflight_min_free_gib",
                    f"{path} has {have} GiB free; the stack needs {need} GiB there.",
                    f"free space under {path} (CUDA toolkits take 3 to 7 GiB each), or lower preflight_min_free_gib "
                    "if you know better.",
                )
            )
    if node["nouveau_loaded"]:
        found.append(
            problem(
                params["nouveau"],
                "preflight_nouveau",
                "the nouveau module is loaded; the NVIDIA driver cannot load beside it.",
                "let nvidia_driver blacklist nouveau and reboot (nvidia_driver_reboot: auto), or blacklist it "
                "and reboot by hand.",
            )
        )
    for item in node["unsigned_sources"]:
        found.append(
            problem(
                "error",
                "host",
                "{} has an NVIDIA/Mellanox repository without signed-by ({}); apt refuses a second entry for "
                "the same repository with a keyring.".format(item["file"], item["entry"]),
                "remove that entry (the roles add the repository with a signed-by keyring).",
            )
        )
    for item in node["apt_keys"]:
        found.append(
            problem(
                "warning",
                "host",
                "{} holds CUDA repository key(s) {} added with the deprecated apt-key.".format(
                    item["file"], ", ".join(item["keys"])
                ),
                "remove them (apt-key del {}); the roles use a signed-by keyring.".format(
                    " ".join(k[-8:].lower() for k in item["keys"])
                ),
            )
        )
    if "nvidia-docker2" in node["packages"]:
        found.append(
            problem(
                "warning",
                "host",
                "nvidia-docker2 {} is installed; it is deprecated and conflicts with the current container "
                "toolkit packages.".format(node["packages"]["nvidia-docker2"]),
                "let the container_toolkit role replace it, or purge it (apt-get purge nvidia-docker2).",
            )
        )
    if len(node["driver_branches"]) > 1:
        found.append(
            problem(
                "error",
                "host",
                "driver packages of several branches are installed: {}.".format(
                    "; ".join("R{}: {}".format(b, ", ".join(p)) for b, p in sorted(node["driver_branches"].items()))
                ),
                "purge the packages of the branch you are not using, then run again.",
            )
        )
    return found


def main():
    module = AnsibleModule(
        argument_spec={
            "kernel": {"type": "str"},
            "kernel_headers": {"type": "str", "choices": ["error", "warning", "ignore"], "default": "error"},
            "min_free_gib": {"type": "dict", "default": {"/usr": 12, "/var": 4}},
            "nouveau": {"type": "str", "choices": ["error", "warning"], "default": "warning"},
            "dkms": {"type": "bool", "default": True},
            **ROOT_OPTION,
        },
        supports_check_mode=True,
    )
    params = module.params
    for path, need in params["min_free_gib"].items():
        try:
            float(need)
        except (TypeError, ValueError):
            module.fail_json(msg=f"min_free_gib: {need!r} for {path} is not a number of GiB.")
        if not str(path).startswith("/"):
            module.fail_json(msg=f"min_free_gib: {path!r} is not an absolute path.")
    host = Host(module)
    kernel = params["kernel"] or os.uname().release
    manager, packages = installed_packages(host)
    modules = loaded_modules(host.read("/proc/modules") or "")
    keys, sources = _apt_leftovers(host)
    node = {
        "kernel": kernel,
        "package_manager": manager,
        "kernel_headers": _headers(host, manager, kernel),
        "secure_boot": secure_boot_state(host.read("/sys/firmware/efi/efivars/" + SECURE_BOOT_VAR, binary=True)),
        "nouveau_loaded": "nouveau" in modules,
        "nvidia_loaded": "nvidia" in modules,
        "packages": {name: version for name, version in packages.items() if RELEVANT.match(name)},
        "driver_branches": driver_branches(packages),
        "apt_keys": keys,
        "unsigned_sources": sources,
        "free_gib": {path: host.free_gib(path) for path in params["min_free_gib"]},
    }
    module.exit_json(changed=False, node=node, problems=_problems(params, node))


if __name__ == "__main__":
    main()
