# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure readers for a node's install readiness: loaded modules, installed packages, apt keys and
sources, the Secure Boot variable. The ``host_check`` module feeds them file contents."""

from __future__ import annotations

import base64
import binascii
import re

# CUDA repository signing keys by 64-bit key ID (nvidia_stack facts, section 5): the key rotated
# out in 2022 and the current one. Found in an apt-key keyring, either is a leftover.
CUDA_KEYS = {
    "F60F4B3D7FA2AF80": "NVIDIA CUDA repository key 7fa2af80 (rotated out in 2022)",
    "A4B469963BF863CC": "NVIDIA CUDA repository key 3bf863cc (current; belongs in a signed-by keyring)",
}
# Upstream hosts of the NVIDIA and Mellanox repositories.
NVIDIA_HOSTS = ("developer.download.nvidia.com", "nvidia.github.io/libnvidia-container", "linux.mellanox.com")
# EFI global variable GUID of SecureBoot.
SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

_BRANCH_NAME = re.compile(r"^(?:nvidia|libnvidia|cuda-drivers|xserver-xorg-video-nvidia)[a-z0-9-]*?-(\d{3})(?:-|$)")
_DRIVER_NAME = re.compile(r"^(?:nvidia-|libnvidia-|cuda-drivers)")
_NOT_DRIVER = re.compile(r"container|docker|ctk|cuda-toolkit|libnvidia-container|nvidia-modprobe-dkms-none|nvlsm")
_VERSION_BRANCH = re.compile(r"^(?:\d+:)?(\d{3})\.\d+")


def loaded_modules(proc_modules):
    """Module names from ``/proc/modules``."""
    return sorted({line.split()[0] for line in proc_modules.splitlines() if line.strip()})


def dpkg_installed(status):
    """``{package: version}`` of the packages ``/var/lib/dpkg/status`` lists as installed."""
    packages = {}
    for stanza in re.split(r"\n\s*\n", status):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, _sep, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            packages[fields["Package"]] = fields.get("Version", "")
    return packages


def rpm_installed(text):
    """``{package: version}`` from ``rpm -qa --qf '%{NAME} %{VERSION}-%{RELEASE}\\n'``."""
    packages = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            packages[parts[0]] = parts[1]
    return packages


def driver_branches(packages):
    """``{branch: [package, ...]}`` of the installed driver packages, by name suffix or version."""
    branches = {}
    for name in sorted(packages):
        if not _DRIVER_NAME.match(name) or _NOT_DRIVER.search(name):
            continue
        match = _BRANCH_NAME.match(name) or _VERSION_BRANCH.match(packages[name])
        if match:
            branches.setdefault(match.group(1), []).append(name)
    return branches


def dearmor(text):
    """The binary packets of an ASCII-armored OpenPGP block, or b"" when it is not one."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP"))
    except StopIteration:
        return b""
    body = []
    in_headers = True
    for line in lines[start + 1 :]:
        if line.startswith("-----END PGP"):
            break
        if in_headers:
            if not line.strip():
                in_headers = False
            elif ":" not in line:
                in_headers = False
                body.append(line.strip())
            continue
        if line.startswith("="):  # the CRC24 line
            continue
        body.append(line.strip())
    try:
        return base64.b64decode("".join(body))
    except (binascii.Error, ValueError):
        return b""


def keyring_cuda_keys(data):
    """The CUDA repository key IDs found in a keyring file's bytes (binary or armored)."""
    if data.lstrip().startswith(b"-----BEGIN PGP"):
        data = dearmor(data.decode("ascii", "replace"))
    found = []
    for key_id in CUDA_KEYS:
        if bytes.fromhex(key_id) in data:
            found.append(key_id)
    return found


def unsigned_sources(text, path):
    """NVIDIA/Mellanox repository entries of an apt sources file that have no ``signed-by``.

    Handles the one-line ``.list`` format and the deb822 ``.sources`` format.
    """
    found = []
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            if any(host in stanza for host in NVIDIA_HOSTS) and not re.search(r"(?im)^signed-by:", stanza):
                if not re.search(r"(?im)^enabled:\s*no", stanza):
                    uri = re.search(r"(?im)^uris:\s*(\S+)", stanza)
                    found.append(uri.group(1) if uri else stanza.strip().splitlines()[0])
        return found
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("deb") and any(host in line for host in NVIDIA_HOSTS) and "signed-by" not in line:
            found.append(line)
    return found


def secure_boot_state(efivar):
    """``enabled``/``disabled`` from the SecureBoot EFI variable's bytes (4 attribute bytes, then the value)."""
    if not efivar or len(efivar) < 5:
        return "unknown"
    return "enabled" if efivar[4] == 1 else "disabled"


def apt_candidate(policy_output):
    """The candidate version from ``apt-cache policy <pkg>``, or None."""
    match = re.search(r"^\s*Candidate:\s*(\S+)", policy_output, re.MULTILINE)
    if not match or match.group(1) == "(none)":
        return None
    return match.group(1)
