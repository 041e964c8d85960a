# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node health check between runs (``gpuops-health``): validation's quick node checks, bounded.

Slurm runs it as slurmd's HealthCheckProgram (every HealthCheckInterval, and at slurmd's start),
a Kubernetes node as node-problem-detector's custom plugin, a person as a command. It reads the
node (``nvidia-smi -q -x``, sysfs, the kernel log, ``ibstat``), each command under a timeout, and
gives validation's records (:mod:`validation`): GPU count on PCI against nvidia-smi, persistence
mode, ECC, each GPU's NVLink fabric registration, fatal Xids new since the last check (kept until a
reboot or ``--clear-xids``), DCGM's health watches (``dcgmi health -c``) where DCGM runs, the compute
HCAs present with their ports Active at rate.

What it does with them (:func:`decide`): on a Slurm node it drains the node with the failed checks
as the reason (prefix :data:`PREFIX`), and resumes a node once its checks pass again only when that
prefix is still the node's reason: a node a person, validation or a rollout drained is left as it
is. Deep checks (DCGM's diagnostic, NCCL) stay in validation (node_health).

This file holds the checks and the decisions; the command that runs them on the node (its commands
under timeouts, the state file, the calls to Slurm) is ``roles/validate/files/gpuops_health.py``.
No Ansible runs on the node: the validate role's ``health_check`` entry point copies both there
with the module_utils this one imports.
"""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.module_utils.dcgm import parse_dcgmi_health
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.ibstat import active_ports, parse_ibstat
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import parse_query_xml

PREFIX = "gpuops-health: "
CONFIG = "/etc/gpuops/health.json"
# The node exporter's textfile (Debian's folder), where the node exporter runs: the dcgm role's alert
# rules read when the check last ran, what failed, and whether it drained the node.
TEXTFILE = "gpuops-health.prom"
STATE = "/var/lib/gpuops/health-state.json"
# slurmd kills a HealthCheckProgram after 60 s (slurm.conf(5)); the whole check stops well before.
DEADLINE_S = 45
COMMAND_TIMEOUT_S = 10
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
    for key, kind in (("pci_gpus", int), ("nvswitch_count", int), ("hcas", list), ("hca_pci", list)):
        if not isinstance(config.get(key, kind()), kind) or isinstance(config.get(key), bool):
            raise ConfigError(f"{path}: {key} must be {kind.__name__}; run the health_check entry point again")
    if config.get("fabric", "auto") not in ("auto", "InfiniBand", "Ethernet", "none"):
        raise ConfigError(
            f"{path}: fabric must be auto, InfiniBand, Ethernet or none, not {config['fabric']!r}; "
            "set validate_fabric and run the health_check entry point again"
        )
    return config


def xid_state(state, boot_id, xids, clear=False):
    """``(state, outstanding, new)``: the fatal Xids outstanding on this boot and the Xid lines new since
    the last check. A fatal Xid stays outstanding until the node reboots (a new boot id) or a person
    clears it (``clear``, after repairing the GPU); the lines already read are not counted again."""
    if not isinstance(state, dict) or state.get("boot_id") != boot_id:
        state = {"boot_id": boot_id, "seen": [], "outstanding": []}
    seen = [s for s in state.get("seen") or [] if isinstance(s, str)]
    outstanding = [x for x in state.get("outstanding") or [] if isinstance(x, dict) and "xid" in x and "line" in x]
    if clear:
        outstanding = []
    known = set(seen)
    new = []
    for xid in xids:
        key = hashlib.sha256(xid["line"].encode("utf-8", "replace")).hexdigest()[:16]
        if key in known:
            continue
        known.add(key)
        seen.append(key)
        new.append(xid)
        if xid["xid"] in v.FATAL_XIDS and xid not in outstanding:
            outstanding.append(xid)
    state = {"boot_id": boot_id, "seen": seen[-_SEEN_LIMIT:], "outstanding": outstanding[-64:]}
    return state, outstanding, new


def node_checks(config, read, state, boot_id, clear_xids=False):
    """``(records, state)``: the quick checks. ``read(check, argv)`` runs a command and returns
    ``(text, None)`` or ``(None, reason)``; ``state`` is the last check's (:func:`xid_state`)."""
    records = []
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
    if gpus:
        records += v.check_persistence(gpus)
        records += v.check_ecc(gpus)
        records += v.check_fabric(gpus, config.get("nvswitch_count") or 0)

    log, reason = read("xid", ["dmesg"])
    if log is None:
        log, reason = read("xid", ["journalctl", "-k", "-b", "--no-pager", "-q"])
    if log is None:
        records.append(v.record("xid", "node", "no new fatal Xid", None, "skip", reason))
    else:
        state, outstanding, new = xid_state(state, boot_id, v.parse_xids(log), clear_xids)
        found = v.check_xids(outstanding + [x for x in new if x["xid"] not in v.FATAL_XIDS], gpus)
        for item in found:
            item["expected"] = "no fatal Xid since the last check (one stays until a reboot or --clear-xids)"
        records += found

    if config.get("dcgm_watches"):
        records += check_dcgm_health(read, config["dcgm_watches"])

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
    return records, state


def check_dcgm_health(read, watches):
    """DCGM's health watches (``dcgmi health -c -j``, the default group of every GPU): a Failure
    incident fails its GPU, a Warning warns. DCGM keeps no watch across a restart of nv-hostengine:
    where none is on, the check sets ``watches`` (``dcgmi health -s``, the systems this node has) and
    is a skip until the next run reads them. DCGM not installed is a skip; a host engine that does
    not answer, or an answer that cannot be read, a warning (the node's GPUs are not judged by it)."""
    expected = "Healthy (dcgmi health -c)"
    text, reason = read("dcgm_health", ["dcgmi", "health", "-c", "-j"])
    if text is None:
        if reason.startswith("dcgmi is not installed"):
            return [v.record("dcgm_health", "node", expected, None, "skip", "DCGM is not installed on this node")]
        return [v.record("dcgm_health", "node", expected, None, "warn", f"{reason} (is nv-hostengine running?)")]
    try:
        health = parse_dcgmi_health(text)
    except ParseError as exc:
        return [v.record("dcgm_health", "node", expected, None, "warn", f"{exc} (is nv-hostengine running?)")]
    if not health["watches"]:
        return [_dcgm_watches_set(read, watches, expected)]
    if not health["incidents"]:
        verdict = "pass" if health["overall"] == "Healthy" else "warn"
        return [v.record("dcgm_health", "all GPUs", expected, health["overall"], verdict, "DCGM's health watches")]
    return [
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
    """The drain reason: :data:`PREFIX` and the failed checks (``gpuops-health: gpu_count node, xid GPU2``)."""
    return v.drain_reason(records, limit).replace("gpuops-validate: ", PREFIX, 1)


def decide(records, drained, reason):
    """``(action, why)``: what to do on Slurm, given the checks and the node's state now (``drained``:
    it has the DRAIN flag; ``reason``: its reason). Actions: ``drain`` (``why`` is the new reason),
    ``resume``, ``keep`` (drained by someone else, or by this check for the same findings) or ``none``."""
    failed = v.worst(records) == "fail"
    ours = (reason or "").startswith(PREFIX)
    if failed:
        wanted = reason_for(records)
        if drained and not ours:
            return "keep", f"drained already for another reason ({reason}); not changed. Found: {wanted}"
        if drained and reason == wanted:
            return "keep", wanted
        return "drain", wanted
    if drained and ours:
        return "resume", f"every check passes again (drained for: {reason.removeprefix(PREFIX)})"
    return "none", "healthy" if not drained else f"healthy; drained by someone else ({reason}), left drained"


def parse_node_state(text, node):
    """``(drained, reason)`` of ``node`` from ``sinfo -h -N -n NODE -o '%N|%t|%E'``; (False, "") when not drained."""
    reasons = v.parse_sinfo_reasons(text)
    if node in reasons:
        return True, reasons[node]
    return False, ""


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


def textfile(records, now, drained=None):
    """The check's result in Prometheus' text format, for the node exporter's textfile collector:
    when it ran (``now``, seconds since the epoch), one series per failed check, and, in Slurm mode,
    whether the node stands drained by this check (``drained``: its reason, "" when not drained by
    it, None outside Slurm)."""
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
    return "\n".join(lines) + "\n"


def summary_lines(records):
    """One line per record, as the command prints them."""
    return [
        f"{r['verdict']:4}  {r['check']} {r['subject']}: {r['measured']} (expected {r['expected']})" for r in records
    ]
