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
import contextlib
import fcntl
import io
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time

from ansible_collections.gpuops.cluster.plugins.module_utils import health as h
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns
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

    def run(self, argv, timeout=None):
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout or self.timeout,
                env={**os.environ, "LC_ALL": "C", "PATH": search_path(os.environ.get("PATH", ""))},
                check=False,
            )
        except FileNotFoundError:
            return None, f"{argv[0]} is not installed"
        except subprocess.TimeoutExpired:
            return None, "`{}` did not answer within {} s".format(" ".join(argv), timeout or self.timeout)
        if done.returncode != 0 and not done.stdout.strip():
            first = (done.stderr or "").strip().splitlines()[:1]
            return None, "`{}` exited {}: {}".format(
                " ".join(argv), done.returncode, first[0] if first else "no output"
            )
        return done.stdout, None

    def read(self, _check, argv):
        return self.run(argv)

    def spawn(self, argv, unit):
        """Start ``argv`` apart from this check (which slurmd bounds at 60 s): a transient systemd unit
        ``unit`` where systemd-run is there, else a process in a session of its own. ``(True, how)`` or
        ``(None, why)``."""
        env = {**os.environ, "LC_ALL": "C", "PATH": search_path(os.environ.get("PATH", ""))}
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        try:
            done = subprocess.run(
                ["systemd-run", "--no-block", "--collect", "--quiet", f"--unit={unit}",
                 f"--property=RuntimeMaxSec={h.EVIDENCE_BUG_REPORT_S + h.EVIDENCE_DIAG_S + 60}", *argv],
                env=env, timeout=10, check=False, **quiet,
            )  # fmt: skip
            if done.returncode == 0:
                return True, f"unit {unit}"
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            subprocess.Popen(argv, env=env, start_new_session=True, **quiet)  # pylint: disable=consider-using-with
        except OSError as exc:
            return None, str(exc)
        return True, "a process of its own"

    def slurm(self, argv):
        """A Slurm command, under the short timeout that keeps the whole check inside slurmd's 60 s."""
        return self.run(argv, timeout=h.SLURM_TIMEOUT_S)

    @staticmethod
    def file(path):
        return h.read_file(path)

    @staticmethod
    def now():
        return time.time()

    def booted_at(self, config):
        """When this boot began, in seconds since the epoch, or None: the kernel's (``btime`` in
        /proc/stat), or the time a stand-in's boot id file (``boot_id_file`` outside /proc) was written."""
        path = (config or {}).get("boot_id_file") or ""
        if path and not path.startswith("/proc/"):
            try:
                return os.stat(path).st_mtime
            except OSError:
                return None
        found = re.search(r"^btime (\d+)$", self.file("/proc/stat") or "", re.M)
        return int(found.group(1)) if found else None

    def follow(self):
        """The kernel log as it grows (``dmesg -w``, else ``journalctl -k -f``): a process whose stdout
        (bytes, unbuffered) carries it, or None where neither can follow it."""
        env = {**os.environ, "LC_ALL": "C", "PATH": search_path(os.environ.get("PATH", ""))}
        for argv in (["dmesg", "-w"], ["journalctl", "-k", "-f", "-n", "all", "-o", "cat", "--no-pager"]):
            try:
                return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0, env=env)
            except OSError:
                continue
        return None


def _write_state(path, text):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)


def _write_textfile(config, records, drained=None, refused=None, timing=None, owed=None):  # noqa: PLR0917
    """The result for the node exporter (health.textfile), where its textfile folder exists: written
    whole and renamed into place, as the textfile collector asks, so that a scrape never reads half."""
    folder = (config or {}).get("textfile_dir")
    if not folder or not os.path.isdir(folder):
        return
    path = os.path.join(folder, h.TEXTFILE)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(h.textfile(records, time.time(), drained, refused, timing, owed))
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as exc:
        _say(f"gpuops-health: cannot write {path}: {exc}", sys.stderr)


