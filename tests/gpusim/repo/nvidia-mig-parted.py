#!/usr/bin/env python
# gpusim stand-in for nvidia-mig-parted @VERSION@, shipped by the stand-in nvidia-mig-manager
# package. It reads a mig-parted v1 config as the real tool does (api/spec/v1: version v1,
# mig-configs, each entry devices / mig-enabled / mig-devices / device-filter, unknown fields
# refused, mig-devices required with MIG on and empty with it off) and applies the selected
# config through nvidia-smi, the way the real tool does through NVML: MIG mode per GPU (a GPU
# reset where the change is pending), then the GPU instances each with its compute instance.
# Hooks (api/hooks/v1: apply-start, pre-apply-mode, pre-apply-config, apply-exit) run around it.
#
#   nvidia-mig-parted apply  -f CONFIG -c NAME [-k HOOKS] [--mode-only]
#   nvidia-mig-parted assert -f CONFIG -c NAME [--mode-only]
#   nvidia-mig-parted export
#   nvidia-mig-parted --version
# -f, -c and -k default to MIG_PARTED_CONFIG_FILE, MIG_PARTED_SELECTED_CONFIG, MIG_PARTED_HOOKS_FILE.
import argparse
import os
import re
import subprocess
import sys

import yaml

VERSION = "@VERSION@"
SMI = os.environ.get("GPUSIM_NVIDIA_SMI", "nvidia-smi")
ENTRY_FIELDS = {"device-filter", "devices", "mig-enabled", "mig-devices"}
HOOK_NAMES = ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
HOOK_FIELDS = {"command", "args", "envs", "workdir"}
CI_ROW = re.compile(r"\|\s+(\d+)\s+(\d+)\s+MIG\s+\S+\s+\d+\s+\d+\s+\d+:\d+\s*\|")


class Refused(Exception):
    pass


