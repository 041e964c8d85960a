# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: a month of faults on a fleet of GPU nodes, through the node state machine (make bench-heal).

    python bench/heal.py [--nodes 1000] [--days 30] [--interval 300] [--seed 1]

Replays a failure trace over a simulated fleet and takes every decision with the collection's own
code (``module_utils/node_state.py``: advance, decide, the reset step, the budget, the quarantine),
as gpuops-health takes them on each node. The trace is shaped like the published fleet studies:
Meta's Llama 3 report (arXiv 2407.21783, table 5: 419 unexpected interruptions in 54 days on 16,384
H100 GPUs, about 0.0038 per 8-GPU node and day; GPU and HBM faults most often, then network, then
host) with a few lemon nodes at ``--lemon-factor`` times the rate and network bursts (a leaf switch
takes sixteen nodes at once). What it simulates and what it does not:

- each node's check runs every ``--interval`` seconds (slurmd's HealthCheckInterval), at its own
  phase; a fault is seen at the node's next check, or, with ``--watch`` (``validate_health_watch``),
  an Xid 2 s after its kernel log line and any other fault at the watcher's next periodic check
  (``--watch-interval``, ``validate_health_watch_interval``);
- jobs arrive on an idle node in service at one per ``--job-gap`` seconds and run
  ``--job-length`` seconds on average (exponential); a job that starts on a node with a fault
  outstanding is counted;
- a fatal fault (an Xid whose catalogue action is a reset or a reboot) ends the job running on the
  node (its GPU fell off the bus, or its memory failed: the application gets the error);
- the reset step is the node's own (``nvidia-smi -r`` once idle), failing with ``--reset-failure``
  probability (a held GPU), which owes a reboot instead;
- the reboot step is Slurm's (``scontrol reboot ASAP`` once idle, ``--boot-minutes`` to come back);
  with ``--hang`` probability the node never comes back: slurmctld marks it down after
  ``--resume-timeout`` and the alert (GpuopsExporterDown) runs remediate.yml through the rulebook,
  ``--alert-delay`` seconds later, which power-cycles it; a reboot fails to cure the fault with
  ``--reboot-failure`` probability (the fault shows again on the new boot), which owes a power
  cycle (the alert GpuopsNodePowerCycleOwed, the rulebook, remediate.yml), and a power cycle with
  ``--power-failure`` probability, which quarantines the node; the check after a boot comes
  ``WATCH_START_S`` after it with ``--watch``, else at the next interval;
- a person's inspection (thermal and power faults, quarantine) comes ``--person`` hours after it
  is owed, on average;
- a check that cannot run (its deadline) drains the node: ``--timeouts`` per node and month.

Prints the faults by class, jobs started on a faulty node (target 0), false drains, fault to drained
(p50, p99; target p99 <= 60 s), fault to back in service (median per class; target <= 10 min for
reset-curable faults), the most nodes out at once against the budget, the budget's refusals and the
lemon nodes found. A benchmark prints numbers; it is never a pass/fail test.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.gpuops.cluster.plugins.module_utils import health as h  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v  # noqa: E402

PREFIX = "gpuops-health: "
DAY = 86400
# Fault classes: share of faults, what the check sees (a failed check and what it owes), and what
# cures it. From the Llama 3 report's table 5 (GPU 30.1 %, HBM3 17.2 %, software and host 12.9 % +
# network 8.4 % + host maintenance and others): GPU and HBM faults are reset-curable Xids (48, 94
# with 154, 119), GPUs that fell off the bus need a reboot, NVLink faults a reset, network faults a
# link repair (the port comes back), thermal and power faults a person.
CLASSES = {
    "gpu (reset)": (0.30, "xid", "reset"),
    "hbm (reset)": (0.17, "xid", "reset"),
    "nvlink (reset)": (0.06, "xid", "reset"),
    "gpu off the bus (reboot)": (0.12, "xid", "reboot"),
    "host (reboot)": (0.13, "xid", "reboot"),
    "network (link)": (0.14, "ib_ports", None),
    "thermal, power (person)": (0.08, "dcgm_health", "inspect"),
}
RATE_PER_NODE_DAY = 419 / 54 / 2048