def _say(text, stream=None):
    """One line to stdout (or ``stream``): the command's output, at once (the watcher's stdout is
    journald's pipe, which Python would otherwise fill in blocks, its lines appearing only at exit)."""
    stream = stream or sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog="gpuops-health",
        description="Quick health check of a GPU node (gpuops.cluster). Slurm: drains the node with what it "
        "failed and what it owes (a GPU reset, a reboot) as the reason, within the fleet's blast-radius budget, "
        "and resumes it, if this check drained it, once each failed check passed again and each owed action "
        "was observed.",
    )
    parser.add_argument(
        "--mode",
        choices=["report", "slurm", "npd", "watch", "evidence"],
        default="report",
        help="report: print only (changes nothing, not even the state file); slurm: drain and resume "
        "(slurmd's HealthCheckProgram); npd: node-problem-detector's custom plugin (exit 0 OK, 1 problem, "
        "2 unknown); watch: follow the kernel log and run the Slurm mode's check at each new Xid (a service); "
        "evidence: add to a drain's evidence bundle (--bundle) what takes longer than a check (started by the drain)",
    )
    parser.add_argument("--config", default=h.CONFIG)
    parser.add_argument("--state", default=h.STATE)
    parser.add_argument("--bundle", help="evidence mode: the drain's evidence bundle to add to")
    parser.add_argument("--json", action="store_true", help="print the records as JSON")
    parser.add_argument(
        "--clear-xids",
        action="store_true",
        help="a person's word that the GPUs were reset or repaired: clears every reset, reboot or inspection "
        "the node owes (recorded in the state's history); its failed checks must still pass again",
    )
    args = parser.parse_args(argv)
    args.evidence = []  # what the checks read, for the evidence of a drain
    return args


