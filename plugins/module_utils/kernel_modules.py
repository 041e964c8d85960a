# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA modules a node has per kernel, read from /lib/modules and with modinfo: what the
nvidia_modules module returns and node_health's kernel_modules check judges. The decisions are
secureboot.py's."""

from __future__ import annotations

import os
import re

from ansible_collections.gpuops.cluster.plugins.module_utils.commands import parse_or_fail, run
from ansible_collections.gpuops.cluster.plugins.module_utils.secureboot import (
    DEFAULT_MODULES,
    MODULE_SUFFIXES,
    dkms_module_names,
    module_key,
    module_problems,
    parse_modinfo,
    parse_openssl_x509,
)

# Folders of /lib/modules/<kernel> modprobe prefers (depmod's default search order): DKMS's first.
_FIRST = ("updates", "extra")
# Where the nvidia_driver role tells DKMS which certificate it signs with.
SIGNING_CONF = "/etc/dkms/framework.conf.d/gpuops-signing.conf"
_MOK_CERTIFICATE = re.compile(r"""^[ \t]*mok_certificate[ \t]*=[ \t]*["']?([^"'\n]+?)["']?[ \t]*$""", re.M)


def module_files(host, kernel, wanted):
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
                    key = module_key(name[: len(name) - len(suffix)])
                    if key in wanted and key not in found:
                        found[key] = os.path.join(current, name)
    return found


def _release_key(release):
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"([0-9]+)", release) if part]


def installed_kernels(host):
    """Kernels with an image on the node (a modules.order, which kernel image packages ship, or a
    /boot/vmlinuz-<release>), oldest first."""
    found = {
        name for name in host.listdir("/lib/modules") if os.path.exists(host.path(f"/lib/modules/{name}/modules.order"))
    }
    found |= {name.split("vmlinuz-", 1)[1] for name in host.listdir("/boot") if name.startswith("vmlinuz-")}
    return sorted(found, key=_release_key)


def signing_certificate(host):
    """The certificate the role's DKMS configuration signs with, where that file and it exist."""
    match = _MOK_CERTIFICATE.search(host.read(SIGNING_CONF) or "")
    if match and os.path.exists(host.path(match.group(1))):
        return match.group(1)
    return None


def read_certificate(module, host, path):
    """``{"common_name", "serial"}`` of a DER or PEM certificate, read with openssl."""
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


def read_kernel_modules(module, host, kernels, version="", certificate=None, modules=DEFAULT_MODULES):  # noqa: PLR0917
    """The modules of each kernel with their problems: ``{"kernels", "broken", "certificate", "names"}``
    (nvidia_modules' return values). ``modules``: the names where the driver's dkms.conf does not say."""
    conf = host.read(f"/usr/src/nvidia-{version}/dkms.conf") if version else None
    names = list(dkms_module_names(conf) or modules)
    cert = read_certificate(module, host, certificate) if certificate else None
    modinfo = module.get_bin_path("modinfo", opt_dirs=["/sbin", "/usr/sbin"])
    wanted = {module_key(name) for name in names}
    entries = []
    for kernel in kernels:
        found, listed = {}, []
        for key, path in sorted(module_files(host, kernel, wanted).items()):
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
            listed.append(
                {
                    "name": key.replace("_", "-"),
                    "path": shown,
                    "version": info.get("version"),
                    "signer": info.get("signer"),
                    "sig_key": info.get("sig_key"),
                }
            )
        problems = module_problems(kernel, found, names, version or None, cert)
        entries.append(
            {
                "kernel": kernel,
                "headers": os.path.exists(host.path(f"/lib/modules/{kernel}/build")),
                "modules": listed,
                "problems": problems,
                "ok": not problems,
            }
        )
    return {
        "kernels": entries,
        "broken": [entry["kernel"] for entry in entries if not entry["ok"]],
        "certificate": cert,
        "names": names,
    }
