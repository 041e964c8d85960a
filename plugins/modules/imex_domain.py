#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: imex_domain
short_description: Wait until a tray's IMEX domain is ready, by the IMEX daemons' own word
version_added: 1.2.0
description:
  - Runs C(nvidia-imex-ctl -N -j) (the IMEX daemons' view of the whole NVLink domain) until the domain is
    C(UP), every node C(READY), every connection C(CONNECTED) and the daemon's nodes are those of the tray's
    O(nodes_config), or until O(wait) seconds have passed; then fails naming each node and connection that is not,
    and what to check.
  - Only reads; it runs the same in check mode, where a tray without C(nvidia-imex-ctl) yet (IMEX not installed)
    returns RV(ready) false with the reason instead of failing.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
options:
  config:
    description: The daemon's configuration file, given to C(nvidia-imex-ctl -c) (its command port).
    type: path
    default: /etc/nvidia-imex/config.cfg
  nodes_config:
    description: The tray's node list (one address per line), which the daemon's nodes must equal.
    type: path
    default: /etc/nvidia-imex/nodes_config.cfg
  wait:
    description: Seconds to wait for the domain to become ready (the daemons connect to each other after a start).
    type: int
    default: 60
seealso:
  - module: gpuops.cluster.node_health
"""

EXAMPLES = r"""
- name: Wait for every tray of the domain to be connected
  gpuops.cluster.imex_domain:
    wait: 120
  register: imex
"""

RETURN = r"""
ready:
  description: The domain is UP, every node READY and connected to every other, with the tray's node list.
  returned: always
  type: bool
status:
  description: The domain's state (C(UP), C(DEGRADED), C(DOWN)), or null where it could not be read.
  returned: always
  type: str
nodes:
  description: One entry per node as the daemons see it (C(index), C(host), C(hostname), C(status), C(version),
    C(connections) index to state).
  returned: always
  type: list
  elements: dict
expected:
  description: The addresses of O(nodes_config), in order.
  returned: always
  type: list
  elements: str
problems:
  description: What keeps the domain from being ready, one line each.
  returned: always
  type: list
  elements: str
waited:
  description: Seconds spent waiting.
  returned: always
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import first_line, run
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.imex import (
    COMMAND,
    domain_problems,
    parse_domain_status,
    parse_node_list,
)

FIX = (
    "Check on each tray named that nvidia-imex runs (systemctl status nvidia-imex; /var/log/nvidia-imex.log), that "
    "the trays reach each other on the daemon's SERVER_PORT (50000 by default), and that every tray's "
    "nodes_config.cfg is the same; a tray that stays out can be left out of the domain by a run without it."
)


def _read_list(module, path):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        module.fail_json(
            msg=f"imex_domain: cannot read the node list {path} ({err.strerror}); the imex role writes it.",
            ready=False,
        )
    try:
        return parse_node_list(text)
    except ParseError as err:
        module.fail_json(msg=f"imex_domain: {err}; the imex role writes this file from the fleet state.", ready=False)
    return []


def main():
    module = AnsibleModule(
        argument_spec={
            "config": {"type": "path", "default": "/etc/nvidia-imex/config.cfg"},
            "nodes_config": {"type": "path", "default": "/etc/nvidia-imex/nodes_config.cfg"},
            "wait": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["wait"] < 0:
        module.fail_json(msg=f"imex_domain: wait is {p['wait']}; give the seconds to wait, 0 or more.")
    result = {"changed": False, "ready": False, "status": None, "nodes": [], "expected": [], "problems": []}
    ctl = module.get_bin_path("nvidia-imex-ctl", opt_dirs=["/usr/sbin", "/usr/local/bin"])
    if not ctl:
        reason = "nvidia-imex-ctl is not installed (the nvidia-imex-<branch> package)"
        result.update(problems=[reason], waited=0.0)
        if module.check_mode:
            module.exit_json(**result)
        module.fail_json(msg=f"imex_domain: {reason}; run the imex role first.", **result)
    expected = _read_list(module, p["nodes_config"])
    result["expected"] = expected
    start = time.monotonic()
    while True:
        rc, out, err = run(module, [ctl, "-c", p["config"], "-N", "-j"])
        try:
            status = parse_domain_status(out)
        except ParseError as exc:
            text = f"`{COMMAND}` exited {rc}: {first_line(err, out) or 'no output'}" if rc else str(exc)
            result.update(status=None, nodes=[], problems=[text])
        else:
            result.update(status=status["status"], nodes=status["nodes"], problems=domain_problems(status, expected))
        waited = time.monotonic() - start
        if not result["problems"] or waited >= p["wait"]:
            break
        time.sleep(min(2.0, max(0.1, p["wait"] - waited)))
    result["waited"] = round(waited, 1)
    result["ready"] = not result["problems"]
    if not result["ready"]:
        module.fail_json(
            msg="the IMEX domain is not ready after {:.0f} s: {}. {}".format(
                waited, "; ".join(result["problems"]), FIX
            ),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