def _lock(path, wait):
    """An exclusive lock on ``path`` (the state file's ``.lock``), waited for up to ``wait`` seconds:
    ``(handle, None)``, or ``(None, holder)`` with the pid the holder wrote. slurmd's check, node-problem-
    detector's and a person's --clear-xids read and write one state file: one at a time."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")
    end = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() >= end:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                handle.close()
                return None, holder
            time.sleep(0.2)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle, None


class _Deadline(Exception):
    """The checks ran past their deadline."""


def _check(args, node):
    """``(config, state, seen, records, complete, lost, why)``: the checks, under their deadline. Any
    failure to check (the deadline, a configuration, an unexpected error) is ``why``, never a traceback."""
    config, state, seen, records, lost = None, None, {}, [], None

    def read(check, argv):
        text, why = node.read(check, argv)
        output = (text or "")[-h.EVIDENCE_OUTPUT_CHARS :]
        args.evidence.append({"check": check, "command": " ".join(argv), "output": output, "error": why})
        return text, why

    def deadline(_signum, _frame):
        raise _Deadline(f"the checks took more than {h.DEADLINE_S} s")

    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, deadline)
        signal.alarm(h.DEADLINE_S)
    try:
        # The configuration first (it names the boot id's file), the state before any error of it:
        # a node that cannot be checked keeps what it owes.
        text, problem = node.file(args.config), None
        try:
            if text is None:
                raise h.ConfigError(
                    f"{args.config} is missing: run the validate role's health_check entry point on this node"
                )
            config = h.load_config(text, args.config)
        except h.ConfigError as exc:
            problem = exc
        boot_id = _boot_id(node, config)
        state, seen, lost = h.load_state(node.file(args.state), boot_id)
        if problem is not None:
            config = None
            raise problem
        config["sysfs_gpus"] = h.sysfs_gpus()
        records, faults, recovery, seen = h.node_checks(config, read, seen, boot_id)
        quarantine = (
            (config["quarantine_faults"], config["quarantine_days"] * 86400) if config["quarantine_faults"] else None
        )
        state = ns.advance(
            state,
            records,
            faults,
            boot_id=boot_id,
            now=node.now(),
            recovery=recovery,
            clear=args.clear_xids,
            quarantine=quarantine,
        )
        return config, state, seen, records, lost, None
    except h.ConfigError as exc:
        return config, state, seen, records, lost, str(exc)
    except _Deadline as exc:
        return config, state, seen, records, lost, str(exc)
    except Exception as exc:  # any failure to check is a reason to drain, not a traceback
        frame = exc.__traceback__
        while frame and frame.tb_next:
            frame = frame.tb_next
        where = f" at {os.path.basename(frame.tb_frame.f_code.co_filename)}:{frame.tb_lineno}" if frame else ""
        return config, state, seen, records, lost, f"unexpected {type(exc).__name__}{where}: {exc}"[:300]
    finally:
        if hasattr(signal, "SIGALRM"):
            signal.alarm(0)


def watch(args, node):
    """Watch mode: follow the kernel log and run the Slurm mode's check at once when an Xid line comes,
    so that a fatal fault drains the node within seconds whatever slurmd's HealthCheckInterval. A burst
    of lines (Xid 94, then 154) gives one check, WATCH_SETTLE_S after its first line, and checks come
    at most every WATCH_GAP_S; a line meanwhile gives one more check after the gap; and one check
    WATCH_START_S after it starts on the boot after the ladder's reboot (the check that resumes the
    node). Returns when the follower ends (systemd starts the service again)."""
    follower = node.follow()
    if follower is None:
        _say("gpuops-health: cannot follow the kernel log (neither dmesg -w nor journalctl -k -f)", sys.stderr)
        return 2
    check = ["--mode", "slurm", "--config", args.config, "--state", args.state]
    selector = selectors.DefaultSelector()
    selector.register(follower.stdout, selectors.EVENT_READ)
    due, last, partial, why = None, -h.WATCH_GAP_S, b"", None
    config, boot = _watch_config(args, node)
    if boot:
        due, why = time.monotonic() + h.WATCH_START_S, "boot"
    # Faults with no kernel-log line (a DCGM incident, a port down) between slurmd's checks: a quiet
    # check every watch_interval seconds (validate_health_watch_interval; 0, none).
    tick = config.get("watch_interval", 0) if config else 0
    ticked = time.monotonic()
    try:
        while True:
            if tick and due is None:
                due, why = ticked + tick, "tick"
            timeout = None if due is None else max(due - time.monotonic(), 0)
            if selector.select(timeout):
                # Whatever the pipe holds (os.read, not a buffered readline: select would not see
                # lines a buffer already took); a line cut between two reads is joined.
                chunk = os.read(follower.stdout.fileno(), 65536)
                if not chunk:
                    break
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()[-4096:]
                if any(b"NVRM: Xid" in line for line in lines) and why != "xid":
                    due = max(time.monotonic() + h.WATCH_SETTLE_S, last + h.WATCH_GAP_S)
                    why = "xid"
                continue
            if why == "tick":
                _quiet_check(check, node)
                ticked = time.monotonic()
                due, why = None, None
                continue
            _say(
                "gpuops-health: an Xid in the kernel log: checking now"
                if why == "xid"
                else "gpuops-health: the check after the repair ladder's reboot (the node registered on its new boot)"
            )
            main(check, node)
            due, last, why = None, time.monotonic(), None
            ticked = last
    finally:
        selector.close()
        follower.kill()
        follower.wait()
    return 1


def _watch_config(args, node):
    """``(config, boot)``: the node's expectations (None where they cannot be read: the checks say why)
    and whether this boot follows a reboot the ladder asked of Slurm, the node not resumed since."""
    try:
        config = h.load_config(node.file(args.config) or "", args.config)
    except h.ConfigError:
        return None, False
    boot_id = _boot_id(node, config)
    state, _seen, _lost = h.load_state(node.file(args.state), boot_id)
    return config, ns.awaits_boot_check(state, boot_id)


def _boot_id(node, config):
    """The node's boot id, from the file its expectations name (the kernel's by default)."""
    return (node.file((config or {}).get("boot_id_file") or h.BOOT_ID_FILE) or "").strip()


def _quiet_check(check, node):
    """The watcher's periodic check: its output only where it acted (a drain, a resume, a repair step)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(check, node)
    if _ACTED.search(out.getvalue()):
        _say("gpuops-health: the watcher's periodic check")
        _say(out.getvalue().rstrip("\n"))


_ACTED = re.compile(r": (drain|resume|refused): |: reset: GPU|: reboot: (asked|Slurm refused|escalated)")


