# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops-health: the node health check between runs, as a command (no Ansible on the node).

The checks and the decisions are the collection's (``plugins/module_utils/health.py``); this file
runs the node's commands under their timeouts, keeps the Xid state and calls Slurm. The validate
role's ``health_check`` entry point copies both to ``/usr/local/lib/gpuops-health`` and installs a
launcher, ``/usr/local/sbin/gpuops-health``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

from ansible_collections.gpuops.cluster.plugins.module_utils import health as h
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v

# slurmd runs its HealthCheckProgram with a short PATH (/usr/bin:/bin, no sbin): ibstat (/usr/sbin)
# would be "not installed". The check looks where root's tools are, then wherever its PATH says.
STANDARD_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def search_path(path):
    """Root's standard folders first, then the others of ``path``."""
    extra = [folder for folder in path.split(os.pathsep) if folder and folder not in STANDARD_PATH]
    return os.pathsep.join([*STANDARD_PATH, *extra])


class Node:
    """The node the check runs on: commands under a timeout, files, the Slurm calls."""

    def __init__(self, timeout=h.COMMAND_TIMEOUT_S):
        self.timeout = timeout

    def run(self, argv):
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout,
                env={**os.environ, "LC_ALL": "C", "PATH": search_path(os.environ.get("PATH", ""))},
                check=False,
            )
        except FileNotFoundError:
            return None, f"{argv[0]} is not installed"
        except subprocess.TimeoutExpired:
            return None, "`{}` did not answer within {} s".format(" ".join(argv), self.timeout)
        if done.returncode != 0 and not done.stdout.strip():
            first = (done.stderr or "").strip().splitlines()[:1]
            return None, "`{}` exited {}: {}".format(
                " ".join(argv), done.returncode, first[0] if first else "no output"
            )
        return done.stdout, None

    def read(self, _check, argv):
        return self.run(argv)

    @staticmethod
    def file(path):
        return h.read_file(path)


def _write_state(path, state):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)


def _write_textfile(config, records, drained=None):
    """The result for the node exporter (health.textfile), where its textfile folder exists: written
    whole and renamed into place, as the textfile collector asks, so that a scrape never reads half."""
    folder = config.get("textfile_dir")
    if not folder or not os.path.isdir(folder):
        return
    path = os.path.join(folder, h.TEXTFILE)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(h.textfile(records, time.time(), drained))
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as exc:
        _say(f"gpuops-health: cannot write {path}: {exc}", sys.stderr)


def _say(text, stream=None):
    """One line to stdout (or ``stream``): the command's output."""
    (stream or sys.stdout).write(f"{text}\n")


def main(argv=None, node=None):
    parser = argparse.ArgumentParser(
        prog="gpuops-health",
        description="Quick health check of a GPU node (gpuops.cluster). Slurm: drains the node with the failed "
        "checks as the reason, and resumes it once they pass, if this check drained it.",
    )
    parser.add_argument(
        "--mode",
        choices=["report", "slurm", "npd"],
        default="report",
        help="report: print only; slurm: drain and resume (slurmd's HealthCheckProgram); "
        "npd: node-problem-detector's custom plugin (exit 0 OK, 1 problem, 2 unknown)",
    )
    parser.add_argument("--config", default=h.CONFIG)
    parser.add_argument("--state", default=h.STATE)
    parser.add_argument("--json", action="store_true", help="print the records as JSON")
    parser.add_argument(
        "--clear-xids",
        action="store_true",
        help="forget the fatal Xids kept from earlier checks (after the GPU was repaired or reset)",
    )
    args = parser.parse_args(argv)
    node = node or Node()
    started = time.monotonic()

    def deadline(_signum, _frame):
        raise TimeoutError(f"the check took more than {h.DEADLINE_S} s")

    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, deadline)
        signal.alarm(h.DEADLINE_S)
    unknown = h.NPD_UNKNOWN if args.mode == "npd" else (0 if args.mode == "slurm" else 2)
    try:
        text = node.file(args.config)
        if text is None:
            raise h.ConfigError(
                f"{args.config} is missing: run the validate role's health_check entry point on this node"
            )
        config = h.load_config(text, args.config)
        config["sysfs_gpus"] = h.sysfs_gpus()
        try:
            state = json.loads(node.file(args.state) or "{}")
        except ValueError:
            state = {}
        boot_id = (node.file("/proc/sys/kernel/random/boot_id") or "").strip()
        records, state = h.node_checks(config, node.read, state, boot_id, args.clear_xids)
        _write_state(args.state, state)
    except (h.ConfigError, TimeoutError, OSError) as exc:
        # Slurm: exit 0 even so; slurmd does not register while its HealthCheckProgram fails at start,
        # and a node that cannot register is DOWN with no reason instead of drained with one.
        _say(f"gpuops-health: cannot check this node: {exc}", sys.stderr)
        return unknown
    finally:
        if hasattr(signal, "SIGALRM"):
            signal.alarm(0)
    took = time.monotonic() - started
    verdict = v.worst(records)
    if args.json:
        _say(json.dumps({"verdict": verdict, "seconds": round(took, 2), "checks": records}, indent=1))
    elif args.mode != "npd":
        _say("\n".join(h.summary_lines(records)))
        _say(f"gpuops-health: {verdict} in {took:.1f} s")
    if args.mode == "npd":
        # Report mode prints only: a person's look must not replace what the node's own check (slurmd's or
        # node-problem-detector's) left for Prometheus, such as the drain GpuopsNodeDrainedByHealthCheck reads.
        _write_textfile(config, records)
    if args.mode == "npd":
        if verdict == "fail":
            _say(h.reason_for(records, limit=80))
            return h.NPD_NONOK
        _say("gpuops-health: ok")
        return h.NPD_OK
    if args.mode == "report":
        return 1 if verdict == "fail" else 0

    name = config.get("node") or socket.gethostname().split(".")[0]
    text, reason = node.run(["sinfo", "-h", "-N", "-n", name, "-o", "%N|%t|%E"])
    if text is None:
        _say(f"gpuops-health: cannot read {name}'s state from Slurm: {reason}", sys.stderr)
        return 0
    drained, reason_now = h.parse_node_state(text, name)
    action, why = h.decide(records, drained, reason_now)
    ours = why if action == "drain" else (reason_now if action == "keep" and reason_now.startswith(h.PREFIX) else "")
    _write_textfile(config, records, ours)
    if action == "drain":
        done, reason = node.run(["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={why}"])
    elif action == "resume":
        done, reason = node.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"])
    else:
        done, reason = "", None
    _say(f"gpuops-health: {name}: {action}: {why}")
    if done is None:
        _say(f"gpuops-health: {action} {name} failed: {reason}", sys.stderr)
    return 0
