# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Workload tiers: one definition of which work goes first, for Slurm and for Kubernetes.

``workload_tiers`` is a list of ``{name, priority, preempt, grace_time}``. The same list becomes:

- Slurm: one QOS per tier (``sacctmgr``), ``Priority`` from the tier; a tier with ``preempt: true``
  may preempt every tier of a lower priority (its QOS ``Preempt=`` list); a preempted job gets
  ``grace_time`` seconds between SIGTERM and the requeue (the QOS ``GraceTime``), time to write
  a checkpoint. slurm.conf takes ``PreemptType=preempt/qos`` and ``PreemptMode=REQUEUE`` (the
  preempted job goes back to the queue, not away) and the QOS weight of the multifactor priority,
  so that the higher tier also starts first.
- Kubernetes: one ``scheduling.k8s.io/v1`` PriorityClass per tier, ``value`` from the tier,
  ``preemptionPolicy: PreemptLowerPriority`` for a preempting tier and ``Never`` for the others.
  Kubernetes preempts by value alone, which is why a Slurm tier preempts every lower tier and not
  a hand-picked list: the two schedulers then agree. Work of no tier (Slurm's ``normal`` QOS, a pod
  without a class: priority 0) is below every tier and preempted as the lowest. The grace time of a pod is its own
  ``terminationGracePeriodSeconds``; the class's description states the tier's.

Slurm: https://slurm.schedmd.com/preempt.html ("its end time is set to the current time plus
GraceTime. The job is immediately sent SIGCONT and SIGTERM signals"), https://slurm.schedmd.com/qos.html.
Kubernetes: https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/
(user classes take values up to 1,000,000,000; higher ones are kept for the system classes).
"""

from __future__ import annotations

import re

KEYS = ("name", "priority", "preempt", "grace_time")
# A Slurm QOS name and a Kubernetes object name (DNS-1123 label) at once.
NAME = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
# Kubernetes: user PriorityClass values up to one billion; Slurm's QOS priority is 32-bit.
MAX_PRIORITY = 1_000_000_000
# Slurm's default QOS (priority 0): the work of no tier. A tier may not take its name.
UNTIERED = "normal"
RESERVED = (UNTIERED,)
# The weight of the QOS factor in the multifactor priority: a job's QOS priority is normalised to
# 0..1 by the highest QOS priority, so this weight puts the tiers ahead of the other factors
# (each of which the role leaves at its default weight).
PRIORITY_WEIGHT_QOS = 100000


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def problems(tiers, variable="workload_tiers"):
    """Every reason the tiers cannot be used, one sentence each naming the variable."""
    if tiers is None:
        return []
    if not isinstance(tiers, list):
        return [f"{variable} must be a list of tiers such as {{name: training, priority: 1000, preempt: true}}"]
    out = []
    names = {}
    for number, tier in enumerate(tiers):
        where = f"{variable}[{number}]"
        if not isinstance(tier, dict):
            out.append(f"{where} must be a dict with name, priority, preempt and grace_time")
            continue
        unknown = sorted(map(str, set(tier) - set(KEYS)))
        if unknown:
            out.append(f"{where} has unknown keys {', '.join(unknown)}: it takes {', '.join(KEYS)}")
        name = tier.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            out.append(
                f"{where}.name must be lowercase letters, digits and '-', starting with a letter, at most 63 "
                f"(a Slurm QOS and a Kubernetes PriorityClass name), such as training; got {name!r}"
            )
        elif name in RESERVED:
            out.append(f"{where}.name {name} is Slurm's default QOS; name the tier otherwise, such as inference")
        elif name in names:
            out.append(f"{where}.name {name} is already {variable}[{names[name]}]; each tier needs its own name")
        else:
            names[name] = number
        priority = tier.get("priority")
        if not _is_int(priority) or not 0 < priority <= MAX_PRIORITY:
            out.append(
                f"{where}.priority must be a whole number from 1 to {MAX_PRIORITY:,} (the highest a Kubernetes "
                f"PriorityClass of a user may take); got {priority!r}"
            )
        if not isinstance(tier.get("preempt", False), bool):
            out.append(f"{where}.preempt must be true or false (whether it preempts every lower tier)")
        grace = tier.get("grace_time", 0)
        if not _is_int(grace) or not 0 <= grace <= 86400:
            out.append(
                f"{where}.grace_time must be the seconds from 0 to 86400 between the signal and the requeue of a "
                f"job of this tier that is preempted; got {grace!r}"
            )
    if out:
        return out
    priorities = {}
    for number, tier in enumerate(tiers):
        if tier["priority"] in priorities:
            first = priorities[tier["priority"]]
            out.append(
                f"{variable}[{number}].priority {tier['priority']} is also {variable}[{first}]'s;"
                " give each tier its own, so that which one goes first is never a tie"
            )
        priorities.setdefault(tier["priority"], number)
    return out


def _ordered(tiers):
    return sorted(tiers or [], key=lambda t: -t["priority"])


def preempted_by(tier, tiers):
    """The names of the tiers a tier preempts: every lower one when preempt is true, and the work
    of no tier (Slurm's normal QOS; in Kubernetes a pod without a class, priority 0)."""
    if not tier.get("preempt"):
        return []
    return [t["name"] for t in _ordered(tiers) if t["priority"] < tier["priority"]] + [UNTIERED]


def preempting(tiers):
    return any(t.get("preempt") for t in tiers or [])


def slurm_qos(tiers):
    """The QOS of each tier as ``sacctmgr`` keeps it, highest first: ``{name, priority, preempt
    (sorted names), preempt_mode, grace_time}``; preempt_mode ``cluster`` takes slurm.conf's."""
    return [
        {
            "name": t["name"],
            "priority": t["priority"],
            "preempt": sorted(preempted_by(t, tiers)),
            "preempt_mode": "cluster",
            "grace_time": t.get("grace_time", 0),
        }
        for t in _ordered(tiers)
    ]


def slurm_conf(tiers):
    """The slurm.conf settings the tiers need (name -> value, with the reason beside each)."""
    if not tiers:
        return {}
    out = {
        "PriorityType": ("priority/multifactor", "the QOS priority counts only in the multifactor priority"),
        "PriorityWeightQOS": (str(PRIORITY_WEIGHT_QOS), "so that a higher tier starts first"),
    }
    if preempting(tiers):
        out["PreemptType"] = ("preempt/qos", "a tier with preempt: true takes resources from the lower tiers")
        out["PreemptMode"] = ("REQUEUE", "a preempted job goes back to the queue after its grace time")
    return out


def priority_classes(tiers):
    """One scheduling.k8s.io/v1 PriorityClass per tier, highest first."""
    out = []
    for t in _ordered(tiers):
        lower = preempted_by(t, tiers)
        grace = t.get("grace_time", 0)
        description = "gpuops.cluster workload tier {} (Slurm QOS {}){}{}".format(
            t["name"],
            t["name"],
            "; preempts " + ", ".join([n for n in lower if n != UNTIERED] + ["pods of no class"])
            if lower
            else "; preempts nothing",
            f"; give its pods terminationGracePeriodSeconds: {grace} to checkpoint" if grace else "",
        )
        out.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": t["name"], "labels": {"app.kubernetes.io/managed-by": "gpuops.cluster"}},
                "value": t["priority"],
                "globalDefault": False,
                "preemptionPolicy": "PreemptLowerPriority" if lower else "Never",
                "description": description,
            }
        )
    return out
