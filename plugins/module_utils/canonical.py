# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Canonical's NVIDIA driver packages in Ubuntu's archive (``nvidia_driver_source: ubuntu``).

Which packages carry a branch on a node, read from the node's own package index (the configured
mirror, through ``apt-cache show``), never from a list kept here:

- ``nvidia-headless-no-dkms-<branch>-server[-open]``: the user-mode driver of a compute node, without
  the kernel modules; ``nvidia-utils-<branch>-server`` adds nvidia-smi.
- ``linux-modules-nvidia-<branch>-server[-open]-<kernel>``: the modules built and signed by Canonical
  for one kernel (the Secure Boot answer on Ubuntu). Each is built against one driver release: it
  depends on ``nvidia-kernel-common-<branch>-server`` between that release and its ``-1``, so the
  user-mode driver must be that exact release.
- ``nvidia-dkms-<branch>-server[-open]``: DKMS, where the archive has no module package for the kernel.
- ``nvidia-fabricmanager-<branch>`` and ``libnvidia-nscq-<branch>``: NVSwitch systems, at the driver's
  exact release.

Sources: Ubuntu Server documentation, "NVIDIA drivers installation" (the ``-server`` and
``linux-modules-nvidia`` names); the archive's ``Packages`` indexes of jammy and noble
(``tests/unit/fixtures/ubuntu_archive``).
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.compat import vtuple

# An index stanza field: "Name: value" with continuation lines starting with a space.
_FIELD = re.compile(r"^([A-Za-z0-9-]+):[ \t]*(.*)$")
_UPSTREAM = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)+)")


def names(branch, flavour, kernel):
    """The package names of ``branch`` with ``flavour`` (``open``/``proprietary``) for ``kernel``."""
    suffix = "-open" if flavour == "open" else ""
    return {
        "userspace": f"nvidia-headless-no-dkms-{branch}-server{suffix}",
        "utils": f"nvidia-utils-{branch}-server",
        "modules": f"linux-modules-nvidia-{branch}-server{suffix}-{kernel}",
        "dkms": f"nvidia-dkms-{branch}-server{suffix}",
        "fabricmanager": f"nvidia-fabricmanager-{branch}",
        "nscq": f"libnvidia-nscq-{branch}",
    }


def index_names(branch, kernel):
    """Every name the plan may need, for both flavours: one ``apt-cache show`` call reads them all."""
    found = []
    for flavour in ("open", "proprietary"):
        for name in names(branch, flavour, kernel).values():
            if name not in found:
                found.append(name)
    return found


def parse_index(text):
    """``{package: [{"version", "depends"}]}`` from ``apt-cache show`` output (or a ``Packages`` file).

    ``depends`` is the raw Depends field. A stanza without Package or Version is skipped; the
    parse is one pass over the lines.
    """
    index = {}
    fields = {}
    last = None

    def flush():
        if fields.get("package") and fields.get("version"):
            entry = {"version": fields["version"], "depends": fields.get("depends", "")}
            versions = index.setdefault(fields["package"], [])
            if entry not in versions:
                versions.append(entry)

    for line in text.splitlines():
        if not line.strip():
            flush()
            fields, last = {}, None
            continue
        if line[0] in " \t":
            if last in ("depends",):
                fields[last] += " " + line.strip()
            continue
        match = _FIELD.match(line)
        if match:
            last = match.group(1).lower()
            if last in ("package", "version", "depends"):
                fields[last] = match.group(2).strip()
            else:
                last = None
    flush()
    return index


def upstream(version):
    """``580.178.04`` of ``580.178.04-0ubuntu0.24.04.1`` (None when it has no dotted upstream part)."""
    match = _UPSTREAM.match(version or "")
    return match.group(1) if match else None


def _depends_on(depends):
    """``[(name, relation, version)]`` of a Depends field; alternatives are flattened."""
    found = []
    for part in re.split(r"[,|]", depends):
        match = re.match(r"^\s*([a-z0-9][a-z0-9+.-]*)(?::[a-z0-9]+)?\s*(?:\(\s*([<>=]{1,2})\s*([^)\s]+)\s*\))?", part)
        if match:
            found.append((match.group(1), match.group(2), match.group(3)))
    return found


def module_driver(entry, branch):
    """The driver release a precompiled module package was built against: the lower bound of its
    ``nvidia-kernel-common-<branch>-server`` dependency (``>= 580.178.04``), or None."""
    common = f"nvidia-kernel-common-{branch}-server"
    for name, relation, version in _depends_on(entry["depends"]):
        if name == common and relation == ">=":
            return upstream(version)
    return None


def _newest(entries):
    return max(entries, key=lambda e: vtuple(upstream(e["version"]) or "0")) if entries else None


def _at(entries, release):
    """The entries whose upstream version is ``release``, newest Debian revision first."""
    return sorted((e for e in entries if upstream(e["version"]) == release), key=lambda e: e["version"], reverse=True)


def _transitional(entries, branch):
    """The branch a transitional package moves to (Canonical ends a branch this way), or None."""
    for entry in entries:
        for name, _relation, _version in _depends_on(entry["depends"]):
            match = re.match(r"^nvidia-headless-no-dkms-(\d{3})-server", name)
            if match and match.group(1) != str(branch):
                return match.group(1)
    return None


class _Refused(Exception):
    """An error that ends the plan: (variable, message, fix)."""


