# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node health check between runs (``gpuops-health``): validation's quick node checks, bounded.

Slurm runs it as slurmd's HealthCheckProgram (every HealthCheckInterval, and at slurmd's start),
a Kubernetes node as node-problem-detector's custom plugin, a person as a command. It reads the
node (``nvidia-smi -q -x``, sysfs, the kernel log, ``ibstat``), each command under a timeout, and
gives validation's records (:mod:`validation`): GPU count on PCI against nvidia-smi, persistence
mode, ECC, each GPU's NVLink fabric registration and the driver's recovery action, Xids new since
the last check, DCGM's health watches (``dcgmi health -c``) where DCGM runs, the compute HCAs
present with their ports Active at rate.

What it does with them is the node state machine's (:mod:`node_state`): every failed check and
every recovery action a fault owes (a GPU reset, a reboot, a person's inspection) is kept in the
state file; on a Slurm node the check drains the node with them as the reason (prefix
:data:`PREFIX`), within the fleet's blast-radius budget, and resumes it only when each failed check
has passed again and each owed action was observed, and only when that prefix is still the node's
reason: a node a person, validation or a rollout drained is left as it is. Deep checks (DCGM's
diagnostic, NCCL) stay in validation (node_health).

This file holds the checks and the decisions; the command that runs them on the node (its commands
under timeouts, the state file, the calls to Slurm) is ``roles/validate/files/gpuops_health.py``.
No Ansible runs on the node: the validate role's ``health_check`` entry point copies both there
with the module_utils this one imports.
"""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.gpuops.cluster.plugins.module_utils import imex
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.module_utils.dcgm import parse_dcgmi_health
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.ibstat import active_ports, parse_ibstat
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import parse_query_xml

PREFIX = "gpuops-health: "
CONFIG = "/etc/gpuops/health.json"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
# The node exporter's textfile (Debian's folder), where the node exporter runs: the dcgm role's alert
# rules read when the check last ran, what failed, and whether it drained the node.
TEXTFILE = "gpuops-health.prom"
STATE = "/var/lib/gpuops/health-state.json"
# slurmd kills a HealthCheckProgram after 60 s (slurm.conf(5)); the checks stop at DEADLINE_S, which
# leaves the Slurm calls that follow (three at most, SLURM_TIMEOUT_S each) time to drain the node.
DEADLINE_S = 40
COMMAND_TIMEOUT_S = 10
SLURM_TIMEOUT_S = 5
# The GPU reset step runs only while the check is younger than RESET_AFTER_S, under RESET_TIMEOUT_S,
# so that the whole check with its Slurm calls stays inside slurmd's 60 s.
RESET_AFTER_S = 30
RESET_TIMEOUT_S = 15
# The evidence of a drain (gpuops_health._evidence): each output the check read, cut to its last
# EVIDENCE_OUTPUT_CHARS characters, and the newest EVIDENCE_KEEP bundles kept.
EVIDENCE_OUTPUT_CHARS = 262144
EVIDENCE_KEEP = 20
# What the drain's evidence adds after the drain, in the background (gpuops-health --mode evidence,
# a transient unit): NVIDIA's nvidia-bug-report.sh (--safe-mode: its parts that may hang a faulted
# GPU left out), dcgmi diag -r 1 -j, the InfiniBand port counters and the kernel log's lines around
# each Xid. Each step is bounded in time; the bug report is dropped past EVIDENCE_BUG_REPORT_BYTES.
EVIDENCE_BUG_REPORT_S = 300
EVIDENCE_BUG_REPORT_BYTES = 64 * 1024 * 1024
EVIDENCE_DIAG_S = 180
EVIDENCE_XID_CONTEXT = 10


def xid_window(log, context=EVIDENCE_XID_CONTEXT, limit=2000):
    """The kernel log's lines within ``context`` lines of each Xid line (at most ``limit`` lines)."""
    lines = (log or "").splitlines()
    keep = set()
    for number, line in enumerate(lines):
        if "NVRM: Xid" in line:
            keep.update(range(max(0, number - context), min(len(lines), number + context + 1)))
    return [lines[n] for n in sorted(keep)][:limit]


def port_counters(root="/sys/class/infiniband", limit=64):
    """Each InfiniBand/RoCE port's counters from sysfs: ``{"mlx5_0/1": {"symbol_error": 0, ...}}`` (at most
    ``limit`` ports); what cannot be read is left out."""
    out = {}
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return out
    for device in devices:
        ports = os.path.join(root, device, "ports")
        try:
            numbers = sorted(os.listdir(ports))
        except OSError:
            continue
        for port in numbers:
            folder = os.path.join(ports, port, "counters")
            values = {}
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names[:64]:
                try:
                    with open(os.path.join(folder, name), encoding="ascii", errors="replace") as handle:
                        text = handle.read(64).strip()
                except OSError:
                    continue
                values[name] = int(text) if text.isdigit() else text
            out[f"{device}/{port}"] = values
            if len(out) >= limit:
                return out
    return out


# How long a check waits for another one of the same node (slurmd's, a person's) to finish.
LOCK_WAIT_S = 10
# Watch mode (gpuops-health-watch.service): a check this long after an Xid line (the lines of one
# fault come together: Xid 94, then 154), and at most one check per WATCH_GAP_S.
WATCH_SETTLE_S = 2
WATCH_GAP_S = 10
# And one check this long after the watcher starts: at boot, once slurmd has registered the node on
# its new boot, so that the check after a reboot of the repair ladder resumes the node without
# waiting for slurmd's HealthCheckInterval (slurmd's own check at its start runs before it registers,
# while Slurm still shows the reboot under way).
WATCH_START_S = 30
# Xid lines remembered as read, so that the next check counts only new ones (bounded: a kernel log
# that floods with Xids does not grow the state file).
_SEEN_LIMIT = 512
# node-problem-detector's custom plugin protocol: exit 0 OK, 1 NonOK, 2 Unknown.
NPD_OK, NPD_NONOK, NPD_UNKNOWN = 0, 1, 2


class ConfigError(Exception):
    """The health check's configuration is missing or wrong: the message names the file and the fix."""


def load_config(text, path=CONFIG):
    """The node's expectations, written by the validate role's health_check entry point."""
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not JSON ({exc}); run the validate role's health_check entry point again"
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(
            f"{path} holds {type(config).__name__}, not an object; run the health_check entry point again"
        )
    checks = (
        ("pci_gpus", int),
        ("nvswitch_count", int),
        ("hcas", list),
        ("hca_pci", list),
        ("repair_reset", bool),
        ("repair_reboot", bool),
        ("boot_id_file", str),
        ("watch_interval", int),
        ("imex", bool),
        ("imex_nodes_config", str),
    )
    for key, kind in checks:
        value = config.get(key, kind())
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"{path}: {key} must be {kind.__name__}; run the health_check entry point again")
    if config.get("fabric", "auto") not in ("auto", "InfiniBand", "Ethernet", "none"):
        raise ConfigError(
            f"{path}: fabric must be auto, InfiniBand, Ethernet or none, not {config['fabric']!r}; "
            "set validate_fabric and run the health_check entry point again"
        )
    problems = ns.budget_problems(
        config.setdefault("budget_nodes", ns.BUDGET_NODES),
        config.setdefault("budget_percent", ns.BUDGET_PERCENT),
        (
            f"{path}: budget_nodes (validate_health_budget_nodes)",
            f"{path}: budget_percent (validate_health_budget_percent)",
        ),
    )
    problems += ns.window_problems(
        config.setdefault("budget_window", ns.BUDGET_WINDOW_S), f"{path}: budget_window (validate_health_budget_window)"
    )
    if config.get("watch_interval", 0) < 0:
        problems.append(
            f"{path}: watch_interval (validate_health_watch_interval) is {config['watch_interval']}: 0 or more"
        )
    faults = config.setdefault("quarantine_faults", ns.QUARANTINE_FAULTS)
    days = config.setdefault("quarantine_days", ns.QUARANTINE_WINDOW_S / 86400)
    if not isinstance(faults, int) or isinstance(faults, bool) or faults < 0:
        problems.append(f"{path}: quarantine_faults (validate_health_quarantine_faults) is {faults!r}: 0 (off) or more")
    if isinstance(days, bool) or not isinstance(days, (int, float)) or days <= 0:
        problems.append(f"{path}: quarantine_days (validate_health_quarantine_days) is {days!r}: more than 0 days")
    if problems:
        raise ConfigError("; ".join(problems) + "; set it and run the health_check entry point again")
    return config