def main(argv=None, node=None):  # noqa: PLR0911 - one exit status per mode
    args = _arguments(argv)
    node = node or Node()
    if args.mode == "watch":
        return watch(args, node)
    if args.mode == "evidence":
        return collect(args, node)
    started = time.monotonic()
    if args.mode != "report":
        try:
            lock, holder = _lock(f"{args.state}.lock", h.LOCK_WAIT_S)
        except OSError as exc:
            lock, holder = None, f"none: {exc}"
        if lock is None:
            # Another check of this node runs now (slurmd's, or a person's --clear-xids): it decides.
            _say(f"gpuops-health: another check of this node holds {args.state}.lock (pid {holder}); this one stops")
            return h.NPD_UNKNOWN if args.mode == "npd" else 0
    config, state, seen, records, lost, why = _check(args, node)
    if state is None:
        state = ns.new_state()
    if why is not None:
        # Fail closed: a node that cannot be checked is drained with the reason (Slurm), a problem
        # (node-problem-detector); a person's report says so and exits 2.
        _say(f"gpuops-health: cannot check this node: {why}", sys.stderr)
        state = ns.cannot_check(state, why, now=node.now())
        records = [v.record("cannot_check", "node", "the checks run to the end", why, "fail", why)]
    records = records + ns.owed_records(state, v.record)
    took = time.monotonic() - started
    verdict = v.worst(records)
    if args.json:
        _say(json.dumps({"verdict": verdict, "seconds": round(took, 2), "checks": records,
                         "outstanding": ns.outstanding(state)}, indent=1))  # fmt: skip
    elif args.mode != "npd":
        _say("\n".join(h.summary_lines(records)))
        _say(f"gpuops-health: {verdict} in {took:.1f} s")
    if args.mode == "report":
        # Report mode prints only: neither the state file (the Xid lines it read would not be new to the
        # node's own check) nor the textfile (a person's look must not take a drain away from Prometheus).
        return 2 if why is not None and config is None else (1 if verdict == "fail" else 0)
    try:
        _write_state(args.state, h.dump_state(state, seen))
    except OSError as exc:
        _say(f"gpuops-health: cannot write {args.state}: {exc}", sys.stderr)
    if args.mode == "npd":
        _write_textfile(config, records)
        if why is not None and config is None:
            return h.NPD_UNKNOWN
        if verdict == "fail":
            _say(h.reason_for(records, limit=80))
            return h.NPD_NONOK
        _say("gpuops-health: ok")
        return h.NPD_OK
    _slurm(args, node, config, state, seen, records, lost, started)
    return 0


# The slurm role's per-job GPU series (its Prolog writes gpuops-slurm-job-<id>.prom into the node
# exporter's textfile folder, its Epilog removes it).
JOB_SERIES = re.compile(r"gpuops-slurm-job-\d+\.prom\Z")


def _tidy_job_series(node, config):
    """Remove the per-job GPU series written before this boot: no job survives a reboot, and a node
    that crashed never ran those jobs' Epilog, so their series would keep the dead jobs on the node's
    GPUs on every dashboard. Local only (no call to slurmctld); a series of this boot is the Epilog's."""
    folder = config.get("textfile_dir")
    booted = node.booted_at(config) if folder else None
    if booted is None:
        return
    try:
        entries = [entry for entry in os.scandir(folder) if JOB_SERIES.match(entry.name)]
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat().st_mtime < booted:
                os.unlink(entry.path)
                _say(f"gpuops-health: removed {entry.name}: its job ran before this boot (its Epilog never ran)")
        except OSError:
            continue


