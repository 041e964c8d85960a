#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: mig_layout
short_description: Bring a node's GPUs to a MIG layout, through the MIG manager service
version_added: 1.0.0
description:
  - Reads each GPU's MIG mode and its GPU and compute instances (C(nvidia-smi -q -x),
    C(nvidia-smi mig -lgi) and C(-lci)) and compares them with the layout, GPU by GPU.
  - A node already in its layout is not touched. Otherwise the layout is checked against each
    GPU's profile table first (an impossible layout fails before anything changes, naming the GPU,
    what fits instead and the nearest layouts), then the MIG manager applies it (I(apply_argv),
    by default a start of C(nvidia-mig-manager.service), which runs C(nvidia-mig-parted apply) with
    the selected config and its hooks), and the GPUs are read again; a GPU still out of its layout
    fails the module with what it shows.
  - In check mode it says, per GPU, what would change, and changes nothing.
  - GPUs the layout does not name are left as they are.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: The before and after of each GPU that changes (MIG mode and the profiles of its instances).
options:
  layout:
    description:
      - The layout, as the mig role's C(mig_layout) declares it. C(name) names the config in
        the MIG manager's config file; C(gpus) lists C({devices, profiles}), C(devices) being
        C(all) or a list of GPU indices and C(profiles) a map of MIG profile to count (empty
        turns MIG off on those GPUs).
    type: dict
    required: true
  apply_argv:
    description: The command that applies the selected config.
    type: list
    elements: str
    default: [systemctl, start, nvidia-mig-manager.service]
  nvidia_smi_path:
    description: Path of C(nvidia-smi). By default it is looked up in C(PATH) and C(/usr/bin).
    type: path
seealso:
  - module: gpuops.cluster.gpu_facts
"""

EXAMPLES = r"""
- name: Seven 1g.10gb slices on every GPU
  gpuops.cluster.mig_layout:
    layout:
      name: h100-inference
      gpus:
        - devices: all
          profiles: {1g.10gb: 7}
"""

RETURN = r"""
changes:
  description:
    - One entry per GPU that was not (or, in check mode, is not) in its layout, with C(gpu) (index),
      C(name), C(before) and C(after), each C({mig, instances}).
  returned: always
  type: list
  elements: dict
  sample:
    - {gpu: 0, name: NVIDIA H100 80GB HBM3, before: {mig: disabled, instances: {}},
       after: {mig: enabled, instances: {1g.10gb: 7}}}
summary:
  description: One line per entry of I(changes).
  returned: always
  type: list
  elements: str
  sample: ["GPU 0 (NVIDIA H100 80GB HBM3): MIG disabled -> MIG enabled 1g.10gb x 7"]
gpus:
  description: Each GPU's state after the run, C({gpu, mig, instances}) (before it, in check mode).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils import mig
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import first_line, parse_or_fail, read_mig, run
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import parse_query_xml


def _read(module, nvidia_smi):
    argv = [nvidia_smi, "-q", "-x"]
    rc, out, err = run(module, argv)
    if rc != 0:
        module.fail_json(
            msg="`{}` failed (rc {}): {}. The MIG layout needs the NVIDIA driver loaded.".format(
                " ".join(argv), rc, first_line(out, err)
            ),
            cmd=argv,
            rc=rc,
            stdout=out,
            stderr=err,
        )
    query = parse_or_fail(module, parse_query_xml, out, argv)
    return build_gpu_facts(None, query, mig=read_mig(module, nvidia_smi, query["gpus"], profiles=False))


def _state(facts):
    return [{"gpu": index, **state} for index, state in sorted(mig.current(facts).items())]


def main():
    module = AnsibleModule(
        argument_spec={
            "layout": {"type": "dict", "required": True},
            "apply_argv": {
                "type": "list",
                "elements": "str",
                "default": ["systemctl", "start", "nvidia-mig-manager.service"],
            },
            "nvidia_smi_path": {"type": "path"},
        },
        supports_check_mode=True,
    )
    layout = module.params["layout"]
    nvidia_smi = module.params["nvidia_smi_path"] or module.get_bin_path("nvidia-smi", opt_dirs=["/usr/bin"])
    if not nvidia_smi:
        module.fail_json(
            msg="nvidia-smi was not found: the MIG layout needs the NVIDIA driver (the nvidia_driver role)."
        )
    facts = _read(module, nvidia_smi)
    problems = mig.layout_problems(layout, facts, "mig_layout")
    if problems:
        module.fail_json(msg=" ".join(problems), problems=problems)
    changes = mig.changes(layout, facts)
    result = {
        "changed": bool(changes),
        "changes": changes,
        "summary": [mig.summary(c) for c in changes],
        "gpus": _state(facts),
    }
    if module._diff and changes:
        result["diff"] = {
            "before": {f"GPU {c['gpu']}": c["before"] for c in changes},
            "after": {f"GPU {c['gpu']}": c["after"] for c in changes},
        }
    if not changes or module.check_mode:
        module.exit_json(**result)

    argv = module.params["apply_argv"]
    rc, out, err = run(module, argv)
    if rc != 0:
        module.fail_json(
            msg="`{}` failed (rc {}): {}. `journalctl -u nvidia-mig-manager` has the MIG manager's own account; "
            "a GPU whose MIG mode change is pending needs a reset (no process may hold it) or a reboot.".format(
                " ".join(argv), rc, first_line(err, out) or "no output"
            ),
            cmd=argv,
            rc=rc,
            stdout=out,
            stderr=err,
            changes=changes,
        )
    after = _read(module, nvidia_smi)
    left = mig.changes(layout, after)
    result["gpus"] = _state(after)
    if left:
        module.fail_json(
            msg="`{}` ran, but GPU {} {} still out of the layout {}: {}".format(
                " ".join(argv),
                ", ".join(str(c["gpu"]) for c in left),
                "is" if len(left) == 1 else "are",
                layout.get("name"),
                "; ".join("GPU {} has {} where {} was asked".format(c["gpu"], c["before"], c["after"]) for c in left),
            ),
            changes=changes,
            left=left,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