def xid_seen(state, boot_id, xids):
    """``(state, new)``: the Xid lines new since the last check, and the lines read so far on this
    boot (bounded: a kernel log that floods with Xids does not grow the state file). What a fatal
    Xid owes (a reset, a reboot) is the node state's (:func:`faults_of_xids`), kept until observed."""
    if not isinstance(state, dict) or state.get("boot_id") != boot_id:
        state = {"boot_id": boot_id, "seen": []}
    seen = [s for s in state.get("seen") or [] if isinstance(s, str)]
    known = set(seen)
    new = []
    for xid in xids:
        key = hashlib.sha256(xid["line"].encode("utf-8", "replace")).hexdigest()[:16]
        if key in known:
            continue
        known.add(key)
        seen.append(key)
        new.append(xid)
    return {"boot_id": boot_id, "seen": seen[-_SEEN_LIMIT:]}, new


def faults_of_xids(xids, records):
    """What the Xids of this check owe: one :func:`node_state.fault` per fatal Xid (the catalogue's
    immediate action) and per Xid 154 that states a reset or a reboot, on the GPU its record names."""
    subjects = {r["reason"].split(" (NVIDIA", 1)[0]: r["subject"] for r in records if r["check"] == "xid"}
    out = []
    for xid in xids:
        action = ns.xid_action(xid["xid"], xid["line"], v.FATAL_XIDS.get(xid["xid"]))
        if action:
            subject = subjects.get(xid["line"], xid["pci"])
            out.append(ns.fault(action, subject, f"Xid {xid['xid']}: {xid['line'][:150]}"))
    return out


