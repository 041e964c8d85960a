#!/usr/bin/env python
# gpusim stand-in for dcgmi, shipped by the stand-in datacenter-gpu-manager-4-core: `dcgmi discovery -l`
# [--host HOST[:PORT]] connects to nv-hostengine (127.0.0.1:5555 by default) and lists the GPUs the
# driver reports; like the real one it fails when the host engine does not answer. `dcgmi diag -r N
# [-j]` prints DCGM 4's JSON (the shape of DCGM's dcgm_diag_schema.json) or its table, with the
# tests of level N; a test named in /etc/gpusim/faults.json ("dcgm_fail": {test, gpu, warning}) fails.
# `dcgmi health -s FLAGS | -f | -c [-j]` keeps the watched systems in a file under /run (gone at a
# reboot, as nv-hostengine's are at its restart) and checks them in DCGM's JSON (dcgmi/Health.cpp's
# shape); "dcgm_health" in faults.json ({gpu, system, health, message}) is an incident.
# `dcgmi mndiag --hostList "H1;H2" [--run mnubergemm] [--parameters P] --json` prints the report of
# DCGM's multi-node diagnostic in the shape of dcgmi's MnDiag.cpp (DCGM 4.6): it calls each node's
# host engine on its port (the real one reaches it through an SSH tunnel; the stand-in engine answers
# with its host name, GPUs and the node's "mndiag" fault, {gpu, message}); a node that does not answer
# ends the run with a runtime_error, a faulted GPU fails mnubergemm on its node.
import json
import os
import socket
import subprocess
import sys

SMI = os.environ.get("GPUSIM_NVIDIA_SMI", "nvidia-smi")


LEVELS = {
    1: [("Deployment", "software")],
    2: [("Deployment", "software"), ("Integration", "pcie"), ("Hardware", "memory")],
    3: [
        ("Deployment", "software"),
        ("Integration", "pcie"),
        ("Hardware", "memory"),
        ("Hardware", "diagnostic"),
        ("Stress", "targeted_stress"),
        ("Stress", "targeted_power"),
        ("Stress", "memory_bandwidth"),
    ],
}


def injected(key):
    """The fault of /etc/gpusim/faults.json under ``key`` ({} when none, or no readable file)."""
    try:
        with open(os.environ.get("GPUSIM_FAULTS", "/etc/gpusim/faults.json")) as handle:
            return json.load(handle).get(key) or {}
    except (OSError, ValueError):
        return {}


def diag(argv, gpus):
    level = int(argv[argv.index("-r") + 1]) if "-r" in argv else 1
    fault = injected("dcgm_fail")
    categories = {}
    for category, name in LEVELS.get(level, LEVELS[3]):
        results, summary = [], "Pass"
        for index, _name, _bus, _uuid in gpus:
            entry = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": int(index), "status": "Pass"}
            if fault.get("test") == name and int(fault.get("gpu", 0)) == int(index):
                entry["status"] = summary = "Fail"
                entry["warnings"] = [
                    {
                        "error_category": 1,
                        "error_id": 12,
                        "error_severity": 2,
                        "warning": fault.get("warning", f"GPU {index}: simulated failure"),
                    }
                ]
            results.append(entry)
        categories.setdefault(category, []).append(
            {"name": name, "results": results, "test_summary": {"status": summary}}
        )
    document = {
        "DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in categories.items()]},
        "metadata": {"version": "4.4.1"},
    }
    if "-j" in argv or "--json" in argv:
        print(json.dumps(document, indent=4))
    else:
        print("Successfully ran diagnostic for group.")
        print("+---------------------------+------------------------------------------------+")
        for category, tests in categories.items():
            print(f"+-----  {category}  ".ljust(28, "-") + "+------------------------------------------------+")
            for test in tests:
                status = test["test_summary"]["status"]
                print("| {:<25} | {:<46} |".format(test["name"], status + (" - All" if status == "Pass" else "")))
        print("+---------------------------+------------------------------------------------+")
    return 0


WATCHES = os.environ.get("GPUSIM_DCGM_WATCHES", "/run/gpusim/dcgm-health-watches")


def health(argv):
    if "-s" in argv:
        flags = argv[argv.index("-s") + 1]
        if not flags or any(f not in "admnptix" for f in flags) or ("a" in flags and len(flags) > 1):
            print("Invalid flags detected")
            return 255
        os.makedirs(os.path.dirname(WATCHES), exist_ok=True)
        with open(WATCHES, "w") as handle:
            handle.write(flags)
        print("Health monitor systems set successfully.")
        return 0
    try:
        with open(WATCHES) as handle:
            watched = handle.read().strip()
    except OSError:
        watched = ""
    if "-f" in argv:
        print("Health monitor systems report")
        print(f"watched: {watched or 'none'}")
        return 0
    if not watched:
        print("Error: Health watches not enabled. Please enable watches. ")
        return 255
    fault = injected("dcgm_health")
    body = {"Overall Health": {"value": "Healthy"}}
    if fault:
        level = fault.get("health", "Failure")
        words, lines = str(fault.get("message", "simulated incident")).split(), [""]
        for word in words:  # DCGM wraps each message at 54 characters
            lines[-1:] = [f"{lines[-1]} {word}".strip()] if len(lines[-1]) + len(word) < 54 else [lines[-1], word]
        system = {"value": level, "overflow": lines}
        entity = {"value": level, "children": {"Errors": {"children": {fault.get("system", "PCIe system"): system}}}}
        body["GPU"] = {"children": {str(int(fault.get("gpu", 0))): entity}}
        body["Overall Health"]["value"] = level
    document = {"body": body, "header": ["Health Monitor Report"]}
    if "-j" in argv:
        print(json.dumps(document, indent=3, sort_keys=True))
    else:
        print("Health Monitor Report")
        print(f"Overall Health: {body['Overall Health']['value']}")
    return 0


