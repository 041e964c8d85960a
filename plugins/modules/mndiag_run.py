#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: mndiag_run
short_description: Run DCGM's multi-node diagnostic over the trays of one NVLink domain and judge it
version_added: 1.2.0
description:
  - Runs C(dcgmi mndiag --run mnubergemm --hostList HOSTS --json) on the node it is given (the head
    node of the run, whose host engine coordinates the others) and reads DCGM's report.
  - A GPU whose result is C(Fail) is a failed C(mndiag) record of its tray (RV(host_records); the
    validate role drains that tray). A run that did not finish (a C(runtime_error), a host engine
    that did not answer, an MPI failure), a failure that names no GPU, or a tray without a result
    fails the run's record (RV(record)) - every tray of the run gets the finding, none is drained,
    because nothing says which tray failed.
  - A command that fails before its report, or output that is not DCGM's report, is a failed
    record naming the command and the line (C(cannot check)); the module itself does not fail.
  - In check mode nothing runs and the record is C(skip).
  - DCGM runs it on GB200 NVL (from DCGM 4.3) and GB300 NVL (from 4.4) only. Its prerequisites are
    the site's (DCGM's multi-node diagnostics guide) - every node's host engine at the same DCGM and
    driver, Open MPI, and SSH without a password from the head node to each node for the user
    running it; the diagnostic is an active stress test, so the trays must take no job meanwhile.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the diagnostic is not run; the record says so.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  hosts:
    description: Each tray by the name the head node reaches it under (its host name), to its inventory name.
    type: dict
    required: true
  subject:
    description: What was measured (the domain's trays), for the report.
    type: str
    required: true
  timeout:
    description: Seconds the diagnostic may take (C(timeout) from coreutils stops it).
    type: int
    default: 3600
  launcher:
    description:
      - A command that starts it on the head node inside an allocation of every tray (C(srun -N 2 -w
        ... --ntasks-per-node=1 --exclusive)), so that no job lands on the trays meanwhile; the first
        task (C(SLURM_PROCID) 0) runs C(dcgmi), the others end at once and their trays stay allocated
        until it ends. Empty, C(dcgmi) runs where the module runs.
    type: list
    elements: str
    default: []
  parameters:
    description: C(--parameters) of the diagnostic (C(mnubergemm.time_to_run=300)), as DCGM reads them.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Run the multi-node diagnostic over the trays of one rack
  gpuops.cluster.mndiag_run:
    hosts: {rack1-t01: rack1-t01, rack1-t02: rack1-t02}
    subject: 2 trays of rack1
  delegate_to: rack1-t01
"""

RETURN = r"""
record:
  description: The run's record (C(check) mndiag, C(subject), C(expected), C(measured), C(verdict), C(reason)).
  returned: always
  type: dict
host_records:
  description: Per inventory host, a record per GPU DCGM reported on (C(fail) drains the tray).
  returned: always
  type: dict
command_rc:
  description: The command's exit status (null in check mode).
  returned: always
  type: int
output_tail:
  description: The last lines the command printed, for the report.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import first_line
from ansible_collections.gpuops.cluster.plugins.module_utils.dcgm import parse_dcgmi_mndiag
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError


def main():
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "dict", "required": True},
            "subject": {"type": "str", "required": True},
            "timeout": {"type": "int", "default": 3600},
            "parameters": {"type": "list", "elements": "str", "default": []},
            "launcher": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    names = {str(name): str(host) for name, host in p["hosts"].items()}
    bad = [name for name in names if not name or any(c in name for c in ";= \t\n")]
    if len(names) < 2 or bad or p["timeout"] < 1:
        module.fail_json(
            msg=f"hosts must name at least two trays by host name, without ';', '=' or spaces ({bad or list(names)}), "
            f"and timeout ({p['timeout']}) must be a positive number of seconds."
        )
    argv = ["dcgmi", "mndiag", "--run", "mnubergemm", "--hostList", ";".join(names), "--json"]
    for parameter in p["parameters"]:
        argv += ["--parameters", parameter]
    command = " ".join(argv)
    if module.check_mode:
        module.exit_json(
            changed=False,
            record=v.record("mndiag", p["subject"], None, None, "skip", "check mode: not run"),
            host_records={},
            command_rc=None,
            output_tail=[],
        )
    run = argv
    if p["launcher"]:
        run = [*p["launcher"], "sh", "-c", 'test "${SLURM_PROCID:-0}" = 0 || exit 0; exec "$@"', "sh", *argv]
    timeout = module.get_bin_path("timeout")
    run = [timeout, str(p["timeout"]), *run] if timeout else run
    rc, out, err = module.run_command(run, environ_update={"LC_ALL": "C"})
    tail = [line for line in (out + err).splitlines() if line.strip()][-15:]
    try:
        parsed = parse_dcgmi_mndiag(out)
    except ParseError as exc:
        why = f"`{command}` exited {rc}: {first_line(err) or first_line(out) or exc}" if rc else str(exc)
        module.exit_json(
            changed=False,
            record=v.record("mndiag", p["subject"], None, None, "fail", f"cannot check: {why}"),
            host_records={},
            command_rc=rc,
            output_tail=tail,
        )
    record, per_host = v.mndiag_checks(p["subject"], parsed, names)
    if rc not in (0, None) and record["verdict"] not in ("fail",):
        record = dict(record, verdict="fail", reason=f"`{command}` exited {rc}: {first_line(err) or 'no message'}")
    module.exit_json(changed=False, record=record, host_records=per_host, command_rc=rc, output_tail=tail)


if __name__ == "__main__":
    main()
