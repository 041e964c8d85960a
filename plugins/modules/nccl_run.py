#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_run
short_description: Run one nccl-tests measurement and judge its bus bandwidth
version_added: 1.0.0
description:
  - Runs an nccl-tests command (C(all_reduce_perf) through C(srun), C(mpirun) or directly, as
    given in O(argv)), reads its result table and judges the bus bandwidth at the largest message
    size (not nccl-tests' "Avg bus bandwidth", an average over every size) against the floor in
    O(expectation), or against O(baseline_share) of a recorded O(baseline).
  - Wrong values (C(#wrong) above 0, or the older error column above the type's tolerance) and
    out-of-bounds values fail regardless of the bandwidth, and so does a run that did not finish,
    a table without nccl-tests' closing lines (C(# Out of bounds values), C(# Avg bus bandwidth)),
    or one whose largest size stops short of the C(maxBytes) nccl-tests read from C(-e); and one
    that ran another number of ranks (its C(# Using devices) lines) than O(ranks).
  - A command that fails, or output without a result table, is a failed check naming the command
    and the line; the module itself does not fail, so that every other measurement still runs.
  - In check mode nothing runs and the check is C(skip).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the test is not run; the record says so.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  argv:
    description: The command, as a list (the launcher first).
    type: list
    elements: str
    required: true
  environment:
    description: Extra environment, such as C(NCCL_ALGO=Ring) for a measurement of the NICs.
    type: dict
    default: {}
  check:
    description: The check's name in the report (C(nccl_node), C(nccl_pair), C(nccl_all)).
    type: str
    required: true
  subject:
    description: What was measured (a node, a pair of nodes, the whole set).
    type: str
    required: true
  expectation:
    description: C(expected), C(floor) (GB/s) and C(reason), as the validate role derives them.
    type: dict
    default: {}
  baseline:
    description: This subject's recorded bus bandwidth (GB/s); the gate is then O(baseline_share) of it.
    type: float
  baseline_share:
    description: Share of the baseline to reach.
    type: float
    default: 0.95
  timeout:
    description: Seconds the command may take (C(timeout) from coreutils stops it).
    type: int
    default: 900
  ranks:
    description:
      - The ranks the command asks for (GPUs of one process times its processes). When set, a run
        that lists another number of ranks fails. Unset, the count is not compared.
    type: int
"""

EXAMPLES = r"""
- name: all_reduce over the 8 GPUs of one node, through Slurm
  gpuops.cluster.nccl_run:
    argv: [srun, -N1, -w, gpu01, --gres=gpu:8, /opt/nccl-tests/current/build/all_reduce_perf,
           -b, "8", -e, 8G, -f, "2", -g, "8"]
    check: nccl_node
    subject: gpu01
    ranks: 8
    expectation: {expected: 473.2, floor: 435.3, reason: 18 NVLink links x 26.562 GB/s x 0.99}
  delegate_to: slurm-head
"""

RETURN = r"""
record:
  description: The check record (C(check), C(subject), C(expected), C(measured), C(verdict), C(reason)).
  returned: always
  type: dict
series:
  description: Bus bandwidth per message size (C(size) bytes, C(busbw) GB/s, the better of out-of-place and in-place).
  returned: when the test ran and printed its table
  type: list
  elements: dict
busbw:
  description: The bus bandwidth at the largest size (GB/s), or null.
  returned: always
  type: float
command_rc:
  description: The command's exit status (null in check mode). A non-zero status fails the check, not the task.
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
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.nccl_tests import parse_nccl_tests


def main():
    module = AnsibleModule(
        argument_spec={
            "argv": {"type": "list", "elements": "str", "required": True},
            "environment": {"type": "dict", "default": {}},
            "check": {"type": "str", "required": True},
            "subject": {"type": "str", "required": True},
            "expectation": {"type": "dict", "default": {}},
            "baseline": {"type": "float"},
            "baseline_share": {"type": "float", "default": 0.95},
            "timeout": {"type": "int", "default": 900},
            "ranks": {"type": "int"},
        },
        supports_check_mode=True,
    )
    p = module.params
    expectation = p["expectation"]
    floor = round(p["baseline_share"] * p["baseline"], 1) if p["baseline"] else expectation.get("floor")

    def done(record, **result):
        module.exit_json(changed=False, record=dict(record, floor=floor), **result)

    if module.check_mode:
        done(
            v.record(p["check"], p["subject"], floor, None, "skip", "check mode: not run"),
            series=[],
            busbw=None,
            command_rc=None,
            output_tail=[],
        )
    argv = list(p["argv"])
    timeout = module.get_bin_path("timeout")
    if timeout:
        argv = [timeout, str(p["timeout"]), *argv]
    environment = {"LC_ALL": "C", **{k: str(value) for k, value in p["environment"].items()}}
    rc, out, err = module.run_command(argv, environ_update=environment)
    tail = [line for line in (out + err).splitlines() if line.strip()][-15:]
    command = " ".join(p["argv"])
    try:
        result = parse_nccl_tests(out)
    except ParseError as exc:
        reason = f"`{command}` exited {rc}: {first_line(err) or exc}" if rc else f"could not read `{command}`: {exc}"
        done(
            v.record(p["check"], p["subject"], floor, None, "fail", reason),
            series=[],
            busbw=None,
            command_rc=rc,
            output_tail=tail,
        )
    record = v.nccl_check(
        p["check"], p["subject"], result, expectation, p["baseline"], p["baseline_share"], ranks=p["ranks"]
    )
    if rc != 0 and record["verdict"] != "fail":
        record = dict(record, verdict="fail", reason=f"`{command}` exited {rc} after its table: {first_line(err)}")
    series = []
    for row in result["rows"]:
        values = [value for value in (row["oop"]["busbw"], row["ip"]["busbw"]) if value is not None]
        series.append({"size": row["size"], "busbw": max(values) if values else None})
    top = max(series, key=lambda row: row["size"]) if series else {}
    done(record, series=series, busbw=top.get("busbw"), command_rc=rc, output_tail=tail)


if __name__ == "__main__":
    main()