def connect(argv):
    default = os.environ.get("GPUSIM_HOSTENGINE", "127.0.0.1")  # the unit tests' engine on a free port
    target = argv[argv.index("--host") + 1] if "--host" in argv else default
    host, _sep, port = target.partition(":")
    try:
        socket.create_connection((host, int(port or 5555)), timeout=5).close()
    except OSError:
        print(f"Error: unable to establish a connection to the specified host: {target}")
        print("Error: Unable to connect to host engine. Host engine connection invalid/disconnected.")
        return False
    return True


def engine(spec):
    """Call a node's host engine (HOST, HOST:PORT, HOST=GPUS) and read its greeting."""
    host = spec.split("=", 1)[0]
    name, _sep, port = host.partition(":")
    with socket.create_connection((name, int(port) if port.isdigit() else 5555), timeout=5) as conn:
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    return name, json.loads(data or b"{}")


def mndiag(argv):
    if "--hostList" not in argv[:-1]:
        print("Error: --hostList is required")
        return 255
    specs = [s for s in argv[argv.index("--hostList") + 1].split(";") if s]
    run = argv[argv.index("--run") + 1] if "--run" in argv[:-1] else "mnubergemm"
    report = {"name": "DCGM Multi-Node Diagnostic", "metadata": {"num_hosts": len(specs), "num_entities": 0}}
    if run.lower() != "mnubergemm" or not 1 < len(specs) <= 72:
        print(f"Error: invalid multi-node diagnostic request: {run} over {len(specs)} hosts")
        return 255
    hosts, results, errors = [], [], []
    for host_id, spec in enumerate(specs):
        try:
            name, hello = engine(spec)
        except (OSError, ValueError) as exc:
            # As dcgmi words a run that did not complete (DCGM_ST_CONNECTION_NOT_VALID is -21).
            report["runtime_error"] = (
                "Error: Unable to complete multi-node diagnostic on host localhost. Return: (Host engine connection "
                f"invalid/disconnected) -21\n(gpusim: {spec.split('=')[0]}: {exc})"
            )
            print(json.dumps(report, indent=3))
            return 255
        fault = hello.get("mndiag") or {}
        entities = []
        for gpu in range(int(hello.get("gpus") or 0)):
            entities.append({"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu})
            result = {
                "host_id": host_id,
                "entity_group": "GPU",
                "entity_group_id": 1,
                "entity_id": gpu,
                "status": "Pass",
            }
            if fault and int(fault.get("gpu", -1)) == gpu:
                result["status"] = "Fail"
                result["warnings"] = [
                    {
                        "warning": fault.get("message") or f"GPU {gpu} failed mnubergemm (gpusim fault)",
                        "error_id": 1,
                        "error_category": 1,
                        "error_severity": 2,
                    }
                ]
            results.append(result)
        hosts.append(
            {
                "host_id": host_id,
                "hostname": hello.get("hostname") or name,
                "dcgm_version": hello.get("version") or "",
                "driver_version": "",
                "num_entities": len(entities),
                "entities": entities,
            }
        )
    report["metadata"]["num_entities"] = len(results)
    status = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
    report["hosts"] = hosts
    report["test_categories"] = [
        {
            "category": "Multi-Node Tests",
            "tests": [{"name": "MNUBERGEMM", "status": status, "test_summary": {"status": status}, "results": results}],
        }
    ]
    if errors:
        report["global_errors"] = errors
    if "--json" in argv or "-j" in argv:
        print(json.dumps(report, indent=3))
    else:
        print(f"Multi-node diagnostic: {status}")
    return 0


def main(argv):
    if argv[:1] == ["mndiag"]:
        return mndiag(argv[1:])
    if argv[:2] != ["discovery", "-l"] and argv[:1] not in (["diag"], ["health"]):
        sys.stderr.write(f"dcgmi (gpusim stand-in): {' '.join(argv)} is not simulated\n")
        return 2
    if not connect(argv):
        return 255
    if argv[:1] == ["health"]:
        return health(argv)
    out = subprocess.run(
        [SMI, "--query-gpu=index,name,pci.bus_id,uuid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = [[f.strip() for f in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    if argv[:1] == ["diag"]:
        return diag(argv, rows)
    print(f"{len(rows)} GPU{'s' if len(rows) != 1 else ''} found.")
    for index, name, bus, uuid in rows:
        print(f"GPU {index}: Name: {name}  PCI Bus ID: {bus}  Device UUID: {uuid}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
