# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback for bench/run.py: counts what a playbook run does on each host and writes it as JSON.

Enabled by bench/run.py only (ANSIBLE_CALLBACK_PLUGINS=bench/callback, ANSIBLE_CALLBACKS_ENABLED=
gpuops_bench); GPUOPS_BENCH_OUT names the JSON file. Per host: tasks run (ok or changed, as in the
PLAY RECAP), skipped, changed, remote module calls (a task or loop item whose module runs on the
host; set_fact, assert, debug, includes and other controller-side actions run none) and time spent
per role.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: gpuops_bench
type: aggregate
short_description: Counts tasks, skips and remote module calls per host for bench/run.py
description:
  - Writes per-host counts of a playbook run to the JSON file named by C(GPUOPS_BENCH_OUT).
requirements:
  - enabled in ANSIBLE_CALLBACKS_ENABLED
"""

# Actions that run on the controller only: no module is sent to the host.
CONTROLLER_ONLY = {
    "set_fact",
    "assert",
    "debug",
    "fail",
    "meta",
    "include_tasks",
    "import_tasks",
    "include_role",
    "import_role",
    "include_vars",
    "add_host",
    "group_by",
    "set_stats",
    "pause",
}


def _short(action):
    return action.rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuops_bench"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.hosts = defaultdict(
            lambda: {
                "run": 0,
                "changed": 0,
                "skipped": 0,
                "failed": 0,
                "module_calls": 0,
                "roles": defaultdict(lambda: {"run": 0, "skipped": 0, "module_calls": 0, "seconds": 0.0}),
                "tasks": [],
            }
        )
        self.started = {}
        self.t0 = time.monotonic()

    # --- helpers
    def _role(self, task):
        role = getattr(task, "_role", None)
        return role.get_name() if role else "(play)"

    def _calls(self, task, result):
        if _short(task.action) in CONTROLLER_ONLY:
            return 0
        items = result._result.get("results")
        if task.loop is not None or task.loop_with or isinstance(items, list):
            return sum(1 for r in items or [] if not r.get("skipped"))
        return 1

    def _record(self, result, state):
        task = result._task
        host = result._host.get_name()
        h = self.hosts[host]
        role = self._role(task)
        began = self.started.get((host, task._uuid), self.started.get(task._uuid, time.monotonic()))
        seconds = time.monotonic() - began
        if state == "skipped":
            h["skipped"] += 1
            h["roles"][role]["skipped"] += 1
            h["tasks"].append({"role": role, "task": task.get_name(), "action": _short(task.action), "skipped": True})
            return
        if state == "failed":
            h["failed"] += 1
        else:
            h["run"] += 1
            if result._result.get("changed"):
                h["changed"] += 1
        calls = self._calls(task, result)
        h["module_calls"] += calls
        r = h["roles"][role]
        r["run"] += 1
        r["module_calls"] += calls
        r["seconds"] += seconds
        h["tasks"].append(
            {
                "role": role,
                "task": task.get_name(),
                "action": _short(task.action),
                "calls": calls,
                "seconds": round(seconds, 3),
            }
        )

    # --- events
    def v2_playbook_on_task_start(self, task, is_conditional):
        self.started[task._uuid] = time.monotonic()

    def v2_runner_on_start(self, host, task):
        self.started[(host.get_name(), task._uuid)] = time.monotonic()

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "failed")

    def v2_playbook_on_stats(self, stats):
        out = os.environ.get("GPUOPS_BENCH_OUT")
        if not out:
            return
        data = {"seconds": round(time.monotonic() - self.t0, 1), "hosts": {}}
        for host, h in sorted(self.hosts.items()):
            data["hosts"][host] = {**h, "roles": {k: dict(v) for k, v in h["roles"].items()}}
        with open(out, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
