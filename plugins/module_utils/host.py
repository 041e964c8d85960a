# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure readers for a node's install readiness: loaded modules, installed packages, apt keys and
sources, the Secure Boot variable. The ``host_check`` module feeds them file contents."""

from __future__ import annotations

import os
import re

from ansible_collections.gpuops.cluster.plugins.module_utils.commands import run
from ansible_collections.gpuops.cluster.plugins.module_utils.openpgp import dearmor

# CUDA repository signing keys by 64-bit key ID (compat.SOURCES['cuda_repo']): the key rotated
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


def dpkg_stanzas(status):
    """Each package of ``/var/lib/dpkg/status`` as a ``{field: value}`` dict (continuation lines left out)."""
    for stanza in re.split(r"\n\s*\n", status):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, _sep, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if "Package" in fields:
            yield fields


def dpkg_installed(status):
    """``{package: version}`` of the packages ``/var/lib/dpkg/status`` lists as installed."""
    return {
        fields["Package"]: fields.get("Version", "")
        for fields in dpkg_stanzas(status)
        if fields.get("Status", "").endswith(" installed")
    }


def dpkg_held(status):
    """Sorted names of the packages dpkg holds (``Status: hold ...``)."""
    return sorted(fields["Package"] for fields in dpkg_stanzas(status) if fields.get("Status", "").startswith("hold "))


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
    # [ \t]*, not \s*: \s* ran over the following newlines at every line start (200k blank lines took
    # a minute).
    match = re.search(r"^[ \t]*Candidate:[ \t]*(\S+)", policy_output, re.MULTILINE)
    if not match or match.group(1) == "(none)":
        return None
    return match.group(1)


# The argument spec entry of Host's option (documented by the gpuops.cluster.root fragment).
ROOT_OPTION = {"root": {"type": "path", "default": "/"}}


class Host:
    """The node's files under ``root`` (``/`` except in tests), read without failing."""

    def __init__(self, module):
        self.module = module
        self.root = module.params["root"]

    def path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path, binary=False):
        try:
            with open(self.path(path), "rb" if binary else "r") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None

    def listdir(self, path):
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []

    def free_gib(self, path):
        probe = self.path(path)
        while not os.path.exists(probe) and probe != os.path.dirname(probe):
            probe = os.path.dirname(probe)
        stat = os.statvfs(probe)
        return round(stat.f_bavail * stat.f_frsize / 2**30, 1)


def installed_packages(host):
    """``(manager, {package: version})``: dpkg's status file, or ``rpm -qa`` on the live root."""
    status = host.read("/var/lib/dpkg/status")
    if status is not None:
        return "apt", dpkg_installed(status)
    rpm = host.module.get_bin_path("rpm")
    if rpm and host.root == "/":
        rc, out, _err = run(host.module, [rpm, "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\\n"])
        if rc == 0:
            return "dnf", rpm_installed(out)
    return None, {}


# Kernel modules of the NVIDIA driver, in the order they unload (users before nvidia itself).
NVIDIA_MODULES = ("nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia")
# Where container runtimes leave their mark, with the runtime an empty mark means: systemd's
# detection file (it names the runtime), Docker's and Podman's.
CONTAINER_MARKS = (("run/systemd/container", "container"), (".dockerenv", "docker"), ("run/.containerenv", "podman"))


def container_runtime(host):
    """The container runtime the node runs in (its mark's text, or the runtime the mark names), or None."""
    for mark, runtime in CONTAINER_MARKS:
        text = host.read("/" + mark)
        if text is not None:
            return text.strip() or runtime
    return None


def upstream_version(version):
    """``580.95.05`` from a package version such as ``580.95.05-1`` or ``1:580.95.05-0ubuntu1``."""
    return version.split(":", 1)[-1].split("-", 1)[0]


def branch_driver_version(packages, branch):
    """The driver version the installed packages of ``branch`` carry: the most common upstream
    version among them (metapackages and libraries share it), or None when none is installed."""
    counts = {}
    for name in driver_branches(packages).get(str(branch), []):
        version = upstream_version(packages[name])
        if version.startswith(str(branch) + "."):
            counts[version] = counts.get(version, 0) + 1
    if not counts:
        return None
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0][0]


def driver_action(*, container, loaded, loaded_version, installed_version):
    """What it takes to run the installed driver: ``(action, reason)``.

    ``action`` is ``none`` (nothing to do, or nothing can be done: a container shares the host's
    kernel), ``load`` (the module is not loaded: modprobe it), ``reload`` (an older module is
    loaded: unload and load it, which works only while no process holds the GPUs) or ``reboot``
    (nouveau holds the GPUs; the blacklist takes effect at boot).
    """
    if container:
        return "none", f"this node is a container ({container}); its kernel modules are the host's"
    if not installed_version:
        return "none", "no driver package is installed"
    if "nouveau" in loaded:
        return "reboot", "nouveau is loaded and holds the GPUs; the blacklist takes effect at the next boot"
    if "nvidia" not in loaded:
        return "load", f"the nvidia module is not loaded; driver {installed_version} is installed"
    if loaded_version == installed_version:
        return "none", f"driver {installed_version} is loaded"
    return "reload", f"driver {loaded_version or 'of unknown version'} is loaded; {installed_version} is installed"