def load_state(text, boot_id):
    """``(node_state, xid_seen_state, lost)`` from the state file's text (None where there is none).
    ``lost`` says why the node's state could not be read (a missing, unreadable or foreign file),
    or is None. A file of the releases before the state machine (``seen``, ``outstanding``) is
    taken over: its outstanding fatal Xids become owed actions."""
    if text is None:
        return ns.new_state(boot_id), {}, "there was no state file"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return ns.new_state(boot_id), {}, "the state file was not JSON"
    if isinstance(data, dict) and "node" not in data and isinstance(data.get("seen"), list):
        state = ns.new_state(str(data.get("boot_id") or boot_id))
        seen = {"boot_id": data.get("boot_id"), "seen": data["seen"]}
        old = [x for x in data.get("outstanding") or [] if isinstance(x, dict) and isinstance(x.get("line"), str)]
        faults = [
            ns.fault(ns.xid_action(x.get("xid"), x["line"], v.FATAL_XIDS.get(x.get("xid"))) or "reset",
                     str(x.get("pci")), f"Xid {x.get('xid')}: {x['line'][:150]}")
            for x in old
        ]  # fmt: skip
        state = ns.advance(state, [], faults, boot_id=state["boot_id"], now=0, complete=False)
        return state, seen, None
    if not isinstance(data, dict) or not isinstance(data.get("node"), dict):
        return ns.new_state(boot_id), {}, "the state file was of another shape"
    state, note = ns.load(data["node"], boot_id)
    seen = data.get("xids") if isinstance(data.get("xids"), dict) else {}
    return state, seen, note


def dump_state(state, seen):
    return json.dumps({"node": state, "xids": seen}, sort_keys=True)


