# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: a no-op run of playbooks/site.yml on the demo cluster (make bench).

    make bench                     # builds what the demo needs first
    python bench/run.py [--runs N] [--keep-json DIR] [--top N]

The demo cluster must be up and converged (make demo); with --up this script runs make demo
first. Each run applies site.yml to inventories/demo again and prints its wall time, then per
host: tasks run (ok or changed, as in the PLAY RECAP), changed, skipped, and remote module calls
(a task or loop item whose module runs on the host; set_fact, assert, debug and includes run
none); then the time and tasks per role, and the slowest tasks. A benchmark, never a pass/fail
test: a re-run that changes something is reported, not failed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INVENTORY = ["-i", "inventories/demo/hosts.yml"]
CONNECTION = "tests/demo/connection.yml"
# The targets for a no-op run: wall time (median of the runs), tasks run on the biggest host,
# tasks skipped on a GPU node.
TARGETS = {"wall_s": 60, "tasks_biggest_host": 130, "skipped_gpu_host": 60}
# A host that ran any of these roles is a GPU node.
GPU_ROLES = {"nvidia_driver"}
# The modules that read a host's hardware or packages, and the fact gathering.
HARDWARE_READS = {"gpu_facts", "ib_facts", "dpkg_facts", "setup", "gather_facts"}


def demo_up() -> bool:
    rc = subprocess.run(
        ["docker", "container", "inspect", "gpuops-demo-head"], capture_output=True, check=False
    ).returncode
    return rc == 0


def playbook_command() -> str:
    """ansible-playbook next to this interpreter (the project's venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    return str(beside) if beside.exists() else "ansible-playbook"


def children_cpu() -> float:
    """CPU seconds (user and system) of every finished child process so far: ansible-playbook and its forks."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_site(out: Path, log: Path, connection: str, check: bool) -> tuple[float, float]:
    """One site.yml run: (wall seconds, controller CPU seconds)."""
    env = dict(os.environ)
    env.update(
        ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "bench" / "callback"),
        ANSIBLE_CALLBACKS_ENABLED="gpuops_bench",
        GPUOPS_BENCH_OUT=str(out),
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
    )
    cpu = children_cpu()
    start = time.monotonic()
    with log.open("w") as f:
        rc = subprocess.run(
            [playbook_command(), *INVENTORY, "-i", connection, "playbooks/site.yml", *(["--check"] if check else [])],
            cwd=ROOT,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    wall = time.monotonic() - start
    if rc != 0:
        sys.exit(f"site.yml failed (rc {rc}); see {log}")
    return wall, children_cpu() - cpu


def report(data: dict, wall: float, cpu: float, top: int) -> None:
    hosts = data["hosts"]
    print(f"site.yml on the demo cluster, run again: {wall:.1f} s wall (target {TARGETS['wall_s']} s)")
    print(f"controller CPU: {cpu:.1f} s, {cpu / len(hosts):.1f} s per host ({len(hosts)} hosts)")
    print(f"{'host':<12} {'run':>5} {'changed':>8} {'skipped':>8} {'module calls':>13}")
    for name, h in hosts.items():
        print(f"{name:<12} {h['run']:>5} {h['changed']:>8} {h['skipped']:>8} {h['module_calls']:>13}")
    biggest = max(h["run"] for h in hosts.values())
    print(f"tasks run on the biggest host: {biggest} (target {TARGETS['tasks_biggest_host']})")
    gpu_nodes = [
        h
        for h in hosts.values()
        if any(r["run"] and name.rsplit(".", 1)[-1] in GPU_ROLES for name, r in h["roles"].items())
    ]
    skipped = max((h["skipped"] for h in gpu_nodes), default=0)
    print(f"tasks skipped on the most-skipping GPU node: {skipped} (target {TARGETS['skipped_gpu_host']})")
    # Facts once (issue 61): each host's hardware and packages read once per run, by the first play.
    reads = {
        name: sum(1 for t in h["tasks"] if not t.get("skipped") and t["action"] in HARDWARE_READS)
        for name, h in hosts.items()
    }
    print(f"hardware and package reads per host ({', '.join(sorted(HARDWARE_READS))}): "
          + ", ".join(f"{name} {count}" for name, count in reads.items()))  # fmt: skip
    roles: dict[str, dict] = {}
    for h in hosts.values():
        for role, r in h["roles"].items():
            acc = roles.setdefault(role, {"run": 0, "skipped": 0, "module_calls": 0, "seconds": 0.0})
            for key in acc:
                acc[key] += r[key]
    print()
    print("per role, all hosts (task-seconds overlap across hosts run in parallel):")
    print(f"{'role':<34} {'run':>5} {'skipped':>8} {'module calls':>13} {'task-s':>8}")
    for role, r in sorted(roles.items(), key=lambda kv: -kv[1]["seconds"]):
        print(f"{role:<34} {r['run']:>5} {r['skipped']:>8} {r['module_calls']:>13} {r['seconds']:>8.1f}")
    if top:
        tasks = [dict(t, host=name) for name, h in hosts.items() for t in h["tasks"] if not t.get("skipped")]
        print()
        print(f"slowest {top} tasks:")
        for t in sorted(tasks, key=lambda t: -t["seconds"])[:top]:
            print(f"  {t['seconds']:6.2f} s  {t['host']:<11} {t['role']}: {t['task']}")
    changed = sum(h["changed"] for h in hosts.values())
    if changed:
        print(f"NOTE: {changed} changed on a converged cluster: not a no-op run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="no-op runs to time (default 1)")
    parser.add_argument("--up", action="store_true", help="run make demo first when the cluster is not up")
    parser.add_argument("--top", type=int, default=10, help="list the N slowest tasks (default 10)")
    parser.add_argument(
        "--connection",
        default=CONNECTION,
        help=f"inventory that says how to reach the containers (default {CONNECTION}; another one compares "
        "connection plugins, e.g. community.docker.docker_api)",
    )
    parser.add_argument("--check", action="store_true", help="time check mode (--check) instead")
    parser.add_argument("--keep-json", type=Path, help="keep each run's counts as JSON in this folder")
    args = parser.parse_args()

    if not demo_up():
        if not args.up:
            sys.exit("The demo cluster is not up: run make demo first (or pass --up).")
        subprocess.run(["make", "--no-print-directory", "demo"], cwd=ROOT, check=True)

    walls: list[float] = []
    cpus: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(1, args.runs + 1):
            out = Path(tmp) / f"run{n}.json"
            log = ROOT / ".cache" / "demo" / f"bench-run{n}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            wall, cpu = run_site(out, log, args.connection, args.check)
            walls.append(wall)
            cpus.append(cpu)
            data = json.loads(out.read_text())
            if args.keep_json:
                args.keep_json.mkdir(parents=True, exist_ok=True)
                (args.keep_json / out.name).write_text(json.dumps(data, indent=1))
            if args.runs > 1:
                print(f"== run {n} of {args.runs}")
            report(data, wall, cpu, args.top)
    if args.runs > 1:
        hosts = len(data["hosts"])
        print(
            f"== median of {args.runs}{' (check mode)' if args.check else ''}: {statistics.median(walls):.1f} s wall "
            f"(target {TARGETS['wall_s']} s), controller CPU {statistics.median(cpus):.1f} s, "
            f"{statistics.median(cpus) / hosts:.1f} s per host"
        )


if __name__ == "__main__":
    main()