class Node:
    def __init__(self, name):
        self.name = name
        self.state = ns.new_state("boot-0")
        self.boot = 0
        self.drained = False
        self.reason = ""
        self.job_end = 0.0
        self.faults = []  # the true faults outstanding: {"cls", "check", "action", "t", "gpu", "seen"}
        self.drained_at = None
        self.classes = set()  # the fault classes of the current episode (fault to back in service)
        self.episode = 0.0  # when it began
        self.phase = 0.0
        self.rebooting = False
        self.held = False  # the budget kept it in service at a check of its current faults


def trace(rng, args, names):
    """``[(t, node, class)]``: Poisson faults per node, lemons at 20 x, and network bursts."""
    events = []
    lemons = set(rng.sample(names, args.lemons))
    factor = args.lemon_factor
    classes = list(CLASSES)
    weights = [CLASSES[c][0] for c in classes]
    horizon = args.days * DAY
    for name in names:
        rate = RATE_PER_NODE_DAY * (factor if name in lemons else 1) / DAY
        t = rng.expovariate(rate)
        while t < horizon:
            events.append((t, name, rng.choices(classes, weights)[0]))
            t += rng.expovariate(rate)
    for _burst in range(args.bursts):
        t = rng.uniform(0, horizon)
        start = rng.randrange(0, len(names) - 16)
        events += [(t + rng.uniform(0, 30), name, "network (link)") for name in names[start : start + 16]]
    return sorted(events), lemons


def records_of(node, now):
    """What the node's check sees now: a record per check, from its true faults."""
    out = [
        v.record("xid", "all GPUs", "x", "none", "pass"),
        v.record("ib_ports", "8 InfiniBand port(s)", "x", "all Active", "pass"),
        v.record("dcgm_health", "all GPUs", "x", "Healthy", "pass"),
    ]
    faults = []
    for fault in node.faults:
        subject = f"GPU{fault['gpu']}" if fault["check"] != "ib_ports" else "mlx5_0:1"
        if fault["check"] == "xid" and fault["seen"]:
            continue  # an Xid line counts once; what it owes stays in the state
        out = [r for r in out if r["check"] != fault["check"]]
        out.append(v.record(fault["check"], subject, "x", fault["cls"], "fail"))
        if fault["action"] and not fault["seen"]:
            faults.append(ns.fault(fault["action"], subject, fault["cls"]))
        fault["seen"] = True
    return out, faults


def fleet_text(nodes):
    return "".join(f"{n.name}|{'drain' if n.drained else 'idle'}|{n.reason if n.drained else 'none'}\n" for n in nodes)