def node_checks(config, read, seen, boot_id):
    """``(records, faults, recovery, seen)``: the quick checks. ``read(check, argv)`` runs a command
    and returns ``(text, None)`` or ``(None, reason)``; ``seen`` is the last check's Xid lines
    (:func:`xid_seen`). ``faults`` are the recovery actions this check found owed
    (:func:`node_state.fault`), ``recovery`` each GPU's recovery action as the driver states it now."""
    records, faults = [], []
    text, reason = read("gpu_count", ["nvidia-smi", "-q", "-x"])
    gpus = []
    if text is None:
        records.append(v.record("gpu_count", "node", "nvidia-smi answers", None, "fail", reason))
    else:
        try:
            gpus = parse_query_xml(text)["gpus"]
        except ParseError as exc:
            records.append(v.record("gpu_count", "node", "nvidia-smi answers", None, "fail", str(exc)))
            text = None
    pci = max(config.get("pci_gpus") or 0, config.get("sysfs_gpus") or 0)
    if text is not None:
        records += v.check_gpu_count(pci, gpus, "the GPUs gpu_facts found on PCI, or sysfs now")
    recovery = {}
    if gpus:
        records += v.check_persistence(gpus)
        records += v.check_ecc(gpus)
        records += v.check_fabric(gpus, config.get("nvswitch_count") or 0)
        for found in v.check_recovery_action(gpus):
            records.append(found)
            recovery[found["subject"]] = found["measured"]
            action = ns.recovery_action(found["measured"])
            if action:
                faults.append(
                    ns.fault(action, found["subject"], f"the driver's recovery action is {found['measured']}", "driver")
                )

    log, reason = read("xid", ["dmesg"])
    if log is None:
        log, reason = read("xid", ["journalctl", "-k", "-b", "--no-pager", "-q"])
    if log is None:
        records.append(v.record("xid", "node", "no new fatal Xid", None, "skip", reason))
    else:
        seen, new = xid_seen(seen, boot_id, v.parse_xids(log))
        found = v.check_xids(new, gpus)
        for item in found:
            item["expected"] = "no fatal Xid since the last check (what it owes stays until observed)"
        records += found
        faults += faults_of_xids(new, found)

    if config.get("dcgm_watches"):
        found, owed = check_dcgm_health(read, config["dcgm_watches"])
        records += found
        faults += owed

    if config.get("imex"):
        records += imex_checks(config, read)

    if config.get("fabric", "auto") != "none":
        cas = None
        text, reason = read("ib_ports", ["ibstat"])
        if text is not None:
            try:
                cas = parse_ibstat(text)
            except ParseError as exc:
                reason = str(exc)
        known = {"hcas": [{"name": name} for name in config.get("hcas") or []]}
        records += v.check_hcas_listed(cas, reason, known, config.get("hca_pci"))
        infiniband = {"hcas": cas or [], "active_ports": active_ports(cas or [])}
        fabric, ports = v.compute_ports(infiniband, config.get("fabric", "auto"))
        overrides = {"ib_rate_gbps": config["ib_rate_gbps"]} if config.get("ib_rate_gbps") else {}
        if ports or config.get("hcas") or config.get("hca_pci"):
            records += v.check_ib_ports(fabric, ports, v.nic_expectation(ports, overrides))
    return records, with_serials(faults, gpus), recovery, seen


def imex_checks(config, read):
    """``imex`` on a tray the imex role set up (health.json's ``imex``): the daemons' own word on the
    domain against the tray's node list, as validation's node_health reads it. A list that is gone, or
    a daemon that does not answer, fails: a tray whose peers do not connect cannot run a job across
    the rack's NVLink."""
    path = config.get("imex_nodes_config") or imex.NODES_CONFIG
    nodes = read_file(path)
    if nodes is None:
        return [v.record("imex", "domain", imex.EXPECTED, None, "fail", f"{path} is missing: run the imex role again")]
    out, reason = read("imex", ["nvidia-imex-ctl", "-N", "-j"])
    return imex.check_records(nodes, out, reason)


def with_serials(faults, gpus):
    """Each fault on one GPU (``GPU3``, or the bus id an Xid names) with that GPU's board serial, as
    nvidia-smi reads it now: the fault's record follows the GPU to another slot or node."""
    serials = {}
    for gpu in gpus or []:
        serial = ns.known_serial(gpu.get("serial"))
        if serial:
            serials[f"GPU{gpu.get('index')}"] = serial
            serials[str(gpu.get("pci_bus_id") or "").lower()[-12:-2]] = serial
    out = []
    for item in faults:
        subject = item["subject"].lower() if ":" in item["subject"] else item["subject"]
        out.append(dict(item, serial=serials[subject]) if subject in serials else item)
    return out


