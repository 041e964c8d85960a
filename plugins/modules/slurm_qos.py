#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_qos
short_description: Bring Slurm's QOS to the workload tiers through sacctmgr
version_added: 1.0.0
description:
  - Reads every QOS once (C(sacctmgr show qos)), adds the missing ones and sets the priority,
    preemption list, preemption mode and grace time of those that differ; a QOS already as
    wanted is not touched, and a QOS not named is left alone.
  - Missing QOS are all added before any is modified, so that a preemption list may name a QOS
    of the same call.
  - Runs where sacctmgr reaches slurmdbd (the controller). Check mode and diff say what would
    change per QOS.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  qos:
    description:
      - The QOS, as the C(slurm_qos) of the P(gpuops.cluster.workload_tiers#filter) filter gives them.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The QOS name.
        type: str
        required: true
      priority:
        description: Its priority.
        type: int
        required: true
      preempt:
        description: The QOS whose jobs its jobs may preempt.
        type: list
        elements: str
        default: []
      preempt_mode:
        description: How its jobs are preempted; C(cluster) takes slurm.conf's C(PreemptMode).
        type: str
        default: cluster
      grace_time:
        description: Seconds a preempted job of this QOS runs on after its SIGTERM.
        type: int
        default: 0
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: Every QOS before and after, one line each.
seealso:
  - plugin: gpuops.cluster.workload_tiers
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Bring the QOS to the workload tiers
  gpuops.cluster.slurm_qos:
    qos: "{{ (workload_tiers | gpuops.cluster.workload_tiers).slurm_qos }}"
"""

RETURN = r"""
changes:
  description:
    - Per QOS that was (or would be) added or changed, its C(name), C(action) (add or modify),
      C(before) and C(after).
  returned: always
  type: list
  elements: dict
  sample:
    - name: inference
      action: add
      before: null
      after: {"priority": 100, "preempt": [], "preempt_mode": "cluster", "grace_time": 60}
qos:
  description: Every QOS as sacctmgr lists it afterwards (name to priority, preempt, preempt_mode, grace_time).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import (
    QOS_COMMAND,
    parse_qos,
    qos_changes,
    qos_set_args,
)

FIX = "sacctmgr talks to slurmdbd: check that slurmdbd runs (systemctl status slurmdbd) and that this host reaches it."


def _run(module, args):
    rc, out, err = module.run_command(args, environ_update={"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg=f"{' '.join(args)} failed (rc {rc}): {(err or out).strip()[:500]}. {FIX}")
    return out


def _read(module, sacctmgr):
    text = _run(module, [sacctmgr, *QOS_COMMAND.split()[1:]])
    try:
        return parse_qos(text)
    except ParseError as exc:
        module.fail_json(msg=f"{exc}. Is this Slurm's sacctmgr?")


def _text(qos):
    return "".join(
        "{}: priority {}, preempts {}, preempt mode {}, grace time {} s\n".format(
            name, v["priority"], ",".join(v["preempt"]) or "nothing", v["preempt_mode"], v["grace_time"]
        )
        for name, v in sorted(qos.items())
    )


def main():
    module = AnsibleModule(
        argument_spec={
            "qos": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "priority": {"type": "int", "required": True},
                    "preempt": {"type": "list", "elements": "str", "default": []},
                    "preempt_mode": {"type": "str", "default": "cluster"},
                    "grace_time": {"type": "int", "default": 0},
                },
            },
        },
        supports_check_mode=True,
    )
    sacctmgr = module.get_bin_path("sacctmgr")
    if not sacctmgr:
        module.fail_json(
            msg="sacctmgr is not on this host: run slurm_qos on the Slurm controller (slurm-client has it)."
        )
    wanted = module.params["qos"]
    before = _read(module, sacctmgr)
    changes = qos_changes(wanted, before)
    after = dict(before)
    after.update({c["name"]: c["after"] for c in changes})
    result = {"changed": bool(changes), "changes": changes, "qos": after}
    if module._diff:
        result["diff"] = {"before": _text(before), "after": _text(after)}
    if changes and not module.check_mode:
        for change in changes:
            if change["action"] == "add":
                _run(module, [sacctmgr, "-i", "add", "qos", change["name"]])
        for change in changes:
            _run(module, qos_set_args(change, sacctmgr))
        result["qos"] = _read(module, sacctmgr)
        still = qos_changes(wanted, result["qos"])
        if still:
            module.fail_json(
                msg="sacctmgr took the QOS changes but lists {} otherwise: {}".format(
                    ", ".join(c["name"] for c in still), _text({c["name"]: c["before"] for c in still}).strip()
                ),
                **result,
            )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
