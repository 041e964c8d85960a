# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the slurm role over a fleet of N simulated GPU nodes (make bench-fleet).

    make bench-fleet                         # N = 4, 8 and 16
    python bench/fleet.py [--sizes 4,8,16] [--keep]
    python bench/fleet.py --paper 1000,10000   # no Docker: a recorded fleet on the controller

Brings up a Slurm controller and max(N) + 1 light GPU nodes (pcie-l40s, the stand-in driver) as
containers, then for each N: converges the first N nodes (not timed: nodes joining), and times

  noop   the slurm role over the whole fleet, run again (nothing to change)
  down   the same with one node stopped (the run fails there only; its lines are kept)
  add    node N+1 added with --limit (packages, munge, slurmd; the controller by delegation)

printing the wall time, the controller's CPU seconds (ansible-playbook and its forks) and the
controller's peak memory per node (the largest sum of their resident memory, sampled, / N).
The slurm role is the part of site.yml that spans the fleet (slurm.conf, gres.conf, the fleet
state, slurmctld); the per-node roles cost the same per node whatever N is. A benchmark prints
numbers; it is never a pass/fail test. Targets (issue 33): adding one node costs at most 1.2 x
between N = 4 and N = 16 and at most 3 min at N = 16; a no-op run grows no faster than N.
Then, over every node (max(N) + 1), a no-op run with each setting a large site changes (forks as
many as the nodes, pipelining off, a jsonfile fact cache with gathering smart, SITE_SERIAL=25%)
beside the base (this checkout's ansible.cfg), each with its wall, CPU and memory per node;
--no-settings skips them. --keep leaves the containers up (gpuops-bench-fleet-*); otherwise they
are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "bench-fleet"
PREFIX = "gpuops-bench-fleet"
GROUP_VARS = {
    "preflight_today": "2026-11-21",
    "preflight_min_free_gib": {"/usr": 1, "/var": 1},
    "preflight_kernel_headers": "warning",
    "slurm_cluster_name": "bench",
    "slurm_partitions": [{"name": "gpu", "group": "slurm_compute", "default": True}],
    "slurm_slurmd_parameters": ["config_overrides"],
    "slurm_proctrack_type": "proctrack/linuxproc",
    "slurm_task_plugin": "task/none",
    # Every slurmd takes slurm.conf from slurmctld: a node joins with --limit alone.
    "slurm_configless": True,
    "gpusim_dir": str(ROOT / "tests" / "gpusim"),
    "gpusim_mirror": "http://gpusim-repo",
    "gpusim_keyring_url": "http://gpusim-repo/keys/gpusim-archive-keyring.gpg",
    "gpusim_driver_branch": "580",
    "gpusim_driver_version": "580.95.05",
}


def node(n: int) -> str:
    return f"n{n:02d}"


def inventory(count: int) -> Path:
    """An inventory of the controller and nodes n01..n<count>, written under .cache/bench-fleet."""
    hosts = {name: {"ansible_host": f"{PREFIX}-{name}"} for name in ["ctl"] + [node(i) for i in range(1, count + 1)]}
    data = {
        "all": {
            "vars": dict(GROUP_VARS, ansible_connection="community.docker.docker", ansible_user="root"),
            "hosts": hosts,
            "children": {
                "slurm_controller": {"hosts": {"ctl": {}}},
                "slurm_compute": {"hosts": {node(i): {} for i in range(1, count + 1)}},
            },
        }
    }
    path = WORK / f"inventory-{count}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def tree_rss(pid: int) -> int:
    """Resident memory (bytes) of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo.extend(children.get(current, []))
    return total


def playbook(args: list[str], log: Path, expect_rc: tuple[int, ...] = (0,), extra_env: dict | None = None) -> dict:
    """Run ansible-playbook; its wall time, CPU seconds (it and its children) and peak memory."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", **(extra_env or {}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [tool("ansible-playbook"), *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.25):
                peak = max(peak, tree_rss(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rc = proc.wait()
        done.set()
        sampler.join()
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc not in expect_rc:
        sys.exit(f"ansible-playbook {' '.join(args)} ended {rc}, not {expect_rc}; see {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak": peak}


# The settings a large site would change, each a no-op run over every node (N + 1 after the last
# add) beside the base: the same run with this checkout's ansible.cfg (forks 5, pipelining on, no
# fact cache, no batches).
SETTINGS = {
    "base": lambda count: {},
    "forks = nodes": lambda count: {"ANSIBLE_FORKS": str(count)},
    "pipelining off": lambda count: {"ANSIBLE_PIPELINING": "false"},
    "fact cache (jsonfile, smart)": lambda count: {
        "ANSIBLE_GATHERING": "smart",
        "ANSIBLE_CACHE_PLUGIN": "jsonfile",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(WORK / "facts"),
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "3600",
    },
    "SITE_SERIAL=25%": lambda count: {"SITE_SERIAL": "25%"},
}


def measure_settings(count: int, converge: str) -> dict[str, dict]:
    """A no-op run over COUNT nodes with each of SETTINGS (the fact cache filled by a run first)."""
    fleet = str(inventory(count))
    measured = {}
    for name, env in SETTINGS.items():
        slug = "".join(c if c.isalnum() else "-" for c in name)
        if "ANSIBLE_CACHE_PLUGIN" in env(count):
            playbook(["-i", fleet, converge], WORK / f"settings-{slug}-fill.log", extra_env=env(count))
        measured[name] = playbook(["-i", fleet, converge], WORK / f"settings-{slug}.log", extra_env=env(count))
        print(f"N={count:<3} no-op with {name}: {measured[name]['wall']:6.1f} s", flush=True)
    return measured


def print_settings(count: int, measured: dict[str, dict]) -> None:
    """The settings' table: wall, controller CPU per node, peak memory per node, against the base run."""
    base = measured["base"]
    print()
    print(f"no-op over {count} nodes with each setting (the base: this checkout's ansible.cfg, forks 5)")
    print("{:<30} {:>7} {:>7} {:>9} {:>7}".format("setting", "wall s", "vs base", "CPU s/n", "MiB/n"))
    for name, run in measured.items():
        print(
            f"{name:<30} {run['wall']:7.1f} {run['wall'] / base['wall']:6.2f}x {run['cpu'] / count:9.2f}"
            f" {run['peak'] / count / 2**20:7.1f}"
        )


def docker(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4,8,16", help="fleet sizes, comma-separated (default 4,8,16)")
    parser.add_argument("--keep", action="store_true", help="leave the containers up at the end")
    parser.add_argument(
        "--no-settings",
        dest="settings",
        action="store_false",
        help="skip the no-op runs over every node with other settings (forks, pipelining, fact cache, batches)",
    )
    parser.add_argument(
        "--paper",
        metavar="SIZES",
        help="no Docker: what a run does on the controller with a recorded fleet of these sizes (bench/fleet_paper.py)",
    )
    args = parser.parse_args()
    if args.paper:
        sys.path.insert(0, str(ROOT / "bench"))
        import fleet_paper  # noqa: PLC0415 - the mode without Docker, its own module

        fleet_paper.main([int(size) for size in args.paper.split(",")])
        return
    sizes = sorted({int(size) for size in args.sizes.split(",")})
    for name in ("MOLECULE_IMAGE", "GPUSIM_REPO_DIR"):
        if not os.environ.get(name):
            sys.exit(f"{name} is not set: run make bench-fleet, which sets it.")
    WORK.mkdir(parents=True, exist_ok=True)
    biggest = inventory(max(sizes) + 1)
    converge = str(ROOT / "molecule" / "fleet" / "converge.yml")

    print(f"bringing up a controller and {max(sizes) + 1} GPU nodes (pcie-l40s) ...", flush=True)
    playbook(["-i", str(biggest), str(ROOT / "bench" / "fleet.yml")], WORK / "up.log")
    rows = []
    try:
        for size in sizes:
            fleet = str(inventory(size))
            playbook(["-i", fleet, converge], WORK / f"converge-{size}.log")
            noop = playbook(["-i", fleet, converge], WORK / f"noop-{size}.log")
            docker("stop", f"{PREFIX}-{node(1)}")
            # The stopped node fails (unreachable): ansible-playbook ends 4 (2 with a failed task).
            down = playbook(["-i", fleet, converge], WORK / f"down-{size}.log", expect_rc=(2, 4))
            docker("start", f"{PREFIX}-{node(1)}")
            added = playbook(
                ["-i", str(inventory(size + 1)), converge, "--limit", node(size + 1)], WORK / f"add-{size}.log"
            )
            rows.append((size, noop, down, added))
            print(
                f"N={size:<3} noop {noop['wall']:6.1f} s  down {down['wall']:6.1f} s  add {added['wall']:6.1f} s"
                f"  (noop CPU {noop['cpu']:6.1f} s, {noop['peak'] / size / 2**20:5.1f} MiB/node)",
                flush=True,
            )
        if args.settings:
            settings = measure_settings(max(sizes) + 1, converge)
    finally:
        if not args.keep:
            playbook(
                ["-i", str(biggest), str(ROOT / "bench" / "fleet.yml"), "-e", "bench_state=absent"], WORK / "down.log"
            )

    print()
    print("slurm role over N simulated GPU nodes (wall s; controller CPU s; controller peak MiB per node)")
    head = ("N", "no-op", "CPU", "MiB/n", "1 down", "CPU", "add 1", "CPU", "MiB/n")
    print("{:>3} | {:>7} {:>6} {:>6} | {:>7} {:>6} | {:>7} {:>6} {:>6}".format(*head))
    for size, noop, down, added in rows:
        print(
            f"{size:>3} | {noop['wall']:7.1f} {noop['cpu']:6.1f} {noop['peak'] / size / 2**20:6.1f} |"
            f" {down['wall']:7.1f} {down['cpu']:6.1f} | {added['wall']:7.1f} {added['cpu']:6.1f}"
            f" {added['peak'] / size / 2**20:6.1f}"
        )
    if args.settings:
        print_settings(max(sizes) + 1, settings)
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        growth = last[3]["wall"] / first[3]["wall"]
        scale = (last[1]["wall"] / first[1]["wall"]) / (last[0] / first[0])
        print(
            f"adding one node: {growth:.2f} x from N={first[0]} to N={last[0]} (target <= 1.2), "
            f"{last[3]['wall']:.0f} s at N={last[0]} (target <= 180 s)"
        )
        print(f"no-op run: {scale:.2f} of linear growth from N={first[0]} to N={last[0]} (target <= 1.0)")


if __name__ == "__main__":
    main()