def check_dcgm_health(read, watches):
    """``(records, faults)``: DCGM's health watches (``dcgmi health -c -j``, the default group of
    every GPU): a Failure incident fails its GPU and owes what its system calls for
    (:func:`node_state.dcgm_action`: kept across a restart of nv-hostengine, which forgets the
    incident), a Warning warns. DCGM keeps no watch across a restart of nv-hostengine:
    where none is on, the check sets ``watches`` (``dcgmi health -s``, the systems this node has) and
    is a skip until the next run reads them. DCGM not installed is a skip; a host engine that does
    not answer, or an answer that cannot be read, a warning (the node's GPUs are not judged by it)."""
    expected = "Healthy (dcgmi health -c)"
    text, reason = read("dcgm_health", ["dcgmi", "health", "-c", "-j"])
    if text is None:
        if reason.startswith("dcgmi is not installed"):
            return [v.record("dcgm_health", "node", expected, None, "skip", "DCGM is not installed on this node")], []
        return [v.record("dcgm_health", "node", expected, None, "warn", f"{reason} (is nv-hostengine running?)")], []
    try:
        health = parse_dcgmi_health(text)
    except ParseError as exc:
        return [v.record("dcgm_health", "node", expected, None, "warn", f"{exc} (is nv-hostengine running?)")], []
    if not health["watches"]:
        return [_dcgm_watches_set(read, watches, expected)], []
    if not health["incidents"]:
        verdict = "pass" if health["overall"] == "Healthy" else "warn"
        return [v.record("dcgm_health", "all GPUs", expected, health["overall"], verdict, "DCGM's health watches")], []
    records = [
        v.record(
            "dcgm_health",
            incident["entity"].replace("GPU ", "GPU", 1),
            expected,
            ": ".join(part for part in (incident["system"], incident["health"], incident["message"]) if part),
            "fail" if incident["health"] == "Failure" else "warn",
            "DCGM's health watches",
        )
        for incident in health["incidents"]
    ]
    faults = [
        ns.fault(ns.dcgm_action(incident["system"]), record["subject"], f"DCGM {record['measured']}"[:200])
        for incident, record in zip(health["incidents"], records)
        if incident["health"] == "Failure"
    ]
    return records, faults


def _dcgm_watches_set(read, watches, expected):
    done, reason = read("dcgm_health", ["dcgmi", "health", "-s", watches])
    if done is None:
        why = f"no health watch is on, and setting them (dcgmi health -s {watches}) failed: {reason}"
        return v.record("dcgm_health", "node", expected, None, "warn", why)
    why = (
        f"no health watch was on (nv-hostengine keeps none across a restart): set now (dcgmi health -s "
        f"{watches}); the next check reads them"
    )
    return v.record("dcgm_health", "node", expected, "watches off", "skip", why)


def reason_for(records, limit=200):
    """The failed checks of one run as a reason (``gpuops-health: gpu_count node, xid GPU2``):
    node-problem-detector's message; Slurm's drain reason is the node state's (:func:`node_state.reason`)."""
    return v.drain_reason(records, limit).replace("gpuops-validate: ", PREFIX, 1)


def parse_node_line(text, node):
    """``(state, drained, reason, rebooting)`` of ``node`` from ``sinfo -h -N -n NODE -o '%N|%t|%E'``:
    the compact state without its flags (``idle``; ``drain``: drained and idle; ``drng``: draining with
    jobs; ``down``; ``boot``: a reboot asked or under way; ``mix``...), whether it is out of service
    (the DRAIN flag, down, failing or rebooting), its reason ("" when in service), and whether a reboot
    is asked or under way (``boot``, or the ``@`` and ``^`` flags); ("", False, "", False) where sinfo
    does not list it."""
    row = ns.sinfo_rows(text).get(node)
    if row:
        state, flags = row["state"], row["flags"]
        rebooting = state.startswith("boot") or "@" in flags or "^" in flags
        out = state.startswith(("drain", "drng", "down", "fail", "boot"))
        return state, out, row["reason"] if out else "", rebooting
    return "", False, "", False