def plan(*, branch, flavour, kernel, exact, index, fabricmanager, distribution):
    """What to install from Canonical's archive, and the problems found on the way.

    Returns ``(problems, result)``; ``problems`` are ``(severity, variable, message, fix)``
    tuples and ``result`` is None when there is nothing to install. ``result`` has
    ``version`` (the driver release), ``modules`` (``precompiled`` or ``dkms``), ``packages``
    (``[{"name", "version"}]`` with exact Debian versions), ``fabricmanager`` (the same, for
    NVSwitch systems) and ``reason``.
    """
    problems = []
    try:
        return problems, _plan(
            problems,
            branch=branch,
            flavour=flavour,
            kernel=kernel,
            exact=exact,
            index=index,
            fabricmanager=fabricmanager,
            distribution=distribution,
        )
    except _Refused as refusal:
        problems.append(("error", *refusal.args))
        return problems, None


def _plan(problems, *, branch, flavour, kernel, exact, index, fabricmanager, distribution):
    n = names(branch, flavour, kernel)
    userspace = index.get(n["userspace"], [])
    where = f"the package index of this {distribution} node (apt-cache show, from its configured mirror)"
    if not userspace:
        raise _Refused(
            "nvidia_driver_source",
            f"{where} has no {n['userspace']}: Canonical's R{branch} {flavour} driver is not there.",
            "add Ubuntu's restricted component and the -updates and -security suites to the apt sources "
            "(or their mirror), refresh the lists, or set nvidia_driver_branch to a branch the archive "
            "carries; nvidia_driver_source: nvidia takes NVIDIA's repository instead.",
        )
    moved = _transitional(userspace, branch)
    if moved:
        raise _Refused(
            "nvidia_driver_branch",
            f"{n['userspace']} is a transitional package in {where}: Canonical has moved R{branch} to "
            f"R{moved}, so installing it would install R{moved}.",
            f'set nvidia_driver_branch: "{moved}".',
        )
    releases = sorted({upstream(e["version"]) for e in userspace if upstream(e["version"])}, key=vtuple)
    if not releases:
        raise _Refused(
            "nvidia_driver_source",
            f"{where} lists {n['userspace']} only at versions with no driver release in them "
            f"({', '.join(e['version'] for e in userspace)[:200]}).",
            "refresh the apt lists from Ubuntu's archive or its mirror; nvidia_driver_source: nvidia takes "
            "NVIDIA's repository instead.",
        )
    utils = index.get(n["utils"], [])
    modules = index.get(n["modules"], [])
    module_entry = _newest(modules)
    built_for = module_driver(module_entry, branch) if module_entry else None
    if exact and exact not in releases:
        raise _Refused(
            "nvidia_driver_version",
            f"{where} has {n['userspace']} at {', '.join(releases)}, not {exact}.",
            f"set nvidia_driver_version to one of {', '.join(releases)} (or leave it empty), or update the mirror.",
        )
    how = "precompiled"
    if module_entry and built_for and built_for in releases and (not exact or exact == built_for):
        release = built_for
        reason = (
            f"{n['modules']} (Canonical's signed modules for kernel {kernel}) is in the index, built for "
            f"driver {built_for}"
        )
    else:
        how = "dkms"
        release = exact or releases[-1]
        if not module_entry:
            why = f"{where} has no {n['modules']}: no precompiled modules for kernel {kernel}"
        elif built_for not in releases:
            why = (
                f"{n['modules']} was built for driver {built_for or 'an unknown release'}, and the index has "
                f"{n['userspace']} at {', '.join(releases)} only"
            )
        else:
            why = f"{n['modules']} was built for driver {built_for}, and nvidia_driver_version is {exact}"
        problems.append(
            (
                "warning",
                "nvidia_driver_kernel",
                f"{why}; DKMS ({n['dkms']}) builds the modules instead, which needs the kernel's headers and, "
                f"under Secure Boot, a signing key.",
                "boot a kernel Canonical builds modules for (a linux-modules-nvidia package of this branch, "
                "flavour and driver release in the index), or leave nvidia_driver_version empty.",
            )
        )
        reason = why + "; DKMS builds them"
    chosen = _at(userspace, release)[0]
    chosen_utils = _at(utils, release)
    if not chosen_utils:
        raise _Refused(
            "nvidia_driver_source",
            f"{where} has {n['userspace']} {release} but no {n['utils']} at that release (nvidia-smi).",
            "refresh the mirror: both come from the same source package.",
        )
    packages = [
        {"name": n["userspace"], "version": chosen["version"]},
        {"name": n["utils"], "version": chosen_utils[0]["version"]},
    ]
    if how == "precompiled":
        packages.append({"name": n["modules"], "version": module_entry["version"]})
    else:
        dkms = _at(index.get(n["dkms"], []), release)
        if not dkms:
            raise _Refused(
                "nvidia_driver_kernel",
                f"{where} has neither precompiled modules for kernel {kernel} nor {n['dkms']} at {release}.",
                "refresh the mirror, or boot a kernel Canonical builds modules for.",
            )
        packages.append({"name": n["dkms"], "version": dkms[0]["version"]})
    fm_packages = []
    if fabricmanager:
        for key in ("fabricmanager", "nscq"):
            found = _at(index.get(n[key], []), release)
            if not found:
                have = sorted({upstream(e["version"]) for e in index.get(n[key], [])} - {None}, key=vtuple)
                problems.append(
                    (
                        "error",
                        "nvidia_driver_source",
                        f"this node has NVSwitches and {where} has {n[key]} at "
                        f"{', '.join(have) or 'no version'}, not at driver {release}: Fabric Manager refuses "
                        f"to start unless its version equals the driver's exactly.",
                        "add Ubuntu's multiverse component (Fabric Manager and NSCQ are there) or refresh the "
                        "mirror so that both are at the driver's release.",
                    )
                )
            else:
                fm_packages.append({"name": n[key], "version": found[0]["version"]})
        if len(fm_packages) < 2:
            return None
    return {
        "version": release,
        "modules": how,
        "packages": packages,
        "fabricmanager": fm_packages,
        "reason": reason,
    }