def run(args):
    rng = random.Random(args.seed)
    names = [f"gpu{i:04d}" for i in range(args.nodes)]
    nodes = {name: Node(name) for name in names}
    for node in nodes.values():
        node.phase = rng.uniform(0, args.interval)
    events, lemons = trace(rng, args, names)
    queue = [(t, 0, "fault", name, cls) for t, name, cls in events]
    for name in rng.sample(names, min(args.nodes, int(args.timeouts * args.nodes * args.days / 30))):
        queue.append((rng.uniform(0, args.days * DAY), 0, "timeout", name, None))
    heapq.heapify(queue)
    seq = 1
    stats = {
        "faults": {c: 0 for c in CLASSES},
        "jobs_on_faulty": 0,
        "jobs_kept_in_service": {"network": 0, "other": 0},
        "false_drains": 0,
        "to_drained": [],
        "to_service": {c: [] for c in CLASSES},
        "refused": 0,
        "peak_out": 0,
        "quarantined": set(),
        "resets": 0,
        "reset_failures": 0,
        "reboots": 0,
        "power_cycles": 0,
        "hung": 0,
        "latches": 0,
        "latched_s": 0.0,
    }
    # The nodes' Slurm Comments: the budget's memory (take-outs within the window) and its latch.
    comments, latched_at = {}, None
    limit = ns.budget_limit(args.nodes, args.budget_nodes, args.budget_percent)

    def next_check(node, now):
        k = int((now - node.phase) // args.interval) + 1
        return node.phase + k * args.interval

    def schedule(node, when, what, data=None):
        nonlocal seq
        seq += 1
        heapq.heappush(queue, (when, seq, what, node.name, data))

    horizon = args.days * DAY
    while queue:
        now, _seq, what, name, data = heapq.heappop(queue)
        if now > horizon:
            break
        node = nodes[name]
        if what == "fault":
            stats["faults"][data] += 1
            _share, check, action = CLASSES[data]
            fault = {"cls": data, "check": check, "action": action, "t": now, "gpu": rng.randrange(8), "seen": False}
            node.faults.append(fault)
            if not node.classes:
                node.episode = now
            node.classes.add(data)
            if check == "xid" and action in ("reset", "reboot"):
                node.job_end = min(node.job_end, now)  # the fault ends the job running on the GPU
            if check == "ib_ports":
                schedule(node, now + rng.expovariate(1 / (args.link_repair * 3600)), "cure", fault)
            # The kernel-log watcher (--watch, validate_health_watch) checks 2 s after an Xid line, and
            # every --watch-interval s (validate_health_watch_interval) for the rest; without it, other
            # faults wait for the node's next periodic check.
            if args.watch and check == "xid":
                seen_at = now + 2
            elif args.watch and args.watch_interval:
                seen_at = now + rng.uniform(0, args.watch_interval)
            else:
                seen_at = next_check(node, now)
            if not node.drained:
                # Jobs that start on it before its check drains it.
                window = seen_at - max(now, node.job_end)
                if window > 0:
                    # Jobs arriving at one per job_gap seconds over the window (Bernoulli steps).
                    steps = [rng.random() < window / args.job_gap / 50 for _step in range(50)]
                    stats["jobs_on_faulty"] += sum(steps)
            schedule(node, seen_at, "check")
        elif what == "timeout":
            if not node.drained:
                node.state = ns.cannot_check(node.state, "the checks took more than 40 s", now=now)
                node.drained, node.reason, node.drained_at = True, ns.reason(node.state, PREFIX), now
                stats["false_drains"] += 1
                schedule(node, next_check(node, now), "check")
        elif what == "cure":
            if data in node.faults:
                node.faults.remove(data)
                if node.drained:
                    schedule(node, next_check(node, now), "check")
        elif what == "booted":
            # The node comes back on a new boot (Slurm's reboot, or remediate.yml's power cycle): a fault
            # the boot did not cure shows again; the check after the boot is the watcher's or the interval's.
            node.boot += 1
            node.rebooting = False
            failure = args.power_failure if data == "power" else args.reboot_failure
            stats["reboots" if data == "reboot" else "power_cycles"] += 1
            kept = []
            for fault in node.faults:
                if fault["check"] == "ib_ports" or fault["action"] == "inspect":
                    kept.append(fault)
                elif rng.random() < failure:
                    fault["seen"] = False
                    kept.append(fault)
            node.faults = kept
            schedule(node, now + h.WATCH_START_S if args.watch else next_check(node, now), "check")
        elif what == "person":
            # A person reboots the node, or inspects and clears it: every fault of the node is cured.
            node.boot += 1
            quarantined = "inspect node" in node.state["owed"]
            node.faults = [f for f in node.faults if f["check"] == "ib_ports"]
            node.state = ns.advance(
                node.state, [], [], boot_id=f"boot-{node.boot}", now=now, clear=True, complete=False
            )
            if quarantined:
                stats["quarantined"].add(name)
            schedule(node, next_check(node, now), "check")
        elif what == "reopen":
            # remediate.yml -e remediate_reopen_budget=true: this collection's Comments cleared.
            if latched_at is not None:
                stats["latched_s"] += now - latched_at
            comments, latched_at = {}, None
        elif what == "check":
            records, faults = records_of(node, now)
            quarantine = (args.quarantine, 7 * DAY) if args.quarantine else None
            node.state = ns.advance(
                node.state, records, faults, boot_id=f"boot-{node.boot}", now=now, quarantine=quarantine
            )
            action, why = ns.decide(node.state, node.drained, node.reason, PREFIX)
            if action == "drain" and not node.drained:
                allowed, _why, spent = ns.budget(
                    fleet_text(nodes.values()), name, args.budget_nodes, args.budget_percent,
                    comments=comments, window=args.budget_window, now=now,
                )  # fmt: skip
                if spent:
                    # The budget is latched: a person looks for the shared cause, then reopens it.
                    comments[name], latched_at = spent, now
                    stats["latches"] += 1
                    schedule(node, now + rng.expovariate(1 / (args.person * 3600)), "reopen")
                if not allowed:
                    stats["refused"] += 1
                    node.held = True
                    kind = "network" if all(f["check"] == "ib_ports" for f in node.faults) else "other"
                    stats["jobs_kept_in_service"][kind] += int(rng.random() < args.interval / args.job_gap)
                    schedule(node, now + args.interval, "check")
                    continue
                node.drained, node.drained_at = True, now
                comments[name] = ns.budget_comment("taken", now)
                # Fault to drained, apart for the faults the budget held in service first.
                stats["to_drained"] += [(f["check"] == "xid", now - f["t"], node.held) for f in node.faults]
                node.held = False
                stats["peak_out"] = max(stats["peak_out"], sum(n.drained for n in nodes.values()))
                if any(e["action"] == "inspect" for e in node.state["owed"].values()):
                    schedule(node, now + rng.expovariate(1 / (args.person * 3600)), "person")
            if action in ("drain", "keep"):
                node.reason = why if action == "drain" else node.reason
                step, _detail = ns.reset_plan(node.state, node.job_end <= now, 0)
                if step == "reset":
                    stats["resets"] += 1
                    done = rng.random() >= args.reset_failure
                    stats["reset_failures"] += not done
                    node.state = ns.after_reset(node.state, done, "bench", now=now)
                    if done:
                        node.faults = [f for f in node.faults if f["action"] != "reset"]
                elif step == "wait":
                    schedule(node, next_check(node, node.job_end), "check")
                    continue
                rstep, rdetail = ns.reboot_plan(node.state, node.rebooting)
                if rstep == "reboot":
                    node.state = ns.after_reboot_request(node.state, True, "bench", now=now)
                    node.rebooting = True
                    start = max(now, node.job_end)  # ASAP: once the node's jobs end
                    if rng.random() < args.hang:
                        stats["hung"] += 1
                        back = start + args.resume_timeout + args.alert_delay + args.boot_minutes * 60
                        schedule(node, back, "booted", "power")
                    else:
                        schedule(node, start + args.boot_minutes * 60, "booted", "reboot")
                    node.reason = ns.reason(node.state, PREFIX)
                    continue
                if rstep == "wait":
                    continue
                if rstep == "escalate":
                    node.state = ns.escalate(node.state, rdetail, now=now)
                    if rdetail == "power":
                        schedule(node, now + args.alert_delay + args.boot_minutes * 60, "booted", "power")
                    else:
                        schedule(node, now + rng.expovariate(1 / (args.person * 3600)), "person")
                node.reason = ns.reason(node.state, PREFIX) if ns.outstanding(node.state) else node.reason
                schedule(node, now + args.interval, "check")
            elif action == "resume":
                node.drained, node.reason = False, ""
                for cls in node.classes:
                    stats["to_service"][cls].append(now - min(node.episode, node.drained_at))
                node.classes = {f["cls"] for f in node.faults}
                node.episode = min((f["t"] for f in node.faults), default=now)
            elif node.faults:
                schedule(node, now + args.interval, "check")
            if not node.drained:
                node.job_end = now + rng.expovariate(1 / args.job_length) if rng.random() < 0.7 else now
    stats["lemons"] = lemons
    stats["limit"] = limit
    return stats


def percentile(values, share):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def minutes(value):
    return "-" if value is None else f"{value / 60:.1f} min"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--interval", type=int, default=300, help="HealthCheckInterval, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lemons", type=int, default=5)
    parser.add_argument("--lemon-factor", type=float, default=100.0, help="a lemon's fault rate, times the fleet's")
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--job-gap", type=float, default=600.0, help="mean seconds between jobs on an idle node")
    parser.add_argument("--job-length", type=float, default=3600.0, help="mean job length, seconds")
    parser.add_argument("--reset-failure", type=float, default=0.1)
    parser.add_argument("--person", type=float, default=4.0, help="mean hours until a person inspects")
    parser.add_argument("--boot-minutes", type=float, default=10.0, help="a GPU server's reboot, minutes")
    parser.add_argument("--reboot-failure", type=float, default=0.1, help="a reboot that does not cure the fault")
    parser.add_argument("--power-failure", type=float, default=0.3, help="a power cycle that does not cure it")
    parser.add_argument("--hang", type=float, default=0.03, help="a reboot that never comes back")
    parser.add_argument("--resume-timeout", type=float, default=900.0, help="Slurm's ResumeTimeout, seconds")
    parser.add_argument("--alert-delay", type=float, default=180.0,
                        help="seconds from a fault Prometheus sees to remediate.yml's power cycle (scrape, "
                        "the alert's for, Alertmanager's group_wait, the rulebook)")  # fmt: skip
    parser.add_argument("--link-repair", type=float, default=2.0, help="mean hours until a link is repaired")
    parser.add_argument("--timeouts", type=float, default=0.01, help="checks that time out, per node and month")
    parser.add_argument("--budget-nodes", type=int, default=ns.BUDGET_NODES)
    parser.add_argument("--budget-percent", type=float, default=ns.BUDGET_PERCENT)
    parser.add_argument("--budget-window", type=int, default=ns.BUDGET_WINDOW_S, help="seconds a take-out counts")
    parser.add_argument("--quarantine", type=int, default=ns.QUARANTINE_FAULTS)
    parser.add_argument("--watch", action="store_true", help="the kernel-log watcher: an Xid is checked 2 s after it")
    parser.add_argument("--watch-interval", type=float, default=30.0, help="the watcher's periodic check, seconds")
    args = parser.parse_args()
    started = time.process_time()
    stats = run(args)
    took = time.process_time() - started
    watching = ", the kernel-log watcher on" if args.watch else ""
    print(f"{args.nodes} nodes, {args.days} days, HealthCheckInterval {args.interval} s{watching}, seed {args.seed}")
    print(f"{'fault class':28} {'faults':>7} {'to service p50':>15} {'p90':>10}")
    for cls, count in stats["faults"].items():
        times = stats["to_service"][cls]
        p50 = statistics.median(times) if times else None
        print(f"{cls:28} {count:7d} {minutes(p50):>15} {minutes(percentile(times, 0.9)):>10}")
    for label, xid in (("Xid faults", True), ("other faults", False)):
        drained = [seconds for is_xid, seconds, held in stats["to_drained"] if is_xid is xid and not held]
        held = [seconds for is_xid, seconds, was in stats["to_drained"] if is_xid is xid and was]
        if drained:
            print(f"fault -> drained, {label}: p50 {round(statistics.median(drained))} s, "
                  f"p99 {round(percentile(drained, 0.99))} s (target p99 <= 60 s); "
                  f"{len(held)} held in service by the budget first")  # fmt: skip
    kept = stats["jobs_kept_in_service"]
    print(f"jobs started on a node with a fault outstanding: {stats['jobs_on_faulty']} before its check saw it "
          f"(between a fault and the check that sees it), {kept['network'] + kept['other']} while the budget kept "
          f"it in service ({kept['network']} of them on network faults: a leaf switch's burst) (target 0)")  # fmt: skip
    print(f"false drains (a check that could not run): {stats['false_drains']}")
    print(f"GPU resets on the node: {stats['resets']}, of which failed (a reboot owed): {stats['reset_failures']}")
    print(f"reboots through Slurm: {stats['reboots']}; power cycles through the BMC: {stats['power_cycles']} "
          f"({stats['hung']} after a reboot that never came back)")  # fmt: skip
    print(f"most nodes out at once: {stats['peak_out']} (budget {stats['limit']} within {args.budget_window} s); "
          f"drains refused: {stats['refused']}; budget latched {stats['latches']} time(s), "
          f"{stats['latched_s'] / 3600:.1f} h in all until a person reopened it")  # fmt: skip
    found = stats["quarantined"] & stats["lemons"]
    print(f"lemon nodes quarantined: {len(found)} of {len(stats['lemons'])}; "
          f"others quarantined: {len(stats['quarantined'] - stats['lemons'])}")  # fmt: skip
    print(f"simulated in {took:.1f} s CPU")


if __name__ == "__main__":
    main()
