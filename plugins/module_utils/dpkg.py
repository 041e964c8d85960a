# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What dpkg's status file says about a set of packages, and what a package spec asks for.

Pure functions, but for set_selections: the modules read ``/var/lib/dpkg/status`` and pass its text. Used by
package_hold and apt_packages, which answer "is this set already in place?" from the status
file alone, without opening apt's cache (about 2 s per call on a loaded node).
"""

from __future__ import annotations

import fnmatch
import re

from ansible_collections.gpuops.cluster.plugins.module_utils.host import dpkg_stanzas

# dpkg's package names (Debian Policy 5.6.1): lowercase letters, digits, + - ., two characters or more.
NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")
# A spec: a name, optionally =version, where the version may end in * (apt-get's glob).
SPEC = re.compile(r"(?P<name>[a-z0-9][a-z0-9+.-]+)(?:=(?P<version>[0-9][A-Za-z0-9.+~:*-]*))?")


def parse_spec(spec):
    """``(name, version or None)`` from ``name`` or ``name=version``; None when it is neither."""
    match = SPEC.fullmatch(spec or "")
    if not match:
        return None
    return match.group("name"), match.group("version")


def package_states(status, names):
    """``{name: {"selection", "state", "version"}}`` for the packages of ``names`` dpkg knows.

    ``selection`` is dpkg's want (install, hold, deinstall, purge), ``state`` its status
    (installed, config-files, half-installed, ...). A multi-arch package has one stanza per
    architecture: it counts as installed and held if any of them is.
    """
    wanted = set(names)
    found = {}
    for fields in dpkg_stanzas(status):
        name = fields["Package"]
        if name not in wanted:
            continue
        words = fields.get("Status", "").split() or [""]
        selection, state, version = words[0], words[-1], fields.get("Version", "")
        entry = found.setdefault(name, {"selection": selection, "state": state, "version": version})
        if state == "installed" and entry["state"] != "installed":
            entry.update(state=state, version=version)
        if selection == "hold":
            entry["selection"] = "hold"
    return found


def version_matches(installed, wanted):
    """Whether an installed version is the one a spec asks for (exact, or apt-get's trailing-* glob).

    A wanted version without an epoch matches the installed one with or without its epoch.
    """
    if wanted is None:
        return True
    candidates = [installed] if ":" in wanted else [installed, installed.split(":", 1)[-1]]
    if "*" in wanted:
        return any(fnmatch.fnmatchcase(candidate, wanted) for candidate in candidates)
    return wanted in candidates


def installed(entry):
    return bool(entry) and entry["state"] == "installed"


def missing(states, specs):
    """The specs that are not in place: not installed, or at another version."""
    out = []
    for spec in specs:
        name, version = parse_spec(spec)
        entry = states.get(name)
        if not installed(entry) or not version_matches(entry["version"], version):
            out.append(spec)
    return out


def present(states, names, purge=False):
    """The names still installed (or, with ``purge``, with configuration files left)."""
    gone = ("not-installed",) if purge else ("not-installed", "config-files")
    return [name for name in names if name in states and states[name]["state"] not in gone]


def selection_changes(states, names, target):
    """The names dpkg knows whose selection is not ``target`` (hold or install), in order, once each."""
    return list(dict.fromkeys(name for name in names if name in states and states[name]["selection"] != target))


def selections(status, names):
    """``{name: selection}`` (hold, install, ...) of the packages of ``names`` dpkg knows."""
    return {name: entry["selection"] for name, entry in package_states(status, names).items()}


def set_selections(module, read_status, names, target):
    """``dpkg --set-selections`` of ``names`` to ``target``, then read back through ``read_status()``.

    Fails the module naming what did not take: a selection dpkg ignored must not pass for a hold.
    """
    dpkg = module.get_bin_path("dpkg", required=True)
    argv = [dpkg, "--set-selections"]
    rc, out, err = module.run_command(
        argv, data="".join(f"{name} {target}\n" for name in names), environ_update={"LC_ALL": "C", "LANG": "C"}
    )
    now = selections(read_status() or "", names)
    missed = [name for name in names if now.get(name) != target]
    if rc != 0 or missed:
        module.fail_json(
            msg="dpkg --set-selections did not take {} for {}: {}".format(
                target, ", ".join(missed or names), (err or out).strip() or f"rc {rc}"
            ),
            cmd=argv,
            rc=rc,
            stdout=out,
            stderr=err,
        )


def package_facts(status):
    """``{name: [{name, version, arch, source}]}`` of the packages dpkg's status file lists as installed."""
    packages = {}
    for fields in dpkg_stanzas(status):
        if fields.get("Status", "").split()[-1:] != ["installed"]:
            continue
        name = fields["Package"]
        packages.setdefault(name, []).append(
            {
                "name": name,
                "version": fields.get("Version", ""),
                "arch": fields.get("Architecture", ""),
                "source": "dpkg",
            }
        )
    return packages