def smi(*args, check=True):
    result = subprocess.run([SMI, *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise Refused(f"nvidia-smi {' '.join(args)} failed ({result.returncode}): {result.stdout}{result.stderr}")
    return result


def load(path, kind):
    try:
        with open(path) as handle:
            return yaml.safe_load(handle)
    except OSError as exc:
        raise Refused(f"error reading {kind} file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise Refused(f"error parsing {kind} file {path}: {exc}") from None


def check_config(spec, path):
    if not isinstance(spec, dict):
        raise Refused(f"error parsing config file {path}: not a mapping")
    unknown = set(spec) - {"version", "mig-configs"}
    if unknown:
        raise Refused(f"error parsing config file {path}: unknown field {sorted(unknown)[0]!r}")
    if spec.get("version") != "v1":
        raise Refused(f"error parsing config file {path}: unknown version: {spec.get('version')!r}")
    configs = spec.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise Refused(f"error parsing config file {path}: at least one entry in mig-configs is required")
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            raise Refused(f"error parsing config file {path}: mig-configs {name}: at least one entry is required")
        for entry in entries:
            unknown = set(entry) - ENTRY_FIELDS
            if unknown:
                raise Refused(f"error parsing config file {path}: unknown field {sorted(unknown)[0]!r}")
            devices = entry.get("devices")
            if devices != "all" and not (isinstance(devices, list) and all(isinstance(d, int) for d in devices)):
                raise Refused(f"error parsing config file {path}: invalid devices {devices!r}")
            if not isinstance(entry.get("mig-enabled"), bool):
                raise Refused(f"error parsing config file {path}: missing 'mig-enabled' field")
            if entry["mig-enabled"] and "mig-devices" not in entry:
                raise Refused(f"error parsing config file {path}: missing 'mig-devices' field")
            if not entry["mig-enabled"] and entry.get("mig-devices"):
                raise Refused(f"error parsing config file {path}: MIG devices must be empty when MIG is disabled")


def gpus():
    """[(index, device id as 0xDDDD10DE)] of the node."""
    out = smi("--query-gpu=index,pci.device_id", "--format=csv,noheader").stdout
    return [(int(i), d.strip().upper().replace("0X", "0x")) for i, d in (line.split(",") for line in out.splitlines())]


def matches(entry, index, device_id):
    if entry["devices"] != "all" and index not in entry["devices"]:
        return False
    wanted = entry.get("device-filter")
    if wanted is None:
        return True
    wanted = [wanted] if isinstance(wanted, str) else wanted
    return any(device_id.upper() == str(w).upper() for w in wanted)


def selected(spec, name):
    configs = spec["mig-configs"]
    if name not in configs:
        raise Refused(f"selected mig-config not present: {name}")
    plan = {}
    for index, device_id in gpus():
        for entry in configs[name]:
            if matches(entry, index, device_id):
                devices = dict(entry.get("mig-devices") or {}) if entry["mig-enabled"] else {}
                plan[index] = (entry["mig-enabled"], {k: v for k, v in devices.items() if v})
                break
    return plan


def current():
    """{index: (mig enabled, pending mode differs, {profile: count of instances with a compute instance})}."""
    out = {}
    modes = smi("--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader").stdout
    for line in modes.splitlines():
        index, mode, pending = (cell.strip() for cell in line.split(","))
        out[int(index)] = [mode == "Enabled", pending != mode, {}]
    with_ci = {(int(g), int(i)) for g, i in CI_ROW.findall(smi("mig", "-lci", check=False).stdout)}
    listing = smi("mig", "-lgi", check=False).stdout
    for line in listing.splitlines():
        match = re.match(r"\|\s+(\d+)\s+MIG\s+(\S+)\s+\d+\s+(\d+)\s+\d+:\d+", line)
        if match and (int(match.group(1)), int(match.group(3))) in with_ci:
            counts = out[int(match.group(1))][2]
            counts[match.group(2)] = counts.get(match.group(2), 0) + 1
    return out


def differs(plan, now, mode_only):
    mode, config = [], []
    for index, (enabled, devices) in sorted(plan.items()):
        have_enabled, pending, have = now[index]
        if have_enabled != enabled or pending:
            mode.append(index)
        if not mode_only and (have_enabled != enabled or (enabled and have != devices)):
            config.append(index)
    return mode, config


def run_hooks(hooks, name):
    for hook in (hooks or {}).get(name) or []:
        env = dict(os.environ, **{k: str(v) for k, v in (hook.get("envs") or {}).items()})
        env["MIG_PARTED_HOOK"] = name
        result = subprocess.run(
            [hook["command"], *[str(a) for a in hook.get("args") or []]],
            env=env,
            cwd=hook.get("workdir") or None,
            check=False,
        )
        if result.returncode != 0:
            raise Refused(f"error running hook {name} ({hook['command']}): exit status {result.returncode}")


def check_hooks(hooks, path):
    if hooks is None:
        return None
    if not isinstance(hooks, dict) or hooks.get("version") != "v1" or set(hooks) - {"version", "hooks"}:
        raise Refused(f"error parsing hooks file {path}: expected version v1 and hooks")
    for name, items in (hooks.get("hooks") or {}).items():
        if name not in HOOK_NAMES:
            raise Refused(f"error parsing hooks file {path}: unknown hook {name!r}")
        for item in items or []:
            if set(item) - HOOK_FIELDS or "command" not in item:
                raise Refused(f"error parsing hooks file {path}: a hook takes command, args, envs and workdir")
    return hooks.get("hooks") or {}


def apply(args):
    spec = load(args.f, "config")
    check_config(spec, args.f)
    hooks = check_hooks(load(args.k, "hooks"), args.k) if args.k else None
    plan = selected(spec, args.c)
    run_hooks(hooks, "apply-start")
    try:
        mode, config = differs(plan, current(), args.mode_only)
        if mode:
            run_hooks(hooks, "pre-apply-mode")
            for index in mode:
                smi("-i", str(index), "-mig", "1" if plan[index][0] else "0")
                if current()[index][1]:
                    result = smi("-i", str(index), "-r", check=False)
                    if result.returncode != 0:
                        raise Refused(
                            f"MIG mode change pending on GPU {index}: the GPU could not be reset "
                            f"({result.stdout.strip()}); reboot the node to apply it"
                        )
        if config:
            run_hooks(hooks, "pre-apply-config")
            for index in config:
                enabled, devices = plan[index]
                if not enabled:
                    continue
                smi("mig", "-i", str(index), "-dci", check=False)
                smi("mig", "-i", str(index), "-dgi", check=False)
                # Largest first: the placements of the big profiles are the scarce ones.
                order = sorted(devices, key=lambda p: -int(re.search(r"(\d)g\.", p).group(1)))
                wanted = [p for p in order for _count in range(devices[p])]
                if wanted:
                    smi("mig", "-i", str(index), "-cgi", ",".join(wanted), "-C")
        left = differs(plan, current(), args.mode_only)
        if left[0] or left[1]:
            raise Refused(f"the selected configuration is not in place after applying it (GPUs {left})")
    finally:
        run_hooks(hooks, "apply-exit")
    print("MIG configuration applied successfully")
    return 0


def check(args):
    spec = load(args.f, "config")
    check_config(spec, args.f)
    mode, config = differs(selected(spec, args.c), current(), args.mode_only)
    if mode or config:
        sys.stderr.write("Assertion failure: selected configuration not currently applied\n")
        return 1
    print("Selected MIG configuration currently applied")
    return 0


def export(_args):
    entries = []
    for index, (enabled, _pending, devices) in sorted(current().items()):
        entry = {"devices": [index], "mig-enabled": enabled}
        if enabled:
            entry["mig-devices"] = devices
        entries.append(entry)
    sys.stdout.write(yaml.safe_dump({"version": "v1", "mig-configs": {"current": entries}}, sort_keys=False))
    return 0


def main(argv):
    if argv in (["--version"], ["version"]):
        print(f"nvidia-mig-parted version {VERSION}")
        return 0
    parser = argparse.ArgumentParser(prog="nvidia-mig-parted")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("apply", "assert"):
        cmd = sub.add_parser(name)
        cmd.add_argument("-f", "--config-file", dest="f", default=os.environ.get("MIG_PARTED_CONFIG_FILE"))
        cmd.add_argument("-c", "--selected-config", dest="c", default=os.environ.get("MIG_PARTED_SELECTED_CONFIG"))
        cmd.add_argument("--mode-only", action="store_true")
        cmd.add_argument("-d", "--debug", action="store_true")
        if name == "apply":
            cmd.add_argument("-k", "--hooks-file", dest="k", default=os.environ.get("MIG_PARTED_HOOKS_FILE"))
    sub.add_parser("export")
    args = parser.parse_args(argv)
    if args.command != "export" and (not args.f or not args.c):
        sys.stderr.write("Error: a config file (-f) and a selected config (-c) are required\n")
        return 1
    try:
        return {"apply": apply, "assert": check, "export": export}[args.command](args)
    except Refused as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
