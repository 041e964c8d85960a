#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: driver_state
short_description: Compare the installed NVIDIA driver with the loaded one and say what it takes to run it
version_added: 1.0.0
description:
  - Reads the installed driver packages (dpkg's status file, or C(rpm -qa)), C(/proc/modules),
    C(/sys/module/nvidia/version) and the marks container runtimes leave, and changes nothing.
  - Returns the driver version the packages of O(branch) carry, the packages of other branches (to
    remove on a branch change), the packages to hold, and the action that makes the installed
    driver the running one. V(none), V(load) (modprobe), V(reload) (unload the old module, load the
    new one; works only while no process holds the GPUs) or V(reboot) (nouveau holds the GPUs).
  - In a container the kernel modules are the host's, so the action is always V(none) there and
    RV(container) names the runtime; the C(nvidia_driver) role reports that skip.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.root
options:
  branch:
    description: The driver branch the node should run, such as V(580).
    type: str
    required: true
  busy:
    description:
      - Also look for work on the node (RV(work)) before a driver change. The processes that hold a GPU
        come from C(nvidia-smi --query-compute-apps) where the driver is loaded; the Slurm jobs and the
        node's Slurm state from C(squeue) and C(sinfo) where Slurm's client is installed.
    type: bool
    default: false
  slurm_node:
    description: The node's name in Slurm, for O(busy); empty means the short host name.
    type: str
    default: ""
seealso:
  - module: gpuops.cluster.stack_check
  - module: gpuops.cluster.gpu_facts
"""

EXAMPLES = r"""
- name: See whether the installed driver is the running one
  gpuops.cluster.driver_state:
    branch: "580"
  register: driver

- name: Load the module
  community.general.modprobe:
    name: nvidia
  when: driver.action == 'load'
"""

RETURN = r"""
installed_version:
  description: The driver version of the installed packages of O(branch), or null.
  returned: always
  type: str
  sample: 580.95.05
loaded_version:
  description: Version of the loaded C(nvidia) module, or null.
  returned: always
  type: str
loaded_modules:
  description: The NVIDIA driver's modules and C(nouveau), those of them in C(/proc/modules).
  returned: always
  type: list
  elements: str
container:
  description: The container runtime the node runs in, or null on a real machine or VM.
  returned: always
  type: str
  sample: docker
action:
  description: V(none), V(load), V(reload) or V(reboot).
  returned: always
  type: str
reason:
  description: Why, in a sentence.
  returned: always
  type: str
branches:
  description: Installed driver packages per branch.
  returned: always
  type: dict
  sample: {"570": [libnvidia-compute-570, nvidia-open-570]}
other_branches:
  description: Installed driver packages of branches other than O(branch).
  returned: always
  type: list
  elements: str
hold:
  description: Installed packages to hold, those of O(branch) and C(nvlsm).
  returned: always
  type: list
  elements: str
held:
  description: Packages dpkg holds now (apt only).
  returned: always
  type: list
  elements: str
work:
  description:
    - With O(busy), what runs on the node; null otherwise.
    - C(gpu_processes) (pid, gpu_uuid, used_memory in MiB, process_name), C(slurm_jobs) (job ids),
      C(slurm_state) (sinfo's long state, such as C(drained), C(draining), C(idle); null without Slurm)
      and C(drained) (Slurm keeps new jobs off the node and none runs there).
    - A C(squeue) or C(sinfo) that fails (controller down, node unknown to Slurm) is reported as a
      warning and leaves C(slurm_jobs) empty and C(slurm_state) null.
  returned: always
  type: dict
  sample: {gpu_processes: [{pid: 4242, gpu_uuid: GPU-5c3a..., used_memory: 70144, process_name: python3}],
           slurm_jobs: ["1207"], slurm_state: mixed, drained: false}
"""

import re
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.host import (
    NVIDIA_MODULES,
    ROOT_OPTION,
    Host,
    branch_driver_version,
    container_runtime,
    dpkg_held,
    driver_action,
    driver_branches,
    installed_packages,
    loaded_modules,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import (
    COMPUTE_APPS_COMMAND,
    COMPUTE_APPS_FIELDS,
    parse_compute_apps,
)


def _run(module, argv):
    return module.run_command(argv, environ_update={"LC_ALL": "C"})


def work_on_node(module, node, driver_loaded):
    """The GPU processes, Slurm jobs and Slurm state of this node (see RETURN ``work``)."""
    work = {"gpu_processes": [], "slurm_jobs": [], "slurm_state": None, "drained": False}
    smi = module.get_bin_path("nvidia-smi", opt_dirs=["/usr/bin"])
    if smi and driver_loaded:
        argv = [smi, "--query-compute-apps=" + ",".join(COMPUTE_APPS_FIELDS), "--format=csv,noheader"]
        rc, out, err = _run(module, argv)
        if rc != 0:
            module.fail_json(
                msg=f"{COMPUTE_APPS_COMMAND} failed (rc {rc}): {err.strip() or out.strip()}. The driver must "
                "answer before it is changed: check it with nvidia-smi on the node."
            )
        try:
            work["gpu_processes"] = parse_compute_apps(out)
        except ParseError as exc:
            module.fail_json(msg=str(exc))
    squeue, sinfo = module.get_bin_path("squeue"), module.get_bin_path("sinfo")
    if squeue and sinfo:
        rc, out, err = _run(module, [squeue, "--noheader", f"--nodelist={node}", "--format=%i"])
        if rc == 0:
            work["slurm_jobs"] = [line.strip() for line in out.splitlines() if line.strip()]
        else:
            module.warn(f"squeue could not list the jobs on {node} (rc {rc}): {err.strip()}")
        rc, out, err = _run(module, [sinfo, "--noheader", "--Node", f"--nodes={node}", "--format=%T"])
        states = sorted({line.strip().rstrip("*~#!%$@^-") for line in out.splitlines() if line.strip()})
        if rc == 0 and states:
            work["slurm_state"] = "+".join(states)
            work["drained"] = all(state == "drained" for state in states) and not work["slurm_jobs"]
        elif rc != 0:
            module.warn(f"sinfo could not read the state of {node} (rc {rc}): {err.strip()}")
    return work


def main():
    module = AnsibleModule(
        argument_spec={
            "branch": {"type": "str", "required": True},
            "busy": {"type": "bool", "default": False},
            "slurm_node": {"type": "str", "default": ""},
            **ROOT_OPTION,
        },
        supports_check_mode=True,
    )
    branch = module.params["branch"]
    if not re.fullmatch(r"\d{3}", branch):
        module.fail_json(msg=f"branch is {branch!r}; give the driver branch as three digits, such as '580'.")
    host = Host(module)
    _manager, packages = installed_packages(host)
    branches = driver_branches(packages)
    installed = branch_driver_version(packages, branch)
    watched = (*NVIDIA_MODULES, "nouveau")
    loaded = [name for name in loaded_modules(host.read("/proc/modules") or "") if name in watched]
    loaded_version = (host.read("/sys/module/nvidia/version") or "").strip() or None
    container = container_runtime(host)
    action, reason = driver_action(
        container=container, loaded=loaded, loaded_version=loaded_version, installed_version=installed
    )
    module.exit_json(
        changed=False,
        installed_version=installed,
        loaded_version=loaded_version,
        loaded_modules=loaded,
        container=container,
        action=action,
        reason=reason,
        branches=branches,
        other_branches=sorted(name for other, names in branches.items() if other != branch for name in names),
        hold=sorted(branches.get(branch, []) + [name for name in packages if name == "nvlsm"]),
        held=dpkg_held(host.read("/var/lib/dpkg/status") or ""),
        work=work_on_node(
            module,
            module.params["slurm_node"] or socket.gethostname().split(".")[0],
            "nvidia" in loaded or container is not None,
        )
        if module.params["busy"]
        else None,
    )


if __name__ == "__main__":
    main()
