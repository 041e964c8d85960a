#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_lease
short_description: Let one run at a time plan, write and record the cluster-wide files of the fleet state
version_added: 1.2.0
description:
  - Runs at the same time against one cluster (AWX job slices run in parallel, two operators) each plan
    slurm.conf, gres.conf or the scrape targets from the fleet state, write them, and record their own nodes once
    the cluster has taken them. Interleaved, the last file written can miss a node another run recorded after that
    file's plan. The run lease makes those steps one run's at a time - a file C(.lease) in the fleet state's
    folder (O(dir)) on the fleet host, naming the run that holds it, written under the folder's lock.
  - With O(state=held), waits up to O(timeout) seconds while another run's lease is in force, then holds it for
    O(ttl) seconds (a run that holds it already renews it). A lease past its expiry is taken over with a warning
    naming it - its run is gone (interrupted, a lost controller) or ran past O(ttl) - so no wait is unbounded.
    Past O(timeout) the task fails naming the holder, since when and until when, and the fix.
  - With O(state=released), ends this run's lease; another run's is left alone.
  - The lease is the runs' bookkeeping, not the cluster's state - the task never reports a change, and in check
    mode (which writes nothing) it holds nothing.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  dir:
    description: The fleet state's folder, created (0755) when missing.
    type: path
    default: /var/lib/gpuops/fleet
  id:
    description:
      - This run's name for its lease (1 to 64 letters, digits, dots, dashes or underscores), returned in RV(id).
      - Omitted with O(state=held), the module names a new lease (C(run-) and 16 random hexadecimal digits);
        omitted with O(state=released) (the hold failed or never ran), there is nothing to end.
    type: str
  holder:
    description: What a waiting run prints of this one (its hosts, its AWX job).
    type: str
    default: ""
  state:
    description: Hold (or renew) the lease, or end it.
    type: str
    choices: [held, released]
    default: held
  ttl:
    description: Seconds the lease lasts from now; a run renews it where it takes longer.
    type: int
    default: 1800
  timeout:
    description: Seconds to wait for another run's lease; 0 fails at once where another run holds it.
    type: int
    default: 1800
  lock_timeout:
    description: Seconds to wait for the folder's lock (held for a moment by each reader and writer).
    type: int
    default: 120
notes:
  - Runs on the fleet host (C(delegate_to), C(run_once)), as the P(gpuops.cluster.fleet#role) role calls it.
"""

EXAMPLES = r"""
- name: Hold the fleet lease while this run plans, writes and records slurm.conf
  gpuops.cluster.fleet_lease:
    holder: "hosts {{ ansible_play_hosts_all[:3] | join(', ') }}"
  delegate_to: "{{ fleet_host }}"
  run_once: true
  register: lease

- name: End it
  gpuops.cluster.fleet_lease:
    id: "{{ lease.id }}"
    state: released
  delegate_to: "{{ fleet_host }}"
  run_once: true
"""

RETURN = r"""
id:
  description: The lease's name (O(id), or the one the module gave it).
  returned: always
  type: str
  sample: run-5f0c2a9e41d7b3c8
held:
  description: Whether this run holds the lease after the task.
  returned: always
  type: bool
waited:
  description: Seconds this run waited for another run's lease.
  returned: with O(state=held)
  type: float
  sample: 42.5
taken_over:
  description: The expired lease this run took over (its run, holder, since and until when), else null.
  returned: with O(state=held)
  type: str
released:
  description: Whether this run held a lease that the task ended.
  returned: with O(state=released)
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.fleet_lock import LockError, acquire, check_id, release


def main():
    module = AnsibleModule(
        argument_spec={
            "dir": {"type": "path", "default": "/var/lib/gpuops/fleet"},
            "id": {"type": "str"},
            "holder": {"type": "str", "default": ""},
            "state": {"type": "str", "choices": ["held", "released"], "default": "held"},
            "ttl": {"type": "int", "default": 1800},
            "timeout": {"type": "int", "default": 1800},
            "lock_timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    p = module.params
    folder = p["dir"]
    if p["id"] is None:
        if p["state"] == "released":
            # Nothing was held under a name (the hold failed or never ran): nothing to end.
            module.exit_json(changed=False, id=None, held=False, released=False)
        p["id"] = "run-" + os.urandom(8).hex()
    try:
        check_id(p["id"])
        if p["timeout"] < 0:
            raise LockError(f"fleet_lease_timeout is {p['timeout']}: give 0 or more seconds (the default is 1800).")
        if p["ttl"] < 1:
            raise LockError(f"fleet_lease_ttl is {p['ttl']}: a lease lasts 1 second or more (the default is 1800).")
    except LockError as err:
        module.fail_json(msg=str(err))
    if os.path.exists(folder) and not os.path.isdir(folder):
        module.fail_json(msg=f"the fleet state's folder {folder} is not a folder: move that file, or set fleet_dir")
    if module.check_mode:
        module.exit_json(
            changed=False, id=p["id"], held=False, msg="check mode: no lease held (a check run writes nothing)"
        )
    holder = " ".join(p["holder"].split())[:300]
    try:
        if p["state"] == "released":
            ended = release(folder, p["id"], lock_timeout=p["lock_timeout"])
            module.exit_json(changed=False, id=p["id"], held=False, released=ended)
        os.makedirs(folder, mode=0o755, exist_ok=True)
        waited, taken = acquire(
            folder, p["id"], holder=holder, ttl=p["ttl"], timeout=p["timeout"], lock_timeout=p["lock_timeout"]
        )
    except LockError as err:
        module.fail_json(msg=str(err))
    except OSError as err:
        module.fail_json(msg=f"cannot keep the fleet lease in {folder} ({err}): check its disk and permissions")
    if taken:
        module.warn(f"took over an expired fleet lease in {folder}: {taken}. That run is gone or ran past its lease.")
    module.exit_json(changed=False, id=p["id"], held=True, waited=waited, taken_over=taken)


if __name__ == "__main__":
    main()
