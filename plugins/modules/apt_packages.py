#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: apt_packages
short_description: Install or remove a set of pinned Debian packages, and hold them, in one call
version_added: 1.0.0
description:
  - Reads dpkg's status file first. A set already in place (every package installed at the
    version asked for, or gone, and held as asked) is left alone without opening apt's cache; on a
    converged node that is the common case, and it costs milliseconds where
    M(ansible.builtin.apt) spends about two seconds loading the cache.
  - Otherwise runs one C(apt-get install) (or C(remove)/C(purge)) for the packages not in place,
    non-interactively, keeping changed configuration files (C(--force-confdef),
    C(--force-confold)), then reads dpkg's status file again and fails, with apt-get's output,
    when a package is still not as asked.
  - In check mode it runs C(apt-get --simulate) instead, so that a package or version the
    repositories do not have is reported as it would be on the real run.
  - With O(hold=true) the packages are held (C(apt-mark hold)) in the same call, after they are in.
  - When it changed something it returns C(ansible_facts.packages), read again from dpkg's status
    file in the shape of M(gpuops.cluster.dpkg_facts), so that packages read once at the start of
    a play stay true for the roles after it without reading them again.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.dpkg
  - gpuops.cluster.root
options:
  name:
    description:
      - Packages as C(name) or C(name=version); the version may end in C(*) (apt-get's glob), such as
        C(datacenter-gpu-manager-4-core=1:4.4.1-*). A version without an epoch matches an installed
        version with one.
      - With O(state=absent), bare names.
    type: list
    elements: str
    required: true
  state:
    description: V(present) installs what is missing or at another version; V(absent) removes.
    type: str
    choices: [present, absent]
    default: present
  hold:
    description: Hold the packages once they are in (O(state=present) only).
    type: bool
    default: false
  install_recommends:
    description: Install the packages' Recommends too.
    type: bool
    default: false
  allow_downgrade:
    description: Let apt-get install a version older than the installed one (C(--allow-downgrades)).
    type: bool
    default: false
  allow_change_held_packages:
    description: Let apt-get change or remove held packages (C(--allow-change-held-packages)).
    type: bool
    default: false
  purge:
    description: With O(state=absent), remove the configuration files too.
    type: bool
    default: false
  cache_valid_time:
    description:
      - When something must be installed and apt's package lists are older than this many seconds,
        run C(apt-get update) first. V(0) never updates.
    type: int
    default: 0
  update_cache:
    description:
      - When something must be installed, run C(apt-get update) first whatever the age of the
        lists (a repository was just removed or replaced).
    type: bool
    default: false
  lock_timeout:
    description: Seconds apt-get waits for the dpkg lock another process holds.
    type: int
    default: 60
  simulate_preferences:
    description:
      - The apt preferences (pins) the install is to follow, as a task before it writes them to
        C(/etc/apt/preferences.d). In check mode that file is not written yet on a fresh node, so
        the simulation reads this text too, through a temporary file (apt's C(Dir::Etc::Preferences)),
        and resolves each dependency as the real run will (apt takes only candidate versions; a pin
        to a release older than the index's newest is what lets it pick that release's
        dependencies). Not used outside check mode.
    type: str
seealso:
  - module: ansible.builtin.apt
  - module: gpuops.cluster.package_hold
"""

EXAMPLES = r"""
- name: Install NCCL for CUDA 12.8 and hold it
  gpuops.cluster.apt_packages:
    name: [libnccl2=2.26.5-1+cuda12.8, libnccl-dev=2.26.5-1+cuda12.8]
    hold: true
    allow_change_held_packages: true
    allow_downgrade: true

- name: Install the distribution's tools, refreshing day-old package lists first
  gpuops.cluster.apt_packages:
    name: [numactl, chrony]
    cache_valid_time: 86400
"""

RETURN = r"""
changed_packages:
  description: The specs (or names) apt-get acted on, or would act on in check mode.
  returned: always
  type: list
  elements: str
  sample: [libnccl2=2.26.5-1+cuda12.8]
held_packages:
  description: The packages this call held (or would hold).
  returned: always
  type: list
  elements: str
versions:
  description: The installed version of each package of O(name) afterwards, null when not installed.
  returned: always
  type: dict
  sample: {libnccl2: 2.26.5-1+cuda12.8}
ansible_facts:
  description: The installed packages afterwards, as M(gpuops.cluster.dpkg_facts) sets them.
  returned: when something changed, outside check mode
  type: dict
  contains:
    packages:
      description: Installed package name to a list of its installed instances.
      returned: when something changed, outside check mode
      type: dict
stdout:
  description: apt-get's output, when it ran.
  returned: when apt-get ran
  type: str
"""

import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.dpkg import (
    missing,
    package_facts,
    package_states,
    parse_spec,
    present,
    selection_changes,
    set_selections,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.host import ROOT_OPTION, Host

STATUS = "/var/lib/dpkg/status"


def lists_age(host):
    """Seconds since apt's package lists were last refreshed (None when it has none)."""
    folder = host.path("/var/lib/apt/lists")
    try:
        stamps = [
            os.stat(os.path.join(folder, entry)).st_mtime
            for entry in os.listdir(folder)
            if entry not in ("lock", "partial", "auxfiles")
        ]
    except OSError:
        return None
    return time.time() - max(stamps) if stamps else None


def apt_argv(apt_get, params, command, targets, simulate, *, preferences=None):
    """apt-get's command line; ``preferences``: a file of pins the simulation reads too."""
    argv = [apt_get, "-y", "-q", "-o", f"DPkg::Lock::Timeout={params['lock_timeout']}"]
    argv += ["-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
    if simulate:
        argv.append("--simulate")
        if preferences:
            argv += ["-o", f"Dir::Etc::Preferences={preferences}"]
    if command == "install":
        argv.append("--install-recommends" if params["install_recommends"] else "--no-install-recommends")
        if params["allow_downgrade"]:
            argv.append("--allow-downgrades")
    if params["allow_change_held_packages"]:
        argv.append("--allow-change-held-packages")
    return [*argv, command, *targets]


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "list", "elements": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "hold": {"type": "bool", "default": False},
            "install_recommends": {"type": "bool", "default": False},
            "allow_downgrade": {"type": "bool", "default": False},
            "allow_change_held_packages": {"type": "bool", "default": False},
            "purge": {"type": "bool", "default": False},
            "cache_valid_time": {"type": "int", "default": 0},
            "update_cache": {"type": "bool", "default": False},
            "lock_timeout": {"type": "int", "default": 60},
            "simulate_preferences": {"type": "str"},
            **ROOT_OPTION,
        },
        supports_check_mode=True,
    )
    params = module.params
    specs = list(dict.fromkeys(params["name"]))
    state = params["state"]
    parsed = [parse_spec(spec) for spec in specs]
    bad = [spec for spec, p in zip(specs, parsed) if p is None or (state == "absent" and p[1] is not None)]
    if bad:
        module.fail_json(
            msg="name lists {}: give Debian package names, with =version (a trailing * allowed) for state "
            "present only, such as libnccl2=2.26.5-1+cuda12.8.".format(", ".join(repr(b) for b in bad))
        )
    if params["hold"] and state == "absent":
        module.fail_json(msg="hold is true with state absent: a removed package cannot be held; drop one of them.")
    names = [p[0] for p in parsed]
    host = Host(module)

    def read_status():
        return host.read(STATUS)

    status = read_status()
    if status is None:
        module.fail_json(msg=f"{host.path(STATUS)} is missing: apt_packages works on dpkg systems only.")
    states = package_states(status, names)
    if state == "present":
        command = "install"
        todo = missing(states, specs)
    else:
        command = "purge" if params["purge"] else "remove"
        todo = present(states, names, purge=params["purge"])
    hold = []
    if params["hold"]:
        # What is being installed now is held after it; the rest only if it is not held yet.
        todo_names = {parse_spec(spec)[0] for spec in todo}
        hold = [name for name in names if name in todo_names] + [
            name for name in selection_changes(states, names, "hold") if name not in todo_names
        ]

    result = {"changed": bool(todo or hold), "changed_packages": todo, "held_packages": hold}
    if module._diff and result["changed"]:
        result["diff"] = {
            "before": "".join(
                "{} {}{}\n".format(
                    name,
                    states.get(name, {}).get("version") or "not installed",
                    " (held)" if states.get(name, {}).get("selection") == "hold" else "",
                )
                for name in names
            ),
            "after": "".join(
                f"{spec} ({state}{', held' if name in hold else ''})\n" for spec, name in zip(specs, names)
            ),
        }

    if todo:
        apt_get = module.get_bin_path("apt-get", required=True)
        env = {"LC_ALL": "C", "LANG": "C", "DEBIAN_FRONTEND": "noninteractive", "DEBCONF_NONINTERACTIVE_SEEN": "true"}
        refresh = params["cache_valid_time"] > 0 or params["update_cache"]
        if refresh and command == "install" and not module.check_mode:
            age = None if params["update_cache"] else lists_age(host)
            if age is None or age > params["cache_valid_time"]:
                rc, out, err = module.run_command([apt_get, "-q", "update"], environ_update=env)
                if rc != 0:
                    module.fail_json(
                        msg="apt-get update failed: " + (err or out).strip(), rc=rc, stdout=out, stderr=err
                    )
        pins = None
        if module.check_mode and params["simulate_preferences"]:
            handle, pins = tempfile.mkstemp(prefix="gpuops-simulate-", suffix=".pref")
            with os.fdopen(handle, "w", encoding="utf-8") as pin_file:
                pin_file.write(params["simulate_preferences"])
        try:
            argv = apt_argv(apt_get, params, command, todo, simulate=module.check_mode, preferences=pins)
            rc, out, err = module.run_command(argv, environ_update=env)
        finally:
            if pins:
                os.unlink(pins)
        result["stdout"] = out
        if rc != 0:
            module.fail_json(
                msg="`{}` failed (rc {}): {}".format(" ".join(argv), rc, (err or out).strip()[-2000:]),
                cmd=argv,
                rc=rc,
                stdout=out,
                stderr=err,
            )
        if not module.check_mode:
            states = package_states(read_status() or "", names)
            still = missing(states, specs) if state == "present" else present(states, names, purge=params["purge"])
            if still:
                module.fail_json(
                    msg="apt-get {} ran but {} {} still not as asked; apt-get said: {}".format(
                        command, ", ".join(still), "is" if len(still) == 1 else "are", (out or err).strip()[-2000:]
                    ),
                    cmd=argv,
                    stdout=out,
                    stderr=err,
                )
    if hold and not module.check_mode:
        set_selections(module, read_status, hold, "hold")
    if result["changed"] and not module.check_mode:
        status = read_status() or ""
        states = package_states(status, names)
        result["ansible_facts"] = {"packages": package_facts(status)}
    result["versions"] = {
        name: states[name]["version"] if states.get(name, {}).get("state") == "installed" else None for name in names
    }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
