# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet on paper (``python bench/fleet.py --paper 1000,10000``; ``make bench-fleet-paper``):
what a run does on the controller with a recorded fleet of N nodes, with no Docker and no node.

Writes a fleet state of N records (node descriptions of three kinds: 8 H100 with NVLink, 4 L40S,
8 A100 in MIG mode with 14 MIG devices; one node in 50 short of a DIMM; two InfiniBand fabrics; a
scrape and a validation record each) into a temporary folder, then times, each with the
collection's own code:

  read      every record read and checked (fleet_state's read of the folder)
  merge     a run's slurm section for a tenth of the nodes merged with the rest, and the node lines
            grouped (fleet_state: fleet.merge, slurm.node_lines)
  slurm     slurm.conf and gres.conf rendered from the role's own templates (hostlist groups)
  scrape    the DCGM exporter's file_sd targets rendered from the dcgm role's template
  pairs     the NCCL pairs and whole-fabric runs validation plans (nccl_multi_plan)
  report    validation.html and validation.json (the validation_report module): a tenth of the
            nodes validated by this run, the others listed with their recorded verdicts

and prints the seconds of each, the total, the time per node, and the peak memory Python
allocated (tracemalloc, in a second run: it slows Python several times over, so the times come from
a run without it). Targets (issue 61): 1 s at 1,000 nodes, 10 s at 10,000, linear or
better. A benchmark prints numbers; it is never a pass/fail test."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import yaml
from ansible.module_utils.testing import patch_module_args
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[1]
# The collection from the checkout (.collections links back to it), for the templates' filters too.
init_plugin_loader([str(ROOT / ".collections")])

from ansible_collections.gpuops.cluster.plugins.module_utils import fleet, slurm_topology, validation  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.modules import validation_report  # noqa: E402

STEPS = ("read", "merge", "slurm", "scrape", "pairs", "report")


def _links(count, index):
    return ",".join("-1" if other == index else "18" for other in range(count))


def _spec(kind, short_dimm):
    """A node description as the slurm role records it (fleet._slurm's shape)."""
    if kind == "h100":
        devices = [
            {"type": "h100", "file": f"/dev/nvidia{i}", "cores": "0-55" if i < 4 else "56-111", "links": _links(8, i)}
            for i in range(8)
        ]
        cpus, sockets, cores, memory = 224, 2, 56, 2_000_000
    elif kind == "l40s":
        devices = [{"type": "l40s", "file": f"/dev/nvidia{i}", "cores": "0-31" if i < 2 else "32-63"} for i in range(4)]
        cpus, sockets, cores, memory = 128, 2, 32, 500_000
    else:  # an A100 node in MIG mode: on each GPU, two 3g.20gb instances (the first GPU: one 7g.80gb)
        whole = "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13"
        devices = [{"type": "a100_7g.80gb", "files": whole}]
        for gpu in range(1, 8):
            for instance in range(2):
                cap = 100 + gpu * 10 + instance * 2
                devices.append({"type": "a100_3g.20gb", "files": f"/dev/nvidia{gpu},/dev/nvidia-caps/nvidia-cap{cap},"
                                f"/dev/nvidia-caps/nvidia-cap{cap + 1}"})  # fmt: skip
        cpus, sockets, cores, memory = 256, 2, 64, 1_000_000
    types = {}
    for device in devices:
        types[device["type"]] = types.get(device["type"], 0) + 1
    return {
        "boards": 1,
        "sockets_per_board": sockets,
        "cores_per_socket": cores,
        "threads_per_core": 2,
        "cpus": cpus,
        "real_memory": memory - (64_000 if short_dimm else 0),
        "gpus": len(devices),
        "gres": ",".join(f"gpu:{name}:{count}" for name, count in types.items()),
        "gres_devices": devices,
    }


def records(count):
    """``{node: record}`` of a fleet of ``count`` nodes, as fleet_state keeps them."""
    kinds = ["h100"] * 5 + ["l40s"] * 3 + ["a100"] * 2
    out = {}
    for n in range(1, count + 1):
        name, kind = f"gpu{n:05d}", kinds[n % len(kinds)]
        fabric = "ib-a" if n <= count // 2 else "ib-b"
        ports = [
            {"ca": f"mlx5_{p}", "port": 1, "ca_type": "MT4129", "state": "Active", "physical_state": "LinkUp",
             "rate": 400}
            for p in range(8 if kind != "l40s" else 2)
        ]  # fmt: skip
        out[name] = {
            "schema": fleet.SCHEMA,
            "node": name,
            "sections": {
                "slurm": {"data": {"hostname": name, "spec": _spec(kind, n % 50 == 0), "job_gpu_metrics": True},
                          "since": "2026-12-01"},
                "scrape": {"data": {"targets": {"dcgm": f"{name}:9400", "node": f"{name}:9100"},
                                    "labels": {"gpu_model": kind}}, "since": "2026-12-01"},
                "validation": {"data": {"verdict": "pass", "date": "2026-12-01", "findings": [], "fabric": fabric,
                                        "compute_ports": ports, "gpus": 8 if kind != "l40s" else 4, "name": name},
                               "since": "2026-12-01"},
            },
        }  # fmt: skip
    return out


def trusted(value):
    """Variables as Ansible's loader marks those of a role's files: text it may render."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def render(path, variables):
    """A role's template, rendered by Ansible's own templating as the template module does."""
    text = trust_as_template((ROOT / path).read_text())
    return Templar(loader=DataLoader(), variables=variables).template(text, escape_backslashes=False)


def role_variables(role):
    values = {}
    for part in ("defaults", "vars"):
        file = ROOT / "roles" / role / part / "main.yml"
        if file.is_file():
            values.update(yaml.safe_load(file.read_text()) or {})
    return trusted(values)


def report(stored, fresh, dest):
    """validation_report over the fleet: ``fresh`` nodes validated by this run (their checks passed),
    the others as the fleet state recorded them. Returns the size of validation.html."""
    earlier = {name: record["sections"]["validation"]["data"] for name, record in stored.items()}
    nodes = {}
    for name in fresh:
        data = earlier[name]
        checks = [
            {"check": check, "subject": "node", "verdict": "pass", "expected": "", "measured": "", "reason": ""}
            for check in ("gpu_count", "driver", "ecc", "nvlink", "pcie", "nccl_node")
        ]  # fmt: skip
        # ib_facts' compute ports, as the validate role passes them.
        ports = [dict(port, hca=port["ca"], name=f"{port['ca']}/{port['port']}") for port in data["compute_ports"]]
        nodes[name] = {"checks": checks, "fabric": data["fabric"], "compute_ports": ports, "name": name}
    args = {"nodes": nodes, "earlier": earlier, "dest": str(dest), "mode": "gate"}
    with patch_module_args(args), contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            validation_report.main()
        except SystemExit:
            pass
    result = json.loads(out.getvalue())
    if result.get("failed"):
        sys.exit(f"validation_report failed: {result.get('msg')}")
    return (dest / "validation.html").stat().st_size


def run(count, trace=False):
    """The seconds of each step over a fleet of ``count`` nodes; with ``trace``, the peak memory
    allocated instead (tracemalloc slows Python several times over, so the times come from a run
    without it)."""
    fleet_records = records(count)
    names = sorted(fleet_records)
    folder = Path(tempfile.mkdtemp(prefix="gpuops-fleet-paper-"))
    try:
        for name, record in fleet_records.items():
            (folder / fleet.file_name(name)).write_text(fleet.render_record(record))
        if trace:
            tracemalloc.start()
        took = {}
        began = time.perf_counter()
        stored = {}
        for entry in os.scandir(folder):
            node = entry.name.removesuffix(".json")
            with open(entry.path, encoding="utf-8") as handle:
                stored[node] = fleet.parse_record(handle.read(), node, entry.path)
        took["read"] = time.perf_counter() - began

        began = time.perf_counter()
        fresh = {name: stored[name]["sections"]["slurm"]["data"] for name in names[::10]}
        plan = fleet.merge(stored, "slurm", fresh, names, today="2026-12-05")
        # fleet_state returns the node lines with the slurm section (plan.yml's __slurm_lines).
        lines = fleet.files("slurm", plan["nodes"])
        took["merge"] = time.perf_counter() - began

        began = time.perf_counter()
        slurm_vars = {
            **role_variables("slurm"),
            "ansible_managed": "gpuops.cluster (bench)",
            "inventory_hostname": "ctl",
            "groups": {"all": ["ctl", *names], "slurm_controller": ["ctl"], "slurm_compute": names,
                       "slurm_dbd": [], "slurm_login": ["ctl"]},
            "hostvars": {"ctl": {"ansible_facts": {"hostname": "ctl"}}},
            "ansible_facts": {"hostname": "ctl"},
            "__slurm_lines": lines,
            "__slurm_topology": slurm_topology.topology(lines),
            "__slurm_configless_hosts": names,
            "__slurm_tiers": [],
            "__slurm_dbd_host": "",
            "__slurm_job_gpu_metrics": True,
            "slurm_partitions": [{"name": "gpu", "group": "slurm_compute", "default": True}],
        }  # fmt: skip
        slurm_conf = render("roles/slurm/templates/slurm.conf.j2", slurm_vars)
        gres_conf = render("roles/slurm/templates/gres.conf.j2", slurm_vars)
        took["slurm"] = time.perf_counter() - began

        began = time.perf_counter()
        scrape = {name: record["sections"]["scrape"]["data"] for name, record in stored.items()}
        # fleet_state returns each job's entries with the scrape section (targets.yml's __dcgm_file_sd).
        targets = render(
            "roles/dcgm/templates/file_sd.yml.j2",
            {"ansible_managed": "bench", "__dcgm_file_sd": fleet.files("scrape", scrape), "item": [None, "dcgm"]},
        )
        took["scrape"] = time.perf_counter() - began

        began = time.perf_counter()
        health = {name: dict(record["sections"]["validation"]["data"], checks=[]) for name, record in stored.items()}
        pairs = validation.multi_node_plan(health)
        took["pairs"] = time.perf_counter() - began
        began = time.perf_counter()
        report_bytes = report(stored, names[::10], folder / "report")
        took["report"] = time.perf_counter() - began
        peak = None
        if trace:
            _current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        sizes = {
            "slurm.conf lines": slurm_conf.count("\nNodeName="),
            "gres.conf lines": gres_conf.count("\nNodeName="),
            "scrape targets": targets.count("- labels:"),
            "NCCL runs": len(pairs["runs"]),
            "report KiB": report_bytes // 1024,
        }
        return took, peak, sizes
    finally:
        for entry in os.scandir(folder / "report") if (folder / "report").is_dir() else ():
            os.unlink(entry.path)
        if (folder / "report").is_dir():
            (folder / "report").rmdir()
        for entry in os.scandir(folder):
            os.unlink(entry.path)
        folder.rmdir()


def main(sizes):
    # The report's plotting libraries load once per run, whatever the fleet's size: timed apart.
    began = time.perf_counter()
    missing = validation_report.r.missing_libraries()
    if not missing:
        validation_report.r._pyplot()
    loaded = time.perf_counter() - began
    print(f"the report's plotting libraries loaded in {loaded:.2f} s, once per run (not in the report column)")
    if missing:
        print(f"  missing: {', '.join(missing)} (the report draws no picture)")
    print(f"{'nodes':>7} {'read':>7} {'merge':>7} {'slurm':>7} {'scrape':>7} {'pairs':>7} {'report':>7} {'total':>7} "
          f"{'ms/node':>8} {'peak MiB':>9}  what came out")  # fmt: skip
    for count in sizes:
        took, _none, sizes_out = run(count)
        _took, peak, _sizes = run(count, trace=True)
        total = sum(took.values())
        print(
            f"{count:>7} " + " ".join(f"{took[step]:>7.2f}" for step in STEPS)
            + f" {total:>7.2f} {1000 * total / count:>8.3f} {peak / 2**20:>9.1f}  {json.dumps(sizes_out)}"
        )  # fmt: skip


if __name__ == "__main__":
    main([int(n) for n in (sys.argv[1] if len(sys.argv) > 1 else "1000,10000").split(",")])
