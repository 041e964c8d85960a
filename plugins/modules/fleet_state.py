#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_state
short_description: Record what the cluster-wide files need from each node, kept for the nodes a run does not reach
version_added: 1.0.0
description:
  - The one owner of the fleet state - one JSON file per node in O(dir) on the fleet host (the first Slurm
    controller by default; see the P(gpuops.cluster.fleet#role) role). A record has sections, each written by the
    role that owns it - C(slurm) (the node's Slurm description), C(scrape) (its exporter targets) and
    C(validation) (its last verdict with date) and C(imex) (an NVLink-domain tray's IMEX address) - each with the
    date its data last changed.
  - With O(section), records this run's data for the nodes it reached (O(records)), keeps what earlier runs
    recorded for the others, and returns the section's data for every node of O(inventory) that has some
    (fresh or kept). The cluster-wide files (slurm.conf, gres.conf, scrape targets) are rendered from that.
  - Without O(section), only reads, and says per node which sections it holds and since when.
  - Every file is read and checked before any is written; a file that is not valid JSON, names another node,
    holds a section that does not parse or comes from a newer collection (a higher schema) fails the task
    naming the node, the file and the fix, and nothing is written. A file is replaced atomically (written
    beside it, then renamed), and only when its content changes.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  dir:
    description: The folder of the records, created (0755) when missing.
    type: path
    default: /var/lib/gpuops/fleet
  section:
    description: The section this call records and returns; omitted, the call only reads.
    type: str
    choices: [slurm, scrape, validation, imex]
  records:
    description:
      - Inventory name to this run's data for O(section), for the nodes this run reached.
      - C(slurm) - C(hostname) and C(spec) (P(gpuops.cluster.slurm_node_spec#filter)'s description);
        C(scrape) - C(targets) (job to host:port) and C(labels); C(imex) - C(address), C(nvlink_domain) and
        C(gpus); C(validation) - C(verdict) (pass or fail), C(date) and C(findings).
    type: dict
    default: {}
  inventory:
    description:
      - The inventory names that belong to O(section)'s files now. A recorded node out of it is returned in
        RV(absent) and left out of RV(nodes); its record stays until O(remove) names it.
    type: list
    elements: str
    default: []
  remove:
    description: Inventory names whose whole record is deleted (nodes that left the cluster).
    type: list
    elements: str
    default: []
  warn:
    description: Warn about each node of O(inventory) that has no data (RV(missing)).
    type: bool
    default: true
  slice:
    description:
      - O(inventory) is a part of the cluster's, not all of it - an AWX job slice, whose inventory holds its own hosts
        (and the pinned fleet host) only. A recorded node out of O(inventory) is then kept in RV(nodes) as a node
        out of the run, never returned in RV(absent) (a node leaves the cluster only in a run over the whole
        inventory).
    type: bool
    default: false
    version_added: 1.2.0
  lock_timeout:
    description:
      - >-
        Seconds to wait for another run that records into O(dir) (an AWX slice, another operator) to finish. A
        call that records takes the folder's lock (C(.lock), an exclusive flock) and reads every record again
        under it, so that two runs recording different sections of one node both keep theirs. Past the wait
        the task fails naming the holder (its pid, host and since when).
    type: int
    default: 120
    version_added: 1.1.0
extends_documentation_fragment:
  - gpuops.cluster.files
"""

EXAMPLES = r"""
- name: Record this run's compute nodes and read back the cluster's
  gpuops.cluster.fleet_state:
    section: slurm
    records: "{{ {'gpu01': {'hostname': 'gpu01', 'spec': slurm_node}} }}"
    inventory: "{{ groups['slurm_compute'] }}"
  delegate_to: "{{ fleet_host }}"
  run_once: true
  register: fleet

- name: What the state holds
  gpuops.cluster.fleet_state:
  delegate_to: "{{ fleet_host }}"
  run_once: true
  register: fleet_all
"""

RETURN = r"""
nodes:
  description: Inventory name to the section's data, for every node of O(inventory) that has some.
  returned: with O(section)
  type: dict
kept:
  description: Inventory name to the date of the data kept for a node of O(inventory) that this run did not record.
  returned: with O(section)
  type: dict
  sample: {"gpu07": "2026-11-20T10:02:11Z"}
missing:
  description: Nodes of O(inventory) with neither data from this run nor a record (never reached).
  returned: with O(section)
  type: list
  elements: str
absent:
  description: Inventory name to the section's data, for the nodes recorded for O(section) that are not in O(inventory).
  returned: with O(section)
  type: dict
new:
  description: Nodes this run recorded that had no data for O(section) before.
  returned: with O(section)
  type: list
  elements: str
changed_keys:
  description:
    - Inventory name to the keys of the section's data that differ from what was recorded, for the nodes this run
      recorded that had data before (such as C(hardware) when a node's GPUs changed).
  returned: with O(section)
  type: dict
  sample: {"gpu03": ["hardware", "spec"]}
written:
  description: Nodes whose record was (or would be) written.
  returned: always
  type: list
  elements: str
deleted:
  description: Nodes whose record was (or would be) deleted.
  returned: always
  type: list
  elements: str
sections:
  description: Inventory name to section name to the date its data last changed, for every record.
  returned: always
  type: dict
files:
  description:
    - What the cluster-wide files say of the nodes in RV(nodes), worked out once here so that the templates walk a
      few entries, not every node (the P(gpuops.cluster.fleet_files#filter) filter's answer). For C(slurm), the
      node lines of slurm.conf and gres.conf (C(groups), C(gpu_types), C(hostnames)); for C(scrape), each job's
      file_sd entries; for C(imex), C(domains) (each NVLink domain's IMEX node list); for C(validation), empty.
  returned: with O(section)
  type: dict
  version_added: 1.1.0
"""

import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.fleet import (
    FleetError,
    file_name,
    parse_record,
    render_record,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.fleet import files as section_files
from ansible_collections.gpuops.cluster.plugins.module_utils.fleet import merge as merge_section
from ansible_collections.gpuops.cluster.plugins.module_utils.fleet_lock import LockError, hold
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import HostlistError


def _read_all(module, folder):
    stored = {}
    if not os.path.isdir(folder):
        return stored
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        node = name[: -len(".json")]
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as err:
            module.fail_json(
                msg=f"{node}: cannot read the fleet state's {path} ({err}). Fix its permissions or delete it."
            )
        try:
            stored[node] = parse_record(text, node, path)
        except FleetError as err:
            module.fail_json(msg=str(err))
    return stored


def _lock(module, folder, timeout):
    """The folder's lock, held until the module exits (its file stays open): the one writer at a time."""
    try:
        return hold(folder, timeout)
    except LockError as err:
        module.fail_json(msg=str(err))


def _write(folder, node, text):
    fd, tmp = tempfile.mkstemp(prefix=f".{node}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(folder, file_name(node)))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _sections(stored):
    return {
        node: {name: entry.get("since") for name, entry in (record.get("sections") or {}).items()}
        for node, record in stored.items()
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "dir": {"type": "path", "default": "/var/lib/gpuops/fleet"},
            "section": {"type": "str", "choices": ["slurm", "scrape", "validation", "imex"]},
            "records": {"type": "dict", "default": {}},
            "inventory": {"type": "list", "elements": "str", "default": []},
            "remove": {"type": "list", "elements": "str", "default": []},
            "warn": {"type": "bool", "default": True},
            "lock_timeout": {"type": "int", "default": 120},
            "slice": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    folder = p["dir"]
    if os.path.exists(folder) and not os.path.isdir(folder):
        module.fail_json(
            msg=f"the fleet state's folder {folder} is not a folder: move that file away, or set fleet_dir."
        )
    if p["section"] is not None and not module.check_mode:
        # One writer at a time; what others wrote before it got the lock is read under it.
        try:
            os.makedirs(folder, mode=0o755, exist_ok=True)
        except OSError as err:
            module.fail_json(msg=f"cannot create the fleet state's folder {folder} ({err}). Check its parent.")
        lock = _lock(module, folder, p["lock_timeout"])
        try:
            _run(module, p, folder)
        finally:
            os.close(lock)  # the lock goes with it (and with the process, whatever ends it)
    _run(module, p, folder)


def _run(module, p, folder):
    stored = _read_all(module, folder)
    if p["section"] is None:
        if p["records"] or p["remove"]:
            module.fail_json(msg="fleet_state: records and remove need a section (slurm, scrape or validation).")
        module.exit_json(changed=False, written=[], deleted=[], sections=_sections(stored))
    today = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        plan = merge_section(
            stored, p["section"], p["records"], p["inventory"], today=today, remove=p["remove"], partial=p["slice"]
        )
    except FleetError as err:
        module.fail_json(msg=str(err))
    writes, deletes = plan.pop("writes"), plan.pop("deletes")
    if p["warn"]:
        for node in plan["missing"]:
            module.warn(
                f"{node}: not reached by this run and never recorded in the fleet state ({p['section']}): left out "
                "of the cluster's files until a run reaches it."
            )
    result = dict(plan, changed=bool(writes or deletes), written=sorted(writes), deleted=deletes)
    try:
        result["files"] = section_files(p["section"], plan["nodes"])
    except HostlistError as err:
        module.fail_json(msg=f"fleet_state: the slurm section's host names make no hostlist ({err}).")
    except FleetError as err:
        module.fail_json(msg=str(err))
    if module._diff:
        result["diff"] = [
            {
                "before_header": os.path.join(folder, file_name(node)),
                "after_header": os.path.join(folder, file_name(node)),
                "before": render_record(stored[node]) if node in stored else "",
                "after": render_record(writes[node]) if node in writes else "",
            }
            for node in sorted(set(writes) | set(deletes))
        ]
    if not module.check_mode and (writes or deletes):
        try:
            os.makedirs(folder, mode=0o755, exist_ok=True)
            for node, record in sorted(writes.items()):
                _write(folder, node, render_record(record))
            for node in deletes:
                os.unlink(os.path.join(folder, file_name(node)))
        except OSError as err:
            module.fail_json(
                msg=f"cannot write the fleet state in {folder} ({err}). Check the folder's disk and permissions."
            )
    after = dict(stored)
    after.update(writes)
    for node in deletes:
        after.pop(node, None)
    result["sections"] = _sections(after)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
