#!/usr/bin/env python
# gpusim stand-in for dcgm-exporter, shipped by the stand-in datacenter-gpu-manager-exporter. Like
# the real one it takes -a/--address (default :9400), -c/--collect-interval, -f/--collectors (a CSV of DCGM field, type,
# help) and -r/--remote-hostengine-info; it refuses a collectors file with a field it does not
# know or with a bad type, refuses to start when the remote host engine does not answer, and
# serves /metrics in Prometheus' text format: one sample per GPU the driver reports per field.
import argparse
import http.server
import json
import os
import socket
import subprocess
import sys

VERSION = "@VERSION@"
SMI = os.environ.get("GPUSIM_NVIDIA_SMI", "nvidia-smi")
# Field names of DCGM's field list (dcgm_fields.h) that this stand-in serves, with a fixed value.
FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK": 1980,
    "DCGM_FI_DEV_MEM_CLOCK": 2619,
    "DCGM_FI_DEV_GPU_TEMP": 34,
    # The margin to T.Limit (field 153), 54 degrees below it at 34 C as on the H100 capture.
    "DCGM_FI_DEV_GPU_TEMP_LIMIT": 54,
    "DCGM_FI_DEV_MEMORY_TEMP": 31,
    "DCGM_FI_DEV_POWER_USAGE": 71.5,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 123456789,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
    "DCGM_FI_DEV_GPU_UTIL": 0,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 0,
    "DCGM_FI_DEV_ENC_UTIL": 0,
    "DCGM_FI_DEV_DEC_UTIL": 0,
    "DCGM_FI_DEV_XID_ERRORS": 0,
    "DCGM_FI_DEV_FB_FREE": 80000,
    "DCGM_FI_DEV_FB_USED": 0,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 0,
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 0,
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 0,
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 0,
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": 700,
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0,
    "DCGM_FI_PROF_SM_ACTIVE": 0,
    "DCGM_FI_PROF_SM_OCCUPANCY": 0,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0,
    "DCGM_FI_PROF_DRAM_ACTIVE": 0,
    "DCGM_FI_PROF_PCIE_TX_BYTES": 0,
    "DCGM_FI_PROF_PCIE_RX_BYTES": 0,
    "DCGM_FI_PROF_NVLINK_TX_BYTES": 0,
    "DCGM_FI_PROF_NVLINK_RX_BYTES": 0,
}
TYPES = ("gauge", "counter", "label")
FAULTS = os.environ.get("GPUSIM_FAULTS", "/etc/gpusim/faults.json")
# The T.Limit the stand-in GPUs have: the margin (field 153) is this less the temperature.
TLIMIT_C = 88


def fail(msg):
    sys.stderr.write(f'level=ERROR msg="{msg}"\n')
    sys.exit(1)


def collectors(path):
    try:
        text = open(path).read()
    except OSError as err:
        fail(f"cannot read the collectors file {path}: {err}")
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) != 3:
            fail(f"{path}:{number}: want 'field, type, help'")
        field, kind, help_text = parts
        if field not in FIELDS:
            fail(f"{path}:{number}: could not find DCGM field {field}")
        if kind not in TYPES:
            fail(f"{path}:{number}: metric type {kind} is not one of {', '.join(TYPES)}")
        out.append((field, kind, help_text))
    return out


def gpus():
    out = subprocess.run(
        [SMI, "--query-gpu=index,uuid,pci.bus_id,name,minor_number", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        fail("the NVIDIA driver does not answer (NVML)")
    return [[f.strip() for f in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def temperatures():
    """GPU index to temperature, from faults.json "temperature" [{gpu, celsius}] (a GPU running hot)."""
    try:
        with open(FAULTS) as handle:
            faults = json.load(handle)
    except (OSError, ValueError):
        return {}
    return {str(t["gpu"]): int(t["celsius"]) for t in faults.get("temperature") or []}


def value(field, index, hot):
    if index in hot and field == "DCGM_FI_DEV_GPU_TEMP":
        return hot[index]
    if index in hot and field == "DCGM_FI_DEV_GPU_TEMP_LIMIT":
        return TLIMIT_C - hot[index]
    return FIELDS[field]


def page(fields, rows, hostname):
    lines = []
    hot = temperatures()
    for field, kind, help_text in fields:
        if kind == "label":
            continue
        lines += [f"# HELP {field} {help_text}", f"# TYPE {field} {kind}"]
        for index, uuid, bus, name, minor in rows:
            labels = (
                f'gpu="{index}",UUID="{uuid}",pci_bus_id="{bus}",device="nvidia{minor}",'
                f'modelName="{name}",Hostname="{hostname}"'
            )
            lines.append(f"{field}{{{labels}}} {value(field, index, hot)}")
    return ("\n".join(lines) + "\n").encode()


def main():
    parser = argparse.ArgumentParser(prog="dcgm-exporter")
    parser.add_argument("-a", "--address", default=os.environ.get("DCGM_EXPORTER_LISTEN", ":9400"))
    parser.add_argument(
        "-f",
        "--collectors",
        default=os.environ.get("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/default-counters.csv"),
    )
    parser.add_argument(
        "-c", "--collect-interval", type=int, default=int(os.environ.get("DCGM_EXPORTER_INTERVAL", "30000"))
    )
    parser.add_argument("-r", "--remote-hostengine-info", default=os.environ.get("DCGM_REMOTE_HOSTENGINE_INFO", ""))
    parser.add_argument("-v", "--version", action="store_true")
    args = parser.parse_args()
    if args.version:
        print(f"dcgm-exporter version {VERSION} (gpusim stand-in)")
        return 0
    fields = collectors(args.collectors)
    if args.remote_hostengine_info:
        host, _sep, port = args.remote_hostengine_info.rpartition(":")
        try:
            socket.create_connection((host or "localhost", int(port or 5555)), timeout=5).close()
        except OSError as err:
            fail(f"cannot connect to the remote host engine {args.remote_hostengine_info}: {err}")
    hostname = socket.gethostname()
    rows = gpus()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            # Each scrape reads the faults again (a GPU that runs hot), as DCGM reads the GPUs.
            body = page(fields, rows, hostname)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            return

    host, _sep, port = args.address.rpartition(":")
    server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    print(f"dcgm-exporter {VERSION}: {len(fields)} fields from {args.collectors}, {len(rows)} GPUs", flush=True)
    print(f"Starting webserver on {args.address}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
