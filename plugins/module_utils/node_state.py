# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node state machine: what a node owes before it takes work again, and the blast-radius budget.

Whoever takes a node out goes through here: the health check under slurmd (``gpuops-health``),
validation (``validation_report``) and the slurm role's leave. A node's state holds

- ``failed``: every check it failed since it was last healthy, by ``"check subject"``, kept
  outside the drain reason (which Slurm cuts at a length). An entry goes only when that check has
  *passed* again (:func:`proven`): a skip, a warning, a check that did not run prove nothing.
- ``owed``: the recovery actions its faults call for, by ``"action subject"``: ``reset`` (the GPU),
  ``reboot`` (the node), ``power`` (a power cycle through the BMC, where a reboot did not cure it)
  or ``inspect`` (a person: power, cooling, an InfoROM). One goes only when it is observed
  (:func:`advance`): a reboot or a power cycle by a new boot id (``/proc/sys/kernel/random/boot_id``);
  a GPU reset by a new boot id, or, for a reset the driver asked for, by the driver's own
  recovery action (``nvidia-smi -q -x``'s ``gpu_recovery_action``) back at ``None``; any of
  them by a person's ``--clear-xids`` (recorded as such).
- ``history``: the last events with their times (fault, drained, observed, cleared, resumed).

The transitions (:data:`TRANSITIONS`) are data, printed in the docs; :func:`decide` applies them.
Everything here is pure: reading the node and calling Slurm are the callers'.
"""

from __future__ import annotations

import calendar
import math
import os
import re
import time

SCHEMA = 1
# What each recovery action is, and what observes it.
ACTIONS = {
    "reset": "a GPU reset (nvidia-smi -r once idle, or a reboot)",
    "reboot": "a reboot of the node (scontrol reboot ASAP, once idle)",
    "power": "a power cycle through the node's BMC (playbooks/remediate.yml)",
    "inspect": "a person's inspection (power, cooling, the board): --clear-xids once repaired",
}
# A fault's action, strongest first: a power cycle also reboots, a reboot also resets every GPU.
_ORDER = ("inspect", "power", "reboot", "reset")
_HISTORY_LIMIT = 128
_ENTRY_LIMIT = 256

# The states and events, and who acts: the docs print this table.
TRANSITIONS = (
    (
        "in service",
        "a check fails, or a fault owes a reset, reboot or inspection",
        "drained",
        "gpuops-health / validation",
    ),
    ("in service", "the check cannot run (deadline, an unexpected error)", "drained (cannot check)", "gpuops-health"),
    (
        "in service",
        "the fleet's budget is spent (the nodes out, or taken out within the window)",
        "in service, refused (alert); the budget latched",
        "gpuops-health / validation",
    ),
    ("in service", "the budget is latched", "in service, refused (alert)", "gpuops-health / validation"),
    (
        "the budget latched",
        "remediate.yml -e remediate_reopen_budget=true",
        "the budget open (its records cleared)",
        "a person",
    ),
    ("drained", "a failed check passes again, others outstanding", "drained (reason narrowed)", "gpuops-health"),
    ("drained", "a check skips, warns or does not run", "drained (not proof)", "gpuops-health"),
    ("drained", "a new boot id", "drained, reset and reboot observed", "gpuops-health"),
    ("drained", "the driver's recovery action back at None", "drained, reset observed", "gpuops-health"),
    ("drained", "--clear-xids", "drained, every owed action cleared", "a person"),
    ("drained, jobs running, only resets owed", "a check", "drained (the reset waits for the jobs)", "gpuops-health"),
    ("drained, idle, only resets owed", "a check", "drained, GPUs reset (nvidia-smi -r -i)", "gpuops-health"),
    ("drained, a reset refused or failed", "the reset step", "drained, a reboot owed instead", "gpuops-health"),
    ("drained, a reset owed on an NVSwitch system", "a check", "drained, a reboot owed instead", "gpuops-health"),
    (
        "drained, a reboot owed",
        "a check",
        "rebooting (scontrol reboot ASAP nextstate=DOWN: once idle, no new job)",
        "gpuops-health, then slurmctld and slurmd's RebootProgram",
    ),
    ("rebooting", "the node registers on a new boot", "down (reboot complete), reboot observed", "slurmctld"),
    ("rebooting", "ResumeTimeout passes first", "down (reboot timed out): a power cycle owed", "slurmctld"),
    (
        "drained, a reboot owed again after this ladder's reboot",
        "a check",
        "drained, a power cycle owed",
        "gpuops-health",
    ),
    (
        "drained or down, a power cycle owed",
        "remediate.yml",
        "power cycled through Redfish",
        "remediate.yml (EDA, AWX, a person)",
    ),
    ("drained, a fault again after this ladder's power cycle", "a check", "drained, quarantined", "gpuops-health"),
    (
        "remediate.yml: the BMC does not answer",
        "remediate.yml",
        "drained, quarantined (reason names the BMC)",
        "remediate.yml",
    ),
    ("drained", "every failed check passed, nothing owed", "in service (resumed)", "gpuops-health / validation"),
    ("any", "the third fault in seven days", "drained, quarantined (a person's inspection owed)", "gpuops-health"),
    (
        "any",
        "the third fault in seven days of one of its GPUs, by serial, on any node",
        "drained (gpu_history), until the GPU is replaced",
        "validation",
    ),
    ("drained by another", "anything", "left as it is (recorded)", "a person, a rollout"),
)

# DCGM's health systems (``dcgmi health -c``: "Memory system", "PCIe system"...) and what a
# Failure incident of each owes. Memory (double-bit ECC, row-remap failure) and the GPU's own units
# are cured by a reset (NVIDIA's memory error management: "reset the GPU using nvidia-smi -r");
# PCIe link faults and the driver need the node rebooted; thermal, power and InfoROM faults need a
# person. A system not listed owes a reboot (the strongest automatic cure).
DCGM_SYSTEMS = {
    "memory": "reset",
    "sm": "reset",
    "pmu": "reset",
    "mcu": "reset",
    "nvlink": "reset",
    "pcie": "reboot",
    "driver": "reboot",
    "nvswitch": "reboot",
    "thermal": "inspect",
    "power": "inspect",
    "inforom": "inspect",
}
# The driver's recovery action (``gpu_recovery_action``; NVML's nvmlGpuRecoveryAction_t) and what it owes.
RECOVERY_ACTIONS = {
    "reset": "reset",
    "drain p2p": "reset",
    "drain and reset": "reset",
    "bus reset": "reboot",
    "reboot": "reboot",
    "node reboot": "reboot",
    "system reboot": "reboot",
}


class StateError(ValueError):
    """Budget settings that cannot be used: the message names the variable and the fix."""


def new_state(boot_id=""):
    return {"schema": SCHEMA, "boot_id": boot_id, "failed": {}, "owed": {}, "history": []}


def load(data, boot_id=""):
    """``(state, note)``: a state read back, or a new one (``note`` says why) where the data is not
    one this module wrote. Entries of a wrong shape are dropped; nothing here raises."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return new_state(boot_id), (None if data in ({}, None) else "the state file was of another shape")
    state = new_state(str(data.get("boot_id") or ""))
    for part in ("failed", "owed"):
        entries = data.get(part)
        if isinstance(entries, dict):
            needs = ("check", "subject") if part == "failed" else ("action", "subject")
            state[part] = {
                str(key): entry
                for key, entry in list(entries.items())[:_ENTRY_LIMIT]
                if isinstance(entry, dict) and all(isinstance(entry.get(name), str) for name in needs)
            }
    history = data.get("history")
    if isinstance(history, list):
        state["history"] = [e for e in history if isinstance(e, dict)][-_HISTORY_LIMIT:]
    for key, entry in list(state["owed"].items()):
        if entry.get("action") not in ACTIONS:
            state["owed"][key] = dict(entry, action="reboot")
    return state, None


def xid_action(number, line="", catalogue=None):  # noqa: PLR0911 - one return per catalogue action
    """What an Xid owes (``reset``, ``reboot``, ``inspect``) or None, from the catalogue entry
    (``"description; IMMEDIATE_ACTION"``: :data:`validation.FATAL_XIDS`) or, for Xid 154, from the
    recovery the driver states in its line ("... to 0x2 (Node Reboot Required)")."""
    if number == 154:
        stated = re.search(r"\bto\s+0x[0-9A-Fa-f]+\s+\(([^)]*)\)", line or "")
        text = stated.group(1).lower() if stated else ""
        if "reboot" in text:
            return "reboot"
        if "reset" in text or "drain" in text:
            return "reset"
        return None
    if catalogue is None:
        return None
    _description, _sep, action = catalogue.partition("; ")
    if action in ("RESTART_BM", "RESTART_VM"):
        return "reboot"
    if action == "CHECK_MECHANICALS":
        return "inspect"
    # RESET_GPU, WORKFLOW_XID_48, the NVLink workflows, and the archive's Xids for older GPUs.
    return "reset"


def dcgm_action(system):
    """What a DCGM health Failure of ``system`` ("Memory system") owes."""
    key = re.sub(r"\s+system$", "", str(system or "").strip().lower())
    key = key.replace(" ", "")
    for name, action in DCGM_SYSTEMS.items():
        if key.startswith(name):
            return action
    return "reboot"


def recovery_action(value):
    """What the driver's recovery action owes, or None for ``None``/absent (an unknown value: a reboot)."""
    if value is None or str(value).strip().lower() in ("", "none", "n/a"):
        return None
    return RECOVERY_ACTIONS.get(str(value).strip().lower(), "reboot")


_SERIAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


def known_serial(value):
    """A GPU board's serial as nvidia-smi prints it, or None where it tells none (``N/A``, ``0``)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    return text if _SERIAL.match(text) and text.upper() not in ("N/A", "NA", "0", "NONE", "UNKNOWN") else None


def fault(action, subject, why, source="check"):
    """An owed action this run found: ``source`` is ``driver`` where the driver's own recovery action
    asked for it (so that the driver, back at None, observes it)."""
    return {"action": action, "subject": subject, "why": why, "source": source}


def _whole(subject):
    """A record about the whole node or every device ("node", "all GPUs", "8 InfiniBand port(s)")."""
    return subject == "node" or str(subject).startswith("all ") or " " in str(subject)


def proven(check, subject, records):
    """Whether ``check`` passed again this run for ``subject``: the records about ``subject`` all
    passed; where none names it (a GPU's fault, "all GPUs" now; one port of several still failing),
    the check ran (it has records), skipped nothing, and nothing about the whole node failed or
    warned (a warning about the whole node is a check that could not measure: no proof)."""
    mine = [r for r in records if r.get("check") == check]
    if not mine:
        return False
    about = [r for r in mine if r.get("subject") == subject]
    if about:
        return all(r.get("verdict") == "pass" for r in about)
    return not any(
        r.get("verdict") == "skip" or (_whole(r.get("subject")) and r.get("verdict") != "pass") for r in mine
    )


def with_event(state, now, event, detail="", boot=None):
    """A copy of ``state`` with one more event in its history (bounded): what the node's own steps
    (drain, resume, evidence, a reboot asked of Slurm) add beside the transitions :func:`advance`
    records; ``boot``: the boot id it happened on, where that matters."""
    state = {**state, "history": list(state["history"])}
    _event(state, now, event, detail, boot)
    return state


def _event(state, now, event, detail="", boot=None, *, serial=None):
    entry = {"t": round(float(now), 3), "event": event, "detail": str(detail)[:300]}
    if boot is not None:
        entry["boot"] = str(boot)
    if serial:
        entry["serial"] = serial
    state["history"].append(entry)
    del state["history"][:-_HISTORY_LIMIT]


# A repeat offender: this many faults (checks that found something owed) within the window send the
# node to a person instead of back into the pool (NVSentinel escalates repeated faults on one GPU
# the same way; fleet studies find a few nodes account for many of the faults).
QUARANTINE_FAULTS = 3
QUARANTINE_WINDOW_S = 7 * 86400


def advance(state, records, faults, *, boot_id, now, recovery=None, clear=False, complete=True, quarantine=None):
    """The state after this run: ``records`` (the checks that ran), ``faults`` (the owed actions they
    found: :func:`fault`), ``recovery`` (GPU label -> the driver's recovery action now, where it
    reports one), ``clear`` (a person cleared every owed action), ``complete`` (every check ran; a
    run cut short adds a ``cannot_check`` failure instead, which only a complete run takes away),
    ``quarantine`` (``(faults, seconds)``: that many faults within that window since a person last
    cleared the node owe a person's inspection of the whole node). Returns a new state; the input is
    not changed."""
    state = {
        "schema": SCHEMA,
        "boot_id": state.get("boot_id", ""),
        "failed": dict(state.get("failed") or {}),
        "owed": dict(state.get("owed") or {}),
        "history": list(state.get("history") or []),
    }
    rebooted = bool(state["boot_id"]) and bool(boot_id) and boot_id != state["boot_id"]
    if boot_id:
        state["boot_id"] = boot_id
    for key, entry in list(state["owed"].items()):
        observed = None
        now_says = (recovery or {}).get(entry["subject"], "absent")
        driver_reset = entry.get("source") == "driver" and recovery_action(now_says) is None
        if rebooted and entry["action"] in ("reset", "reboot", "power"):
            observed = "reboot observed (a new boot id)"
        elif entry["action"] == "reset" and driver_reset and now_says != "absent":
            observed = "reset observed (the driver's recovery action is None again)"
        elif clear:
            observed = "cleared by a person (--clear-xids)"
        if observed:
            del state["owed"][key]
            _event(state, now, "observed", f"{key}: {observed}")
    for item in faults:
        key = f"{item['action']} {item['subject']}"
        if key not in state["owed"]:
            state["owed"][key] = {**item, "since": round(float(now), 3), "boot_id": boot_id}
            _event(state, now, "fault", f"{key}: {item['why']}", serial=known_serial(item.get("serial")))
    if quarantine and faults and "inspect node" not in state["owed"]:
        count, window = quarantine
        found = repeat_faults(state, now, window)
        if found >= count:
            why = f"a repeat offender: {found} faults in {window / 86400:g} days (quarantined for a person)"
            state["owed"]["inspect node"] = {
                **fault("inspect", "node", why),
                "since": round(float(now), 3),
                "boot_id": boot_id,
            }
            _event(state, now, "quarantine", why)
    for record in records:
        if record.get("verdict") != "fail":
            continue
        key = f"{record['check']} {record['subject']}"
        if key not in state["failed"]:
            state["failed"][key] = {
                "check": record["check"],
                "subject": str(record["subject"]),
                "measured": str(record.get("measured"))[:200],
                "since": round(float(now), 3),
            }
            _event(state, now, "failed", key)
    for key, entry in list(state["failed"].items()):
        if entry["check"] == "cannot_check":
            if complete:
                del state["failed"][key]
                _event(state, now, "passed", key)
        elif complete and proven(entry["check"], entry["subject"], records):
            del state["failed"][key]
            _event(state, now, "passed", key)
    for part in ("failed", "owed"):
        if len(state[part]) > _ENTRY_LIMIT:
            state[part] = dict(sorted(state[part].items(), key=lambda kv: kv[1].get("since", 0))[-_ENTRY_LIMIT:])
    return state


def repeat_faults(state, now, window):
    """The faults of the node within ``window`` seconds before ``now`` and since a person last cleared
    it: the checks that found something owed (one fault however many GPUs or actions it named)."""
    cleared = max(
        (e.get("t", 0) for e in state["history"] if "cleared by a person" in str(e.get("detail", ""))), default=0
    )
    return len(
        {
            e.get("t")
            for e in state["history"]
            if e.get("event") == "fault" and e.get("t", 0) > max(cleared, now - window)
        }
    )


# A GPU's memory follows its board serial: each fault on one GPU carries the serial nvidia-smi read
# when the fault was seen (health.with_serials), the fleet state keeps each node's (validation's
# ``gpu_faults``), and a GPU with QUARANTINE_FAULTS of them within the window, on whichever nodes
# and slots, fails validation's ``gpu_history`` check where it is now: its node is drained, and stays
# so until the GPU is replaced (another serial) or its faults leave the window.
GPU_FAULTS_KEPT = 64


def gpu_fault_events(state, since):
    """The faults in the node's history after ``since`` that name a GPU by its serial:
    ``[{"serial", "t", "detail"}]``."""
    return merge_gpu_faults(
        [
            {"serial": e.get("serial"), "t": e.get("t"), "detail": e.get("detail", "")}
            for e in state.get("history") or []
            if isinstance(e, dict) and e.get("event") == "fault"
        ],
        since,
    )


def merge_gpu_faults(events, since):
    """``events`` (this run's and the fleet state's) of a known serial and time after ``since``, each
    once, oldest first, the newest :data:`GPU_FAULTS_KEPT` of them."""
    kept = {}
    for e in events or []:
        t = e.get("t") if isinstance(e, dict) else None
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            continue
        serial = known_serial(e.get("serial"))
        if serial and e["t"] > since:
            kept[(serial, round(float(e["t"])))] = {
                "serial": serial,
                "t": round(float(e["t"]), 3),
                "detail": str(e.get("detail") or "")[:200],
            }
    return sorted(kept.values(), key=lambda e: (e["t"], e["serial"]))[-GPU_FAULTS_KEPT:]


def gpu_history(faults_by_node, gpus, since, count):
    """The GPUs of a node (``gpus``, nvidia_gpu facts' entries with ``index`` and ``serial``) whose
    serial has ``count`` or more faults after ``since`` on any node (``faults_by_node``: node ->
    events): ``[{"subject": "GPU3", "serial", "faults": [{"node", "t", "detail"}]}]``."""
    by_serial = {}
    for node in sorted(faults_by_node, key=_natural):
        for e in merge_gpu_faults(faults_by_node[node], since):
            by_serial.setdefault(e["serial"], {})[round(e["t"])] = {"node": node, "t": e["t"], "detail": e["detail"]}
    out = []
    for gpu in gpus or []:
        serial = known_serial(gpu.get("serial")) if isinstance(gpu, dict) else None
        found = sorted(by_serial.get(serial, {}).values(), key=lambda f: f["t"]) if serial else []
        if count and len(found) >= count:
            out.append({"subject": f"GPU{gpu.get('index')}", "serial": serial, "faults": found})
    return out


def timing(state):
    """When the node's current episode began and when this check drained it, and how long its last
    repair took (from its first fault or failed check to its resume) and of which class (the
    strongest action its faults owed: ``reset``, ``reboot``, ``power``, ``inspect``; ``check`` where
    only checks failed), from its history: ``{"fault_since", "drained_since", "last_repair_s",
    "last_repair_class"}``, each None where there is none."""
    fault_since = drained_since = last_repair = last_class = None
    started, owed = None, set()
    for event in state["history"]:
        kind, t = event.get("event"), event.get("t")
        if not isinstance(t, (int, float)):
            continue
        if kind in ("fault", "failed", "cannot check") and started is None:
            started = t
        if kind == "fault":
            owed.add(str(event.get("detail", "")).split(" ", 1)[0])
        elif kind == "drain" and drained_since is None:
            drained_since = t
        elif kind == "resume":
            if started is not None:
                last_repair = t - started
                last_class = next((action for action in _ORDER if action in owed), "check")
            started = drained_since = None
            owed = set()
    if outstanding(state):
        since = [entry.get("since") for part in ("failed", "owed") for entry in state[part].values()]
        since = [t for t in since if isinstance(t, (int, float))]
        fault_since = min(since) if since else started
    return {
        "fault_since": fault_since,
        "drained_since": drained_since,
        "last_repair_s": last_repair,
        "last_repair_class": last_class,
    }


def cannot_check(state, why, *, now):
    """The state after a run that could not check the node (its deadline, an unexpected error)."""
    state = advance(state, [], [], boot_id=state.get("boot_id", ""), now=now, complete=False)
    key = "cannot_check node"
    if key not in state["failed"]:
        state["failed"][key] = {"check": "cannot_check", "subject": "node", "measured": str(why)[:200], "since": now}
        _event(state, now, "cannot check", why)
    else:
        state["failed"][key]["measured"] = str(why)[:200]
    return state


def outstanding(state):
    """Everything the node still owes, in order: its owed actions (strongest first), then its failed checks."""
    owed = sorted(state["owed"], key=lambda k: (_ORDER.index(state["owed"][k]["action"]), _natural(k)))
    failed = sorted(state["failed"], key=lambda k: (k != "cannot_check node", _natural(k)))
    return owed + failed


def _natural(text):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


natural_key = _natural  # node names in their natural order (gpu2 before gpu10)


def owed_records(state, record):
    """One failed record per owed action (check ``recovery``), so that what a node owes shows where
    its failed checks do (the command's output, the textfile, node-problem-detector)."""
    out = []
    for key in outstanding(state):
        if key not in state["owed"]:
            continue
        entry = state["owed"][key]
        out.append(
            record(
                "recovery",
                entry["subject"],
                "no reset, reboot or inspection owed",
                f"{entry['action']} owed: {entry['why']}"[:200],
                "fail",
                f"outstanding until {ACTIONS[entry['action']]} is observed",
            )
        )
    return out


_EVIDENCE_STAMP = re.compile(r"(\d{8}T\d{6}Z)-")


def evidence_id(state):
    """The evidence bundle of the node's current drain (the stamp of ``evidence/<stamp>-<node>.json``
    beside the state file), from the history's last ``evidence`` event since its last resume; or None."""
    found = None
    for event in state["history"]:
        if event.get("event") == "resume":
            found = None
        elif event.get("event") == "evidence":
            stamp = _EVIDENCE_STAMP.match(os.path.basename(str(event.get("detail") or "")))
            found = stamp.group(1) if stamp else None
    return found


def reason(state, prefix, limit=200):
    """The drain reason: ``prefix`` and what the node owes (``reset GPU3, xid GPU3``), cut at ``limit``
    with ``+N more``, then the drain's evidence bundle where it has one (``(evidence <stamp>)``); the
    whole set stays in the state."""
    keys = [
        f"cannot check: {state['failed'][key]['measured']}" if key == "cannot_check node" else key
        for key in outstanding(state)
    ]
    found = evidence_id(state)
    suffix = f" (evidence {found})" if found else ""
    return _cut(prefix, keys, limit - len(suffix)) + suffix


def _cut(prefix, keys, limit):
    text = prefix + ", ".join(keys)
    if len(text) <= limit:
        return text
    shown = []
    for index, key in enumerate(keys):
        rest = len(keys) - index - 1
        candidate = prefix + ", ".join([*shown, key]) + (f", +{rest} more" if rest else "")
        if len(candidate) > limit:
            break
        shown.append(key)
    if not shown:
        rest = len(keys) - 1
        more = f", +{rest} more" if rest else ""
        return prefix + keys[0][: max(limit - len(prefix) - len(more) - 3, 0)] + "..." + more
    return (prefix + ", ".join([*shown, f"+{len(keys) - len(shown)} more"]))[:limit]


def decide(state, drained, reason_now, prefix, rebooting=False):
    """``(action, why)`` on Slurm from the node's state and its Slurm state now (``drained``: it has
    the DRAIN flag or is down; ``reason_now``: its reason; ``rebooting``: Slurm shows a reboot asked
    or under way). ``drain`` (``why`` is the reason), ``resume`` (every failed check passed, nothing
    owed), ``keep`` (outstanding and drained already, by this check with the same reason or by
    someone else; or rebooting: the check after the reboot decides) or ``none``."""
    ours = (reason_now or "").startswith(prefix)
    if rebooting:
        return "keep", f"a reboot is asked or under way ({reason_now or 'no reason'}): the check after it decides"
    if outstanding(state):
        wanted = reason(state, prefix)
        if drained and not ours:
            return "keep", f"drained already for another reason ({reason_now}); not changed. Outstanding: {wanted}"
        if drained and reason_now == wanted:
            return "keep", wanted
        return "drain", wanted
    if drained and ours:
        return "resume", f"every check it was drained for passed again, nothing owed (was: {reason_now})"
    return "none", "healthy" if not drained else f"healthy; drained by someone else ({reason_now}), left drained"


# ---------------------------------------------------------------------------------------------
# The repair ladder's first rung: a GPU reset on the node itself

_GPU = re.compile(r"GPU(\d+)\Z")


def reset_plan(state, idle, nvswitches=0):
    """``(step, detail)``: what the node does about the GPU resets it owes, where nothing else is owed.
    ``step`` is None (no reset owed, or something stronger is), ``wait`` (jobs still run: a drained
    node takes no new job, and those running end as they would), ``escalate`` (a reset this node
    does not do: on an NVSwitch system, where Fabric Manager owns the fabric, or a GPU it cannot
    name; a reboot resets GPUs and switches together) or ``reset`` (``detail``: the GPU indexes)."""
    owed = state["owed"]
    resets = {key: entry for key, entry in owed.items() if entry["action"] == "reset"}
    if not resets or len(resets) != len(owed):
        return None, None
    if not idle:
        return "wait", "jobs still run on the node: the GPU reset waits until they end (no new job starts here)"
    if nvswitches:
        return "escalate", (
            "an NVSwitch system: Fabric Manager trains the fabric the GPUs share, so a GPU is reset with the "
            "node's reboot, not alone"
        )
    indexes = []
    for entry in resets.values():
        match = _GPU.match(entry["subject"])
        if not match:
            return "escalate", f"a reset owed by {entry['subject']}, which names no GPU index"
        indexes.append(int(match.group(1)))
    return "reset", sorted(set(indexes))


def after_reset(state, done, detail, *, now):
    """The state after the reset step: ``done`` (every GPU reset) observes the owed resets; a reset
    that failed or was refused (a process holds the GPU) escalates each to a reboot, once: nothing loops."""
    state = {**state, "owed": dict(state["owed"]), "history": list(state["history"])}
    for key, entry in list(state["owed"].items()):
        if entry["action"] != "reset":
            continue
        del state["owed"][key]
        if done:
            _event(state, now, "observed", f"{key}: reset by gpuops-health ({detail})")
        else:
            escalated = {**entry, "action": "reboot", "why": f"the GPU reset failed ({detail}); {entry['why']}"[:300]}
            state["owed"][f"reboot {entry['subject']}"] = escalated
            _event(state, now, "escalated", f"{key}: reset failed ({detail}): a reboot is owed")
    return state


# ---------------------------------------------------------------------------------------------
# The next rungs: a reboot through Slurm, a power cycle through the BMC, then a person

# Automatic reboots per episode (from a fault to the node's resume): a fault that a reboot did not
# cure is a power cycle's next, and one a power cycle did not cure a person's. Nothing loops.
REBOOTS_PER_EPISODE = 1


def episode(state):
    """The events of the node's current episode: those since it was last resumed or a person cleared it."""
    events = state["history"]
    start = 0
    for index, event in enumerate(events):
        if event.get("event") == "resume" or "cleared by a person" in str(event.get("detail", "")):
            start = index + 1
    return events[start:]


def reboot_plan(state, rebooting=False):  # noqa: PLR0911 - one return per step
    """``(step, detail)``: what the node does about the reboot it owes. ``step`` is None (no reboot
    owed, or a power cycle or a person is: they come first), ``wait`` (Slurm has the reboot in hand:
    asked on this boot, or the node shows one under way; a drained node takes no new job and those
    running end as they would), ``failed`` (Slurm refused it on this boot: the node stays drained,
    ``detail`` says why; the next boot or a person goes on), ``escalate`` (``detail``: the action
    owed instead, ``power`` where this ladder's reboot did not cure the node, ``inspect`` where its
    power cycle did not either) or ``reboot`` (ask Slurm: ``scontrol reboot ASAP nextstate=DOWN``)."""
    actions = {entry["action"] for entry in state["owed"].values()}
    if "reboot" not in actions or actions & {"power", "inspect"}:
        return None, None
    if rebooting:
        return "wait", "Slurm reboots the node once its jobs end (no new job starts here)"
    events = episode(state)
    boot = state.get("boot_id", "")
    for event in reversed(events):
        if event.get("boot") == boot and event.get("event") == "reboot failed":
            return "failed", event.get("detail", "")
        if event.get("boot") == boot and event.get("event") == "reboot requested":
            return "wait", "a reboot was asked of Slurm on this boot: it comes once the node is idle"
    powered = any(
        event.get("event") == "observed" and str(event.get("detail", "")).startswith("power ") for event in events
    )
    if powered:
        return "escalate", "inspect"
    asked = sum(1 for event in events if event.get("event") == "reboot requested")
    if asked >= REBOOTS_PER_EPISODE:
        return "escalate", "power"
    return "reboot", "asked of Slurm: scontrol reboot ASAP nextstate=DOWN"


def awaits_boot_check(state, boot_id):
    """Whether the node is on the boot after a reboot this ladder asked of Slurm in its episode (asked
    on another boot) and not resumed since: its next check is the one that can resume it."""
    return bool(boot_id) and any(
        event.get("event") == "reboot requested" and event.get("boot") not in (None, boot_id)
        for event in episode(state)
    )


def after_reboot_request(state, done, detail, *, now):
    """The state after asking Slurm for the reboot: recorded with the boot it was asked on, so that
    it is asked once per boot, and counted for the episode (:func:`reboot_plan`)."""
    return with_event(
        state, now, "reboot requested" if done else "reboot failed", detail, boot=state.get("boot_id", "")
    )


def escalate(state, action, *, now):
    """The state where the reboots owed give way to ``action`` (``power`` or ``inspect``) for the whole
    node, because this ladder's last step did not cure it."""
    state = {**state, "owed": dict(state["owed"]), "history": list(state["history"])}
    why = [entry["why"] for entry in state["owed"].values() if entry["action"] == "reboot"]
    for key in [key for key, entry in state["owed"].items() if entry["action"] == "reboot"]:
        del state["owed"][key]
    step = "a reboot" if action == "power" else "a reboot and a power cycle"
    text = f"owed again after {step} in this episode: {'; '.join(why)}"[:300]
    state["owed"][f"{action} node"] = {
        **fault(action, "node", text),
        "since": round(float(now), 3),
        "boot_id": state.get("boot_id", ""),
    }
    _event(state, now, "escalated", f"{action} node: {text}")
    return state


# ---------------------------------------------------------------------------------------------
# The blast-radius budget

# Defaults: at most 10 % of the fleet, and never more than 8 nodes, out at once by automation.
# Published fleet studies put GPU node faults at a few per thousand GPUs per day (Meta's Llama 3
# report: 419 unexpected interruptions in 54 days on 16,384 GPUs, about one per 2,000 nodes an
# hour), so more than a handful of nodes out at once is a shared cause (a driver, the fabric, power,
# a bad check) that draining more nodes would not cure.
BUDGET_NODES = 8
BUDGET_PERCENT = 10


def as_number(value, kind):
    """A budget setting given as text (``-e name=value`` gives text) as ``kind``; anything else as it is
    (:func:`budget_problems` names what is wrong with it)."""
    if isinstance(value, str):
        try:
            return kind(value.strip())
        except ValueError:
            return value
    return value


def budget_problems(nodes, percent, names=("nodes", "percent")):
    """Each problem of a budget's settings, naming the variable (``names``) and the fix."""
    problems = []
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        problems.append(
            f"{names[0]} is {nodes!r}: it must be a whole number of nodes of 1 or more (0 would forbid every "
            "automatic drain; to stop them, say so in the check's mode instead)"
        )
    if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not 0 < percent <= 100:
        problems.append(f"{names[1]} is {percent!r}: it must be a share of the fleet above 0 and at most 100 (%)")
    return problems


def budget_limit(fleet, nodes=BUDGET_NODES, percent=BUDGET_PERCENT):
    """How many nodes automation may hold out at once in a fleet of ``fleet`` nodes: the smaller of
    ``nodes`` and ``percent`` of the fleet, at least one."""
    return max(1, min(int(nodes), math.floor(fleet * float(percent) / 100 + 1e-9)))


AUTOMATIC_PREFIXES = ("gpuops-health:", "gpuops-validate:", "gpuops-remediate:", "gpuops:", "gpuops ")
_OUT_STATES = ("drain", "drng", "down", "fail", "maint", "reboot", "boot", "powered_down", "power_down")


def sinfo_rows(text):
    """Each node of ``sinfo -h -N -o '%N|%t|%E'`` (listed once per partition: once here): ``{node:
    {"flags", "state", "reason"}}``, ``flags`` the compact state as printed (``down*``, ``drng@``),
    ``state`` without its flags, both lower case."""
    rows = {}
    for line in (text or "").splitlines():
        node, _sep, rest = line.strip().partition("|")
        flags, _sep, why = rest.partition("|")
        if node:
            flags = flags.strip().lower()
            rows[node] = {"flags": flags, "state": flags.rstrip("*~#!%$@^-+"), "reason": why.strip()}
    return rows


def fleet_out(text):
    """``(fleet, out)`` from ``sinfo -h -N -o '%N|%t|%E'``: the fleet's node names, and those out of
    service by this collection's automation (drained, draining, down or rebooting with a reason of its own)."""
    rows = sinfo_rows(text)
    out = {
        node
        for node, row in rows.items()
        if row["state"].startswith(_OUT_STATES) and row["reason"].startswith(AUTOMATIC_PREFIXES)
    }
    return set(rows), out


# The budget's memory, fleet-wide, in Slurm's own persisted node state: each node's Comment
# (``scontrol update NodeName=... Comment=...``; slurmctld saves it with the node and keeps it over a
# restart and a reconfigure). An automatic take-out stamps the node ``gpuops: taken out <time>``: it
# counts against the budget for BUDGET_WINDOW_S after that, back in service or not. A take-out the
# budget refused stamps the refused node ``gpuops: budget spent <time> (...)``: the latch. While any
# node carries it, automation takes no node out; only a person clears it (remediate.yml
# -e remediate_reopen_budget=true). A person's own comment is never overwritten.
# The window: an hour. At the failure rate of published fleet studies (about one node an hour in a
# fleet of 2,000) more than a handful of take-outs within an hour is a shared cause, not bad luck.
BUDGET_WINDOW_S = 3600
COMMENT_PREFIX = "gpuops: "
TAKEN = "gpuops: taken out "
SPENT = "gpuops: budget spent "
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")
COMMENTS_ARGV = ("sinfo", "-h", "-N", "-O", "NodeList:0|,Comment:0")


def comment_rows(text):
    """Each node's Comment from ``sinfo -h -N -O 'NodeList:0|,Comment:0'`` (:data:`COMMENTS_ARGV`):
    ``{node: comment}``, ``""`` where it has none (sinfo prints ``(null)``)."""
    rows = {}
    for line in (text or "").splitlines():
        node, sep, comment = line.strip().partition("|")
        if node and sep:
            comment = comment.strip()
            rows[node] = "" if comment == "(null)" else comment
    return rows


def _stamp_time(comment):
    prefix = TAKEN if comment.startswith(TAKEN) else SPENT
    found = _STAMP.match(comment.replace(prefix, "", 1))
    if not found:
        return None
    return calendar.timegm(time.strptime(found.group(1), "%Y-%m-%dT%H:%M:%SZ"))


def budget_comment(kind, now, detail=""):
    """The Comment that records a take-out (``kind`` ``taken``) or the latch (``spent``) at ``now``."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return (TAKEN if kind == "taken" else SPENT) + stamp + (f" ({detail})" if detail else "")


def comment_update(current, new):
    """``new`` where the node's Comment ``current`` is empty or this collection's, else None: a
    person's comment is never overwritten (that node's take-out then counts only while it is out)."""
    return new if not current or current.startswith(COMMENT_PREFIX) else None


def latch(comments):
    """``[(node, comment)]``: the nodes that carry the budget's latch (a refused take-out)."""
    return sorted(((n, c) for n, c in (comments or {}).items() if c.startswith(SPENT)), key=lambda nc: _natural(nc[0]))


def budget(text, node, nodes=BUDGET_NODES, percent=BUDGET_PERCENT, *, comments=None, window=BUDGET_WINDOW_S, now=None):
    """``(allowed, why, spent)``: whether automation may take ``node`` out now, from the fleet as sinfo
    prints it (:func:`fleet_out`) and, where given, the nodes' Comments (:func:`comment_rows`): the
    nodes out by automation now and those it took out within ``window`` seconds of ``now`` count. A node
    out already costs nothing more. Refused while the latch is set (:func:`latch`); a refusal that
    spends the budget returns ``spent``, the Comment that sets the latch on ``node``, else None."""
    fleet, out = fleet_out(text)
    fleet.add(node)
    limit = budget_limit(len(fleet), nodes, percent)
    if node in out:
        return True, f"{node} is out already (it costs the budget nothing more)", None
    held = latch(comments)
    if held:
        first, said = held[0]
        return (
            False,
            (
                f"the blast-radius budget is latched ({first}: {said}"
                f"{f' and {len(held) - 1} more' if len(held) > 1 else ''}): "
                "automation takes no node out until a person reopens it; look for a shared cause, then run "
                "ansible-playbook gpuops.cluster.remediate -e remediate_reopen_budget=true"
            ),
            None,
        )
    recent = set()
    if now is not None and window:
        for other, said in (comments or {}).items():
            stamped = _stamp_time(said) if said.startswith(TAKEN) else None
            if other in fleet and stamped is not None and now - window < stamped <= now + 60:
                recent.add(other)
    others = sorted((out | recent) - {node}, key=_natural)
    back = len(set(others) - out)
    counted = f"{len(others)} of {limit} nodes out by automation" + (
        f" ({back} of them back in service, taken out within the last {window} s)" if back else ""
    )
    if len(others) < limit:
        return True, f"{counted} ({len(fleet)} in the fleet)", None
    shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    why = (
        f"the blast-radius budget is spent: {len(others)} nodes of {len(fleet)} are out by automation or were "
        f"taken out within the last {window} s ({shown}), the limit is {limit} (the smaller of {nodes} nodes and "
        f"{percent} % of the fleet); automation takes no node out until a person reopens it: look for a shared "
        "cause, then run ansible-playbook gpuops.cluster.remediate -e remediate_reopen_budget=true"
    )
    return (
        False,
        why,
        budget_comment(
            "spent", now if now is not None else time.time(), f"{node} refused, {len(others)} of {limit} out"
        ),
    )


def window_problems(window, name="window"):
    """The problem of a budget window's setting, naming the variable, or []."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        return [
            f"{name} is {window!r}: it must be a whole number of seconds of 1 or more "
            "(the budget counts a take-out for that long)"
        ]
    return []


# ---------------------------------------------------------------------------------------------
# The third rung, on a controller: a power cycle through the node's BMC (playbooks/remediate.yml)

REMEDIATE_PREFIX = "gpuops-remediate: "


def remediation_plan(
    text, nodes=(), budget_nodes=BUDGET_NODES, budget_percent=BUDGET_PERCENT, prefix="gpuops-health: "
):
    """What remediate.yml does with each node, from the fleet as sinfo prints it
    (``sinfo -h -N -o '%N|%t|%E'``): ``{"plan": [{"node", "action", "why"}], "problems": [...]}``.

    ``power_cycle`` where the health check took the node out (its reason starts with ``prefix``) and
    either Slurm has it down or not responding (a reboot that never came back: ``reboot timed out``; a
    hung node), or the check escalated it to a power cycle (``power node`` in its reason); at most
    the budget's limit per run (:func:`budget_limit` of the fleet), the rest ``refused``. ``none``
    otherwise, with the reason: in service, out for a person's or another tool's reason (never
    touched), or the node's own check has the repair in hand. ``nodes``: the nodes asked for (an
    alert's); empty, every node. A node Slurm does not list is a problem, refused before any change."""
    rows = sinfo_rows(text)
    wanted = list(dict.fromkeys(str(n) for n in nodes)) or sorted(rows, key=_natural)
    problems = [
        f"{node} is not a node Slurm knows (sinfo lists {len(rows)}); name the Slurm node (remediate_nodes)"
        for node in wanted
        if node not in rows
    ]
    limit = budget_limit(max(len(rows), 1), budget_nodes, budget_percent)
    plan, cycles = [], 0
    for node in wanted:
        if node not in rows:
            continue
        flags, why = rows[node]["flags"], rows[node]["reason"]
        hung = "*" in flags or rows[node]["state"].startswith(("down", "fail"))
        if not why.startswith(prefix):
            detail = (
                "in service" if why in ("", "none") else f"out for another reason ({why}): a person's, never touched"
            )
            plan.append({"node": node, "action": "none", "why": detail})
        elif hung or "power node" in why:
            if cycles >= limit:
                wait = f"the blast-radius budget allows {limit} power cycle(s) a run; this one waits for the next run"
                plan.append({"node": node, "action": "refused", "why": wait})
                continue
            cycles += 1
            cause = (
                "down or not responding (a reboot that never came back, a hung node)"
                if hung
                else "it owes a power cycle"
            )
            plan.append({"node": node, "action": "power_cycle", "why": f"{cause}: {why}", "reason": why})
        else:
            plan.append({"node": node, "action": "none", "why": f"the node's own check has the repair in hand ({why})"})
    return {"plan": plan, "problems": problems, "limit": limit}