def read_file(path):
    """A file's text (undecodable bytes replaced), or None where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def sysfs_gpus(root="/sys/bus/pci/devices"):
    """NVIDIA display and 3D controllers (class 0300/0302) in sysfs now."""
    count = 0
    try:
        devices = os.listdir(root)
    except OSError:
        return 0
    for device in devices:
        vendor = read_file(f"{root}/{device}/vendor") or ""
        klass = read_file(f"{root}/{device}/class") or ""
        if vendor.strip().lower() == "0x10de" and klass.strip().lower()[:6] in ("0x0300", "0x0302"):
            count += 1
    return count


def _label(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def textfile(records, now, drained=None, refused=None, timing=None, owed=None):  # noqa: PLR0917 - the result's parts
    """The check's result in Prometheus' text format, for the node exporter's textfile collector:
    when it ran (``now``, seconds since the epoch), one series per failed check, and, in Slurm mode,
    whether the node stands drained by this check (``drained``: its reason, "" when not drained by
    it, None outside Slurm) and whether the fleet's blast-radius budget refused to drain it
    (``refused``: True or False; None outside Slurm); ``timing`` (:func:`node_state.timing`): since
    when the node has a fault outstanding and has been drained by this check, and how long its last
    repair took (fault to back in service), each where there is one; ``owed`` (Slurm mode: the node
    state's owed entries): one ``gpuops_health_owed`` series per action and subject, so that a power
    cycle owed reaches Alertmanager (GpuopsNodePowerCycleOwed) and the rulebook."""
    lines = [
        "# HELP gpuops_health_last_check_timestamp_seconds When gpuops-health last checked this node.",
        "# TYPE gpuops_health_last_check_timestamp_seconds gauge",
        f"gpuops_health_last_check_timestamp_seconds {now:.0f}",
        "# HELP gpuops_health_failed A check that failed at the last run (always 1), by check and subject.",
        "# TYPE gpuops_health_failed gauge",
    ]
    failed = sorted({(r["check"], r["subject"]) for r in records if r["verdict"] == "fail"})
    lines += [f'gpuops_health_failed{{check="{_label(c)}",subject="{_label(s)}"}} 1' for c, s in failed]
    if drained is not None:
        lines += [
            "# HELP gpuops_health_drained Whether gpuops-health has the node drained in Slurm, with its reason.",
            "# TYPE gpuops_health_drained gauge",
            f'gpuops_health_drained{{reason="{_label(drained)}"}} {1 if drained else 0}',
        ]
    series = (
        ("fault_since", "gpuops_health_fault_since_timestamp_seconds", "Since when the node has a fault outstanding."),
        ("drained_since", "gpuops_health_drained_since_timestamp_seconds", "Since when gpuops-health has it drained."),
        ("last_repair_s", "gpuops_health_last_repair_seconds", "Fault to back in service, the node's last repair."),
    )
    for key, name, text in series:
        value = (timing or {}).get(key)
        if value is not None:
            lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name} {value:.0f}"]
    if owed is not None:
        lines += [
            "# HELP gpuops_health_owed A recovery action the node owes (always 1): reset, reboot, power, inspect.",
            "# TYPE gpuops_health_owed gauge",
        ]
        lines += [
            f'gpuops_health_owed{{action="{_label(a)}",subject="{_label(s)}"}} 1'
            for a, s in sorted({(entry["action"], entry["subject"]) for entry in owed})
        ]
    if refused is not None:
        lines += [
            "# HELP gpuops_health_budget_refused Whether the blast-radius budget kept this failing node in service.",
            "# TYPE gpuops_health_budget_refused gauge",
            f"gpuops_health_budget_refused {1 if refused else 0}",
        ]
    return "\n".join(lines) + "\n"


def summary_lines(records):
    """One line per record, as the command prints them."""
    return [
        f"{r['verdict']:4}  {r['check']} {r['subject']}: {r['measured']} (expected {r['expected']})" for r in records
    ]
