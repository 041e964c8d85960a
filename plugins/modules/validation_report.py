#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: validation_report
short_description: Judge the whole cluster's validation and write its report (HTML and JSON)
version_added: 1.0.0
description:
  - Runs on the controller, once (C(delegate_to) localhost, C(run_once)). Takes every node's checks
    (gpuops.cluster.node_health) and NCCL measurements (gpuops.cluster.nccl_run), adds the checks
    that need the whole cluster (one firmware version per HCA model), and decides per node;
    a node with a failed check is to be drained, with the failed checks in the reason.
  - Writes C(validation.json) (for machines) and C(validation.html) (one self-contained page with, per
    node and per check the expected and measured values and the verdict, the NCCL bus bandwidth
    against message size as plots, each node's topology as a picture) into O(dest).
  - The plots need matplotlib and networkx on the controller; without them the page has every
    table and says what is missing.
  - With O(baseline_record), writes each node's measured single-node bus bandwidth to
    O(baseline_dir)/HOST.json, which later runs gate on.
  - In check mode nothing is written; the decisions are returned.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the report is not written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  nodes:
    description:
      - Per node (inventory name), C(checks) (node_health's), C(hcas) (its ibv_devinfo HCAs),
        C(compute_ports), C(nccl) (nccl_run results for the node), C(nvidia_gpu) (its facts, for
        the topology picture) and C(drained) (the node's current Slurm drain reason, if any).
    type: dict
    required: true
  cluster_nccl:
    description: nccl_run results across nodes (pairs and the whole set).
    type: list
    elements: dict
    default: []
  cluster_mndiag:
    description:
      - M(gpuops.cluster.mndiag_run) results (each with the C(item) it ran for, its C(hosts)). A GPU's
        failed record is a check of its tray (which drains it); the run's record is the cluster's.
    type: list
    elements: dict
    default: []
  cluster_checks:
    description: Other records about the cluster as a whole (such as why a measurement was skipped).
    type: list
    elements: dict
    default: []
  mode:
    description: C(gate) (failing nodes are drained) or C(report) (nothing is drained).
    type: str
    choices: [gate, report]
    default: gate
  dest:
    description: Folder for validation.html and validation.json; created when missing.
    type: path
    required: true
  baseline_record:
    description: Record each node's single-node bus bandwidth as its baseline.
    type: bool
    default: false
  baseline_dir:
    description: Folder of the baselines.
    type: path
  earlier:
    description:
      - The last verdict of each node that this run did not validate (a C(--limit) run), from the fleet state's
        C(validation) section (inventory name to C(verdict), C(date), C(findings)); the report lists them with
        their date, so that a limited run adds to the cluster's report instead of replacing it. They are neither
        drained nor resumed.
    type: dict
    default: {}
  drain_prefix:
    description: Start of the drain reasons this module writes; a node drained with it that passes
      now is resumed, a node drained for another reason is left alone.
    type: str
    default: "gpuops-validate:"
  sinfo:
    description:
      - The fleet's nodes as C(sinfo -h -N -o '%N|%t|%E') prints them. Given, gate mode's drains count against the
        blast-radius budget (O(budget_nodes), O(budget_percent)) with the nodes out by automation already; past it
        a failing node is not drained (RV(budget_refused); its findings still fail it).
    type: str
  budget_nodes:
    description: The blast-radius budget, in nodes (the validate role's C(validate_health_budget_nodes)).
    type: int
    default: 8
  budget_percent:
    description: The blast-radius budget, as a share of the fleet (C(validate_health_budget_percent)).
    type: float
    default: 10
  budget_window:
    description: How long a take-out counts against the budget, in seconds (C(validate_health_budget_window)).
    type: int
    default: 3600
    version_added: 1.1.0
  quarantine_faults:
    description:
      - A repeat offender GPU - this many faults of one GPU, by its board serial, on whichever nodes and slots
        (the fleet state's C(gpu_faults) and the nodes' health state), within O(quarantine_days), fail its node's
        C(gpu_history) check where it is now (drained in gate mode, until the GPU is replaced). 0 turns it off.
    type: int
    default: 3
    version_added: 1.1.0
  quarantine_days:
    description: The window of O(quarantine_faults), in days (the validate role's C(validate_health_quarantine_days)).
    type: float
    default: 7
    version_added: 1.1.0
  comments:
    description:
      - >-
        The fleet's node Comments as C(sinfo -h -N -O 'NodeList:0|,Comment:0') prints them, with O(sinfo) - the
        budget's memory (nodes taken out within O(budget_window)) and its latch (a C(gpuops: budget spent)
        Comment stops every automatic drain until a person reopens it). Omitted, only the nodes out now count.
    type: str
    version_added: 1.1.0
  recorded:
    description:
      - The fleet state's C(validation) record of the nodes of this run (inventory name to the record), whose
        C(failed_checks) is the full set of checks a node was drained for; each must pass again before the node is
        resumed, also those the drain reason (cut by Slurm's length) lost. Without it, a reason that was cut
        resumes a node only when every check of this run passes.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Judge the cluster and write the report
  gpuops.cluster.validation_report:
    nodes: "{{ __validate_nodes }}"
    dest: "{{ validate_report_dir }}"
  delegate_to: localhost
  run_once: true
  register: report
"""

RETURN = r"""
verdict:
  description: fail if any node or cross-node check failed, else warn, pass or skip.
  returned: always
  type: str
drain:
  description:
    - Nodes to drain (gate mode), each with its reason, C(gpuops-validate) followed by the failed
      checks, such as C(nvlink GPU3).
  returned: always
  type: dict
repair:
  description:
    - The repair section, from each node's gpuops-health state (node_health's C(health_state)) - C(nodes) (per node,
      C(outstanding), what it owes; C(quarantined); C(drained_since); C(last_repair_s), its last repair from the
      fault to back in service, and C(last_repair_class), the strongest action its faults owed; C(evidence), the
      path on the node of its last drain's evidence bundle), C(quarantined), C(median_repair_s),
      C(median_repair_s_by_class) and C(budget) (C(fleet), C(out), C(limit);
      where O(sinfo) is given).
  returned: always
  type: dict
budget_refused:
  description: Nodes that failed but were not drained, the blast-radius budget being spent (gate mode, O(sinfo) given).
  returned: always
  type: list
  elements: str
comments:
  description:
    - >-
      The Slurm Comment to set on a node with its drain (C(gpuops: taken out <time>)) or on a node the budget
      refused (C(gpuops: budget spent <time> ...), the latch), by inventory name; none where the node has a
      person's comment (never overwritten) or O(comments) was not given.
  returned: always
  type: dict
  version_added: 1.1.0
resume:
  description:
    - Nodes drained by an earlier validation (or for burn-in) that pass now, their own checks and
      every NCCL run across nodes they took part in.
  returned: always
  type: list
  elements: str
findings:
  description: One line per failed check, host, check and subject, then the expected and measured values and the reason.
  returned: always
  type: list
  elements: str
findings_by_host:
  description:
    - The same lines per host. A failed run across nodes is listed on each of its hosts (it does not
      drain them, since it cannot tell which node or link is at fault).
  returned: always
  type: dict
html:
  description: Path of the HTML report.
  returned: always
  type: str
records:
  description:
    - Per node of this run, what the fleet state's C(validation) section keeps - C(verdict) (fail, or pass for a
      node without a failed check of its own or of a run across nodes it took part in), C(result) (its own
      verdict, pass, warn or skip), C(date), C(findings), and what a later run over part of the cluster needs
      to pair a node with it - C(fabric), C(compute_ports), C(gpus) (a count) and C(name) (its Slurm name); and
      C(gpu_faults), each fault of one of its GPUs within O(quarantine_days) (C(serial), C(t), C(detail)), which
      follows the GPU to another node.
  returned: always
  type: dict
json:
  description: Path of the JSON report.
  returned: always
  type: str
warnings_text:
  description: Why plots or pictures are missing, if they are.
  returned: always
  type: list
  elements: str
"""

import datetime
import json
import os
import statistics
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils import health
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns
from ansible_collections.gpuops.cluster.plugins.module_utils import report as r
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v


def _mndiag_records(runs, nodes):
    """Each tray's GPU records from the multi-node diagnostic runs, for its own checks."""
    out = {}
    for run in runs:
        for host, records in (run.get("host_records") or {}).items():
            if host in nodes and isinstance(records, list):
                out.setdefault(host, []).extend(r for r in records if isinstance(r, dict) and "verdict" in r)
    return out


def _repair(p, nodes):
    """The repair section: per node whose health check keeps a state (gpuops-health), what it owes and
    since when, its last repair's time (fault to back in service); the nodes in quarantine, the median
    repair time, and the blast-radius budget used now (where O(sinfo) is given)."""
    rows, repairs, by_class = {}, [], {}
    for host in sorted(nodes):
        text = nodes[host].get("health_state")
        if not isinstance(text, str):
            continue
        state, _seen, lost = health.load_state(text, "")
        if lost:
            rows[host] = {"outstanding": [], "note": f"state not readable: {lost}"}
            continue
        timing = ns.timing(state)
        if timing["last_repair_s"] is not None:
            repairs.append(timing["last_repair_s"])
            by_class.setdefault(timing["last_repair_class"], []).append(timing["last_repair_s"])
        rows[host] = {
            "outstanding": ns.outstanding(state),
            "quarantined": "inspect node" in state["owed"],
            "drained_since": _when(timing["drained_since"]),
            "last_repair_s": None if timing["last_repair_s"] is None else round(timing["last_repair_s"]),
            "last_repair_class": timing["last_repair_class"],
            # On the node, with what gpuops-health --mode evidence added beside it (.extra.json,
            # .nvidia-bug-report.log.gz).
            "evidence": next(
                (e.get("detail") for e in reversed(state["history"]) if e.get("event") == "evidence"), None
            ),
        }
    budget = None
    if p["sinfo"] is not None:
        fleet, out = ns.fleet_out(p["sinfo"])
        budget = {
            "fleet": len(fleet),
            "out": sorted(out),
            "limit": ns.budget_limit(len(fleet), p["budget_nodes"], p["budget_percent"]),
        }
    return {
        "nodes": rows,
        "quarantined": sorted(host for host, row in rows.items() if row.get("quarantined")),
        "median_repair_s": round(statistics.median(repairs)) if repairs else None,
        # Per class of fault (the strongest action it owed): a reset, a reboot, a power cycle...
        "median_repair_s_by_class": {cls: round(statistics.median(times)) for cls, times in sorted(by_class.items())},
        "budget": budget,
    }


def _gpu_history(p, nodes):
    """``(gpu_faults, checks)``: per node of this run, the faults of its GPUs by serial within the window
    (its health state's and the fleet state's record), and its ``gpu_history`` check records: a fail per
    GPU whose serial has ``quarantine_faults`` faults on any node (node_state.gpu_history), else one pass."""
    since = time.time() - p["quarantine_days"] * 86400
    gpu_faults = {}
    for host in nodes:
        events = list((p["recorded"].get(host) or {}).get("gpu_faults") or [])
        text = nodes[host].get("health_state")
        if isinstance(text, str):
            state, _seen, _lost = health.load_state(text, "")
            events += ns.gpu_fault_events(state, since)
        gpu_faults[host] = ns.merge_gpu_faults(events, since)
    everyone = {
        host: (last or {}).get("gpu_faults") or []
        for host, last in p["earlier"].items()
        if host not in nodes and isinstance(last, dict)
    }
    everyone.update(gpu_faults)
    checks = {}
    days = f"{p['quarantine_days']:g} days"
    for host in nodes:
        gpus = [g for g in (nodes[host].get("nvidia_gpu") or {}).get("gpus") or [] if isinstance(g, dict)]
        if not p["quarantine_faults"] or not any(ns.known_serial(g.get("serial")) for g in gpus):
            continue
        offenders = ns.gpu_history(everyone, gpus, since, p["quarantine_faults"])
        expected = f"fewer than {p['quarantine_faults']} faults of one GPU (by its serial) in {days}"
        checks[host] = [
            v.record(
                "gpu_history",
                gpu["subject"],
                expected,
                f"{len(gpu['faults'])} faults of serial {gpu['serial']}",
                "fail",
                _offender_reason(gpu["faults"]),
            )
            for gpu in offenders
        ] or [v.record("gpu_history", "all GPUs", expected, "none", "pass", "no GPU of this node is a repeat offender")]
    return gpu_faults, checks


def _offender_reason(faults):
    where = "; ".join(f"{f['node']} {_when(f['t'])}: {f['detail'][:80]}" for f in faults[-4:])
    return (
        f"a repeat offender GPU, wherever it was: {where} - replace it (a new serial passes) or wait until its "
        "faults are older than the window"
    )


def _when(seconds):
    if seconds is None:
        return None
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)  # noqa: UP017 - older controllers
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _failed_checks(checks, findings):
    """The checks a node failed this run, and those it was drained for that did not pass again."""
    failed = {c["check"] for c in checks if c["verdict"] == "fail"}
    still = {f.split(": ", 1)[1].split(" ", 1)[0] for f in findings if " was failing when drained" in f}
    return sorted(failed | still)


def _within_budget(drain, nodes, p):
    """``(drain, refused, comments)``: the drains the blast-radius budget allows (node_state.budget,
    counting the nodes Slurm shows out by automation, those taken out within the window and the drains
    already allowed), ``[(host, why)]`` the others, and the Comment to set on each (its take-out, or
    the latch on the refused node that spent the budget)."""
    allowed, refused, taken, comments = {}, [], [], {}
    sinfo, now = p["sinfo"], time.time()
    rows = ns.comment_rows(p["comments"]) if p["comments"] is not None else None
    for host in sorted(drain):
        name = nodes[host].get("name") or host
        if nodes[host].get("drained"):
            allowed[host] = drain[host]
            continue
        extra = "".join(f"{other}|drain|gpuops-validate: (this run)\n" for other in taken)
        ok, why, spent = ns.budget(
            sinfo + "\n" + extra,
            name,
            p["budget_nodes"],
            p["budget_percent"],
            comments=rows,
            window=p["budget_window"],
            now=now,
        )
        said = ns.budget_comment("taken", now) if ok else spent
        if ok:
            allowed[host] = drain[host]
            taken.append(name)
        else:
            refused.append((host, why))
        if rows is not None and said and ns.comment_update(rows.get(name, ""), said):
            comments[host] = rows[name] = said
    return allowed, refused, comments


def _finding(host, record):
    return "{}: {} {}: expected {}, measured {} ({})".format(
        host, record["check"], record["subject"], record["expected"], record["measured"], record["reason"]
    )


def _summary(node):
    gpu = node.get("nvidia_gpu") or {}
    ports = node.get("compute_ports") or []
    parts = []
    if gpu.get("present"):
        parts.append("{} x {}".format(gpu.get("count"), gpu.get("product")))
        if gpu.get("nvswitch_count"):
            parts.append("{} NVSwitches".format(gpu["nvswitch_count"]))
    if ports:
        parts.append("{} compute port(s) ({})".format(len(ports), node.get("fabric") or "fabric"))
    return ", ".join(parts) or "no GPU"


def main():
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "dict", "required": True},
            "cluster_nccl": {"type": "list", "elements": "dict", "default": []},
            "cluster_mndiag": {"type": "list", "elements": "dict", "default": []},
            "cluster_checks": {"type": "list", "elements": "dict", "default": []},
            "mode": {"type": "str", "default": "gate", "choices": ["gate", "report"]},
            "dest": {"type": "path", "required": True},
            "baseline_record": {"type": "bool", "default": False},
            "baseline_dir": {"type": "path"},
            "earlier": {"type": "dict", "default": {}},
            "drain_prefix": {"type": "str", "default": "gpuops-validate:"},
            "recorded": {"type": "dict", "default": {}},
            "sinfo": {"type": "str"},
            "budget_nodes": {"type": "int", "default": ns.BUDGET_NODES},
            "budget_percent": {"type": "float", "default": ns.BUDGET_PERCENT},
            "budget_window": {"type": "int", "default": ns.BUDGET_WINDOW_S},
            "comments": {"type": "str"},
            "quarantine_faults": {"type": "int", "default": ns.QUARANTINE_FAULTS},
            "quarantine_days": {"type": "float", "default": ns.QUARANTINE_WINDOW_S / 86400},
        },
        supports_check_mode=True,
    )
    p = module.params
    nodes = p["nodes"]
    for host, node in nodes.items():
        if not isinstance(node, dict) or not isinstance(node.get("checks", []), list):
            module.fail_json(msg=f"nodes.{host} must be a dict with a list of checks (node_health's result).")
    problems = ns.budget_problems(p["budget_nodes"], p["budget_percent"], ("budget_nodes", "budget_percent"))
    problems += ns.window_problems(p["budget_window"], "budget_window")
    if problems:
        names = "validate_health_budget_nodes, validate_health_budget_percent, validate_health_budget_window"
        module.fail_json(msg=f"{'; '.join(problems)} ({names})")
    if p["quarantine_faults"] < 0 or p["quarantine_days"] <= 0:
        module.fail_json(
            msg=f"quarantine_faults ({p['quarantine_faults']}) must be 0 (off) or more and quarantine_days "
            f"({p['quarantine_days']}) more than 0 (validate_health_quarantine_faults, validate_health_quarantine_days)"
        )
    firmware = v.firmware_checks({host: node.get("hcas") or [] for host, node in nodes.items()})
    gpu_faults, history = _gpu_history(p, nodes)
    mndiag = _mndiag_records(p["cluster_mndiag"], nodes)

    missing = r.missing_libraries()
    warnings_text = []
    if missing:
        warnings_text.append(
            "no plots or topology pictures: the controller lacks {} (pip install {})".format(
                ", ".join(missing), " ".join(missing)
            )
        )
    now = datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017 - controllers before Python 3.11
    report = {
        "generated": now.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "mode": p["mode"],
        "missing_libraries": missing,
        "nodes": {},
        "earlier": 0,
        "cluster": {"checks": list(p["cluster_checks"]), "nccl": []},
        "actions": {},
    }
    findings, drain, resume = [], {}, []
    by_host = {host: [] for host in nodes}
    for host in sorted(nodes):
        node = nodes[host]
        nccl = node.get("nccl") or []
        checks = list(node.get("checks") or []) + firmware.get(host, []) + history.get(host, []) + mndiag.get(host, [])
        checks += [run["record"] for run in nccl]
        verdict = v.worst(checks)
        entry = {
            "verdict": verdict,
            "date": now.strftime("%Y-%m-%d %H:%M:%S UTC"),
            "summary": _summary(node),
            "checks": checks,
            "nccl": [
                {
                    "subject": run["record"]["subject"],
                    "floor": run["record"].get("floor"),
                    "series": run.get("series") or [],
                }
                for run in nccl
            ],
        }
        if not missing:
            entry["nccl_svg"] = r.bandwidth_svg(entry["nccl"], f"{host}: all_reduce bus bandwidth")
            entry["topology_svg"] = r.topology_svg(host, node.get("nvidia_gpu"), node.get("compute_ports"))
        report["nodes"][host] = entry
        failed = [c for c in checks if c["verdict"] == "fail"]
        findings += [_finding(host, c) for c in failed]
        by_host[host] += [_finding(host, c) for c in failed]
        drained = node.get("drained") or ""
        if failed and p["mode"] == "gate":
            drain[host] = v.drain_reason(failed)
            report["actions"][host] = "drain: " + drain[host]
        elif failed:
            report["actions"][host] = "report only (validate_mode: report)"
        elif drained.startswith(p["drain_prefix"]) and p["mode"] == "gate":
            # Drained for checks that failed: each must pass now, not be skipped.
            recorded = (p["recorded"].get(host) or {}).get("failed_checks")
            for check, now_verdict in v.unproven(drained, checks, p["drain_prefix"], recorded):
                by_host[host].append(f"{host}: {check} was failing when drained, and is {now_verdict} now, not pass")
            resume.append(host)
    for run in p["cluster_mndiag"]:
        if not isinstance(run.get("record"), dict):
            continue
        report["cluster"]["checks"].append(run["record"])
        if run["record"]["verdict"] == "fail":
            findings.append(_finding("cluster", run["record"]))
            for host in (run.get("item") or {}).get("hosts") or []:
                by_host.setdefault(host, []).append(_finding("cluster", run["record"]))
    for run in p["cluster_nccl"]:
        report["cluster"]["checks"].append(run["record"])
        report["cluster"]["nccl"].append(
            {
                "subject": run["record"]["subject"],
                "floor": run["record"].get("floor"),
                "series": run.get("series") or [],
            }
        )
        if run["record"]["verdict"] == "fail":
            findings.append(_finding("cluster", run["record"]))
            for host in (run.get("item") or {}).get("hosts") or []:
                by_host.setdefault(host, []).append(_finding("cluster", run["record"]))
    # A node drained by validation (a failed check, or burn-in) is resumed only when it passed its
    # own checks and every NCCL run across nodes it took part in.
    for host in list(resume):
        if by_host.get(host):
            resume.remove(host)
            report["actions"][host] = "stays drained: " + "; ".join(by_host[host])
        else:
            report["actions"][host] = "resume (was drained by an earlier validation)"
    if report["cluster"]["nccl"] and not missing:
        report["cluster"]["nccl_svg"] = r.bandwidth_svg(report["cluster"]["nccl"], "across nodes")
    all_checks = [c for node in report["nodes"].values() for c in node["checks"]] + report["cluster"]["checks"]
    report["verdict"] = v.worst(all_checks)
    # What the fleet state keeps of each node: its verdict, and what a later run over part of the
    # cluster needs to pair a node with it (its fabric, compute ports, GPU count and Slurm name).
    records = {
        host: {
            "verdict": "fail" if entry["verdict"] == "fail" or by_host.get(host) else "pass",
            "result": entry["verdict"],
            "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "findings": by_host.get(host, []),
            # Every check the node failed or still owes, in full: what a later run must see pass
            # before it resumes the node (the drain reason Slurm keeps is cut at 200 characters).
            "failed_checks": _failed_checks(entry["checks"], by_host.get(host, [])),
            "fabric": nodes[host].get("fabric"),
            "compute_ports": [
                {k: port.get(k) for k in ("name", "ca_type", "state", "rate") if k in port}
                for port in nodes[host].get("compute_ports") or []
                if isinstance(port, dict)
            ],
            "gpus": len((nodes[host].get("nvidia_gpu") or {}).get("gpus") or []),
            "name": nodes[host].get("name") or host,
            # Each fault of one of its GPUs, by board serial, within the window: follows the GPU.
            "gpu_faults": gpu_faults.get(host, []),
        }
        for host, entry in report["nodes"].items()
    }
    # Nodes of earlier runs, as they were then: listed with their date, not judged again.
    for host, last in sorted(p["earlier"].items()):
        if host in report["nodes"] or not isinstance(last, dict):
            continue
        report["earlier"] += 1
        report["nodes"][host] = {
            "verdict": last.get("result") or last.get("verdict") or "skip",
            "date": str(last.get("date") or "unknown"),
            "earlier": True,
            "summary": "not in this run: {} as validated on {}{}".format(
                last.get("verdict"),
                last.get("date"),
                "; " + "; ".join(last["findings"]) if last.get("findings") else "",
            ),
            "checks": [],
            "nccl": [],
        }
        report["actions"][host] = "none (an earlier run's verdict, {})".format(last.get("date"))
    # The gate's drains count against the blast-radius budget: nodes drained already cost nothing
    # more; past the budget, a failing node is not drained (its findings still fail the play).
    refused, comments = [], {}
    if drain and p["sinfo"] is not None:
        drain, refused, comments = _within_budget(drain, nodes, p)
        for host, why in refused:
            report["actions"][host] = f"not drained: {why}"
    report["repair"] = _repair(p, nodes)
    report["drain"] = drain
    report["budget_refused"] = [host for host, _why in refused]
    report["comments"] = comments
    report["resume"] = resume
    report["findings"] = findings

    html_path = os.path.join(p["dest"], "validation.html")
    json_path = os.path.join(p["dest"], "validation.json")
    if not module.check_mode:
        os.makedirs(p["dest"], exist_ok=True)
        data = dict(report)
        data["nodes"] = {h: {k: x for k, x in n.items() if not k.endswith("_svg")} for h, n in report["nodes"].items()}
        data["cluster"] = {k: x for k, x in report["cluster"].items() if not k.endswith("_svg")}
        with open(json_path, "w") as handle:
            json.dump(data, handle, indent=2, sort_keys=True, default=str)
        with open(html_path, "w") as handle:
            handle.write(r.render_html(report))
        if p["baseline_record"]:
            if not p["baseline_dir"]:
                module.fail_json(msg="baseline_record needs baseline_dir (validate_baseline_dir).")
            os.makedirs(p["baseline_dir"], exist_ok=True)
            for host, node in nodes.items():
                runs = [run for run in node.get("nccl") or [] if run.get("busbw") is not None]
                if runs:
                    with open(os.path.join(p["baseline_dir"], f"{host}.json"), "w") as handle:
                        json.dump(
                            {"nccl_node_busbw_gbps": runs[0]["busbw"], "recorded": report["generated"]},
                            handle,
                            indent=2,
                        )
    # The report is the run's output on the controller, not state of the cluster: not a change.
    module.exit_json(
        changed=False,
        verdict=report["verdict"],
        drain=report["drain"],
        budget_refused=report["budget_refused"],
        comments=report["comments"],
        repair=report["repair"],
        resume=resume,
        findings=findings,
        findings_by_host={host: lines for host, lines in by_host.items() if lines},
        html=html_path,
        json=json_path,
        records=records,
        warnings_text=warnings_text,
    )


if __name__ == "__main__":
    main()