def _slurm(args, node, config, state, seen, records, lost, started):  # noqa: PLR0917 - the run's parts, named
    """Slurm mode: drain, keep or resume the node, as the node state decides, within the budget; then
    the repair ladder's first rung: the GPU resets it owes, once the node is drained and idle."""
    config = config or {}
    _tidy_job_series(node, config)
    name = config.get("node") or socket.gethostname().split(".")[0]
    text, reason = node.slurm(["sinfo", "-h", "-N", "-n", name, "-o", "%N|%t|%E"])
    if text is None:
        _say(f"gpuops-health: cannot read {name}'s state from Slurm: {reason}", sys.stderr)
        _write_textfile(config, records)
        return
    before, drained, reason_now, rebooting = h.parse_node_line(text, name)
    if lost and drained and reason_now.startswith(h.PREFIX) and not ns.outstanding(state):
        # Drained by this check, and what for is lost: the node owes a reboot (or a person's word).
        state = ns.advance(
            state, [], [ns.fault("reboot", "node", f"the health state was lost ({lost}); drained for: {reason_now}")],
            boot_id=state["boot_id"], now=node.now(), complete=False,
        )  # fmt: skip
    action, why = ns.decide(state, drained, reason_now, h.PREFIX, rebooting)
    refused, stamp = False, None
    if action == "drain" and not drained:
        allowed, budget, stamp = _budget(node, name, config)
        if not allowed:
            action, refused = "refused", True
            why = f"not drained: {budget}. Outstanding: {why}"
        else:  # the evidence first, so that the drain's reason names its bundle
            state = _evidence(args, node, name, state, why, records)
            why = ns.reason(state, h.PREFIX)
    done, problem = _act(node, name, action, why, stamp)
    state = _record(state, node, action, why, done)
    ours = (
        why
        if action == "drain" and done is not None
        else (reason_now if action == "keep" and reason_now.startswith(h.PREFIX) else "")
    )
    if ours and config.get("repair_reset", True):
        state, ours = _reset_rung(node, name, config, state, before in ("idle", "drain", "down"), started, ours)
    if ours and config.get("repair_reboot", True):
        state, ours = _reboot_rung(node, name, state, rebooting, ours)
    timing = ns.timing(state)
    if not ours:
        timing["drained_since"] = None
    _write_textfile(
        config, records + ns.owed_records(state, v.record), ours, refused, timing, list(state["owed"].values())
    )
    try:
        _write_state(args.state, h.dump_state(state, seen))
    except OSError as exc:
        _say(f"gpuops-health: cannot write {args.state}: {exc}", sys.stderr)
    _say(f"gpuops-health: {name}: {action}: {why}")
    if done is None:
        _say(f"gpuops-health: {action} {name} failed: {problem}", sys.stderr)


def _evidence(args, node, name, state, why, records):  # noqa: PLR0917 - the run's parts, named
    """What the check saw when it takes the node out, kept beside the state file (``evidence/``, 0600,
    the newest EVIDENCE_KEEP): the outputs it read (each cut to EVIDENCE_OUTPUT_CHARS), its records, and
    what the node owes. Nothing more is run: a drain stays within slurmd's 60 s. Named in the history,
    and so in the drain's reason (node_state.reason: ``(evidence <stamp>)``)."""
    folder = os.path.join(os.path.dirname(args.state) or ".", "evidence")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(node.now()))
    path = os.path.join(folder, f"{stamp}-{name}.json")
    bundle = {
        "node": name,
        "time": stamp,
        "reason": why,
        "failed": state["failed"],
        "owed": state["owed"],
        "records": records,
        "outputs": args.evidence,
    }
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        _write_state(path, json.dumps(bundle, indent=1, sort_keys=True))
        _prune(folder)
    except OSError as exc:
        _say(f"gpuops-health: cannot keep the evidence in {folder}: {exc}", sys.stderr)
        return state
    _say(f"gpuops-health: {name}: evidence: {path}")
    argv = [sys.executable, os.path.abspath(sys.argv[0]), "--mode", "evidence", "--state", args.state, "--bundle", path]
    started, how = node.spawn(argv, f"gpuops-evidence-{stamp}")
    if started is None:
        _say(
            f"gpuops-health: cannot start the rest of the evidence (nvidia-bug-report.sh, dcgmi diag): {how}",
            sys.stderr,
        )
    return ns.with_event(state, node.now(), "evidence", path)


def _prune(folder):
    """The newest EVIDENCE_KEEP bundles stay, each with what the evidence mode added beside it."""
    names = os.listdir(folder)
    bundles = sorted(n for n in names if n.endswith(".json") and not n.endswith(".extra.json"))
    for old in bundles[: -h.EVIDENCE_KEEP]:
        stem = old[: -len(".json")]
        for name in names:
            if name == old or name.startswith(stem + "."):
                os.unlink(os.path.join(folder, name))


def collect(args, node, sysfs="/sys/class/infiniband"):
    """Evidence mode: beside the drain's bundle (in the evidence folder only), what takes longer than a
    check: nvidia-bug-report.sh --safe-mode (its .log.gz, dropped past EVIDENCE_BUG_REPORT_BYTES), dcgmi
    diag -r 1 -j, the port counters and the kernel log's lines around each Xid, in ``<bundle>.extra.json``
    (0600). Each step bounded in time; a step that fails says why there. Exits 0, or 2 on a bad bundle."""
    folder = os.path.realpath(os.path.join(os.path.dirname(args.state) or ".", "evidence"))
    bundle = os.path.realpath(args.bundle or "")
    if os.path.dirname(bundle) != folder or not bundle.endswith(".json") or bundle.endswith(".extra.json"):
        _say(
            f"gpuops-health: --bundle must name a drain's evidence bundle in {folder}, not {args.bundle!r}", sys.stderr
        )
        return 2
    try:
        with open(bundle, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        _say(f"gpuops-health: cannot read the evidence bundle {bundle}: {exc}", sys.stderr)
        return 2
    stem = bundle[: -len(".json")]
    extra = {"bundle": os.path.basename(bundle), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    report = stem + ".nvidia-bug-report.log"
    said, why = node.run(["nvidia-bug-report.sh", "--safe-mode", "--output-file", report], h.EVIDENCE_BUG_REPORT_S)
    written = next((p for p in (report + ".gz", report) if os.path.exists(p)), None)
    if written and os.path.getsize(written) > h.EVIDENCE_BUG_REPORT_BYTES:
        extra["nvidia_bug_report"] = {
            "dropped": f"{os.path.getsize(written)} bytes, over {h.EVIDENCE_BUG_REPORT_BYTES}"
        }
        os.unlink(written)
    elif written:
        os.chmod(written, 0o600)
        extra["nvidia_bug_report"] = {"file": os.path.basename(written), "bytes": os.path.getsize(written)}
    else:
        extra["nvidia_bug_report"] = {"missing": why or f"it wrote no {report}(.gz): {(said or '')[-200:]}"}
    diag, why = node.run(["dcgmi", "diag", "-r", "1", "-j"], h.EVIDENCE_DIAG_S)
    extra["dcgm_diag"] = diag[-h.EVIDENCE_OUTPUT_CHARS :] if diag is not None else {"missing": why}
    extra["port_counters"] = h.port_counters(sysfs)
    logs = [o.get("output") or "" for o in data.get("outputs") or [] if isinstance(o, dict) and o.get("check") == "xid"]
    extra["xid_window"] = h.xid_window("\n".join(logs))
    try:
        _write_state(stem + ".extra.json", json.dumps(extra, indent=1, sort_keys=True))
        os.chmod(stem + ".extra.json", 0o600)
    except OSError as exc:
        _say(f"gpuops-health: cannot write {stem}.extra.json: {exc}", sys.stderr)
        return 1
    _say(f"gpuops-health: evidence added: {stem}.extra.json")
    return 0


def _budget(node, name, config):
    """``(allowed, why, comment)``: the blast-radius budget's word on taking ``name`` out (node_state.budget),
    from the fleet's states and its nodes' Comments (the budget's memory and latch); ``comment`` the
    Comment to set on the node with the drain or the refusal (None: leave it)."""
    fleet, problem = node.slurm(["sinfo", "-h", "-N", "-o", "%N|%t|%E"])
    if fleet is None:
        return False, f"cannot read the fleet from Slurm: {problem}", None
    text, problem = node.slurm(list(ns.COMMENTS_ARGV))
    if text is None:
        return False, f"cannot read the nodes' comments (the budget's memory) from Slurm: {problem}", None
    comments = ns.comment_rows(text)
    now = node.now()
    allowed, why, spent = ns.budget(
        fleet,
        name,
        config.get("budget_nodes", ns.BUDGET_NODES),
        config.get("budget_percent", ns.BUDGET_PERCENT),
        comments=comments,
        window=config.get("budget_window", ns.BUDGET_WINDOW_S),
        now=now,
    )
    stamp = spent if not allowed else ns.budget_comment("taken", now)
    return allowed, why, ns.comment_update(comments.get(name, ""), stamp) if (allowed or spent) else None


def _act(node, name, action, why, comment=None):
    """The Slurm update the decision asks for; ``comment`` goes with a drain, or alone with a refusal."""
    extra = [f"Comment={comment}"] if comment else []
    if action == "drain":
        return node.slurm(["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={why}", *extra])
    if action == "resume":
        return node.slurm(["scontrol", "update", f"NodeName={name}", "State=RESUME"])
    if action == "refused" and extra:
        said, problem = node.slurm(["scontrol", "update", f"NodeName={name}", *extra])
        if said is None:
            _say(f"gpuops-health: cannot set the budget's latch on {name}: {problem}", sys.stderr)
    return "", None


def _record(state, node, action, why, done):
    if action in ("drain", "resume", "refused") and done is not None:
        state = ns.with_event(state, node.now(), action, why)
    return state


def _reboot_rung(node, name, state, rebooting, reason):
    """The reboot the node owes (node_state.reboot_plan), through Slurm: ``scontrol reboot ASAP
    nextstate=DOWN``, asked once per boot. Slurm waits for the node's jobs (it is drained: no new
    one), has slurmd run its RebootProgram, and keeps it down with the reason (": reboot complete"
    added) when it registers on its new boot; the check after that observes the new boot id and
    resumes it on proof. A reboot this ladder already did owes a power cycle instead, and a power
    cycle a person: the reason says so. ``(state, reason)``."""
    step, detail = ns.reboot_plan(state, rebooting)
    if step is None:
        return state, reason
    if step in ("wait", "failed"):
        _say(f"gpuops-health: {name}: reboot: {'waiting: ' if step == 'wait' else 'refused on this boot: '}{detail}")
        return state, reason
    if step == "reboot":
        argv = ["scontrol", "reboot", "ASAP", "nextstate=DOWN", f"reason={reason}", name]
        done, problem = node.slurm(argv)
        said = "asked of Slurm" if done is not None else f"Slurm refused it: {problem}"
        state = ns.after_reboot_request(
            state, done is not None, f"`scontrol reboot ASAP nextstate=DOWN {name}`: {said}", now=node.now()
        )
        _say(f"gpuops-health: {name}: reboot: {said}")
        return state, reason
    state = ns.escalate(state, detail, now=node.now())
    _say(f"gpuops-health: {name}: reboot: escalated to {ns.ACTIONS[detail]}")
    return _redrain(node, name, state, reason)


def _reset_rung(node, name, config, state, idle, started, reason):  # noqa: PLR0917 - the run's parts, named
    """The GPU resets the node owes (node_state.reset_plan), once it is drained and idle: ``nvidia-smi -r``
    on those GPUs; one that fails escalates to a reboot, and the reason says so. ``(state, reason)``."""
    step, detail = ns.reset_plan(state, idle, config.get("nvswitch_count") or 0)
    if step is None:
        return state, reason
    if step == "wait":
        _say(f"gpuops-health: {name}: reset: {detail}")
        return state, reason
    if step == "reset" and time.monotonic() - started > h.RESET_AFTER_S:
        _say(f"gpuops-health: {name}: reset: no time left in this check; the next one resets GPU {detail}")
        return state, reason
    if step == "reset":
        argv = ["nvidia-smi", "-r", "-i", ",".join(str(index) for index in detail)]
        out, problem = node.run(argv, timeout=h.RESET_TIMEOUT_S)
        done = out is not None and out.count("successfully reset") == len(detail) and "in use" not in out
        lines = [line.strip() for line in (out or problem or "").splitlines() if line.strip()]
        said = "; ".join(lines[:3])[:200] or "no output"
        state = ns.after_reset(state, done, f"`{' '.join(argv)}`: {said}", now=node.now())
        _say(f"gpuops-health: {name}: reset: GPU {detail}: {'done' if done else 'failed'}: {said}")
    else:
        state = ns.after_reset(state, False, detail, now=node.now())
        _say(f"gpuops-health: {name}: reset: escalated to a reboot: {detail}")
    return _redrain(node, name, state, reason)


def _redrain(node, name, state, reason):
    """After a repair step: the reason changed to what the node owes now (a reset done narrows it, an
    escalation names the next step). ``(state, reason)``, the reason as Slurm has it."""
    wanted = ns.reason(state, h.PREFIX)
    if not ns.outstanding(state) or wanted == reason:
        return state, reason
    done, problem = _act(node, name, "drain", wanted)
    if done is None:
        _say(f"gpuops-health: drain {name} failed: {problem}", sys.stderr)
        return state, reason
    return _record(state, node, "drain", wanted, done), wanted
