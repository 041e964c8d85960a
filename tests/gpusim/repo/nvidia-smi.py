#!/usr/bin/python3
# gpusim stand-in for nvidia-smi, shipped by the stand-in driver package. It reports the
# node's profile (the hardware) with the version of the driver package that installed it.
# Supports: (no args), -L, -q -x, topo -m|--matrix, nvlink -s|--status [-i N], --version,
# --query-gpu=... --format=csv[,...]. Faults injected in /etc/gpusim/faults.json (tests/gpusim/tasks/
# faults.yml) show: "pcie" [{gpu, gen, width}] in the XML, "nvlink_down" [{gpu, link}] in nvlink -s,
# "gpu_processes" [{pid, gpu, used_memory, name}] in --query-compute-apps, "lost_gpus" {count, driver}
# everywhere (the last GPUs gone, under that driver version only).
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

DRIVER_VERSION = "@DRIVER_VERSION@"
CUDA_VERSION = "@CUDA_VERSION@"
PROFILE = os.environ.get("GPUSIM_PROFILE_DIR", "/usr/share/gpusim/profile")

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def read(name):
    try:
        with open(f"{PROFILE}/{name}") as handle:
            return handle.read()
    except OSError:
        sys.stdout.write(NO_DRIVER)
        sys.exit(9)


FAULTS = os.environ.get("GPUSIM_FAULTS", "/etc/gpusim/faults.json")


def faults():
    try:
        with open(FAULTS) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def degrade_pcie(text):
    """Each faulted GPU's current PCIe link, in its <gpu> element."""
    for fault in faults().get("pcie", []):
        parts = text.split("<gpu id=")
        index = int(fault["gpu"]) + 1
        if index < len(parts):
            part = parts[index]
            part = re.sub(r"<current_link_gen>[^<]*<", "<current_link_gen>{}<".format(fault["gen"]), part, count=1)
            part = re.sub(
                r"<current_link_width>[^<]*<", "<current_link_width>{}x<".format(fault["width"]), part, count=1
            )
            parts[index] = part
            text = "<gpu id=".join(parts)
    return text


def nvlink_status(argv):
    profile = json.loads(read("profile.json"))
    nvlink = profile.get("nvlink") or {}
    down = {(int(f["gpu"]), int(f["link"])) for f in faults().get("nvlink_down", [])}
    only = int(argv[argv.index("-i") + 1]) if "-i" in argv else None
    for gpu in gpus():
        index = int(gpu["index"])
        if only is not None and index != only:
            continue
        if not nvlink.get("links"):
            continue
        sys.stdout.write("GPU {}: {} (UUID: {})\n".format(index, gpu["name"], gpu["uuid"]))
        for link in range(nvlink["links"]):
            speed = "<inactive>" if (index, link) in down else "{} GB/s".format(nvlink["gbps"])
            sys.stdout.write(f"\t Link {link}: {speed}\n")
    return 0


def lose_gpus(text):
    """The last GPUs gone from the driver's view (a GPU that fell off the bus), under the driver
    version the fault names: "lost_gpus" {count, driver}."""
    lost = faults().get("lost_gpus") or {}
    count = int(lost.get("count", 0))
    if count <= 0 or lost.get("driver", DRIVER_VERSION) != DRIVER_VERSION:
        return text
    elements = list(re.finditer(r"<gpu id=.*?</gpu>\n?", text, flags=re.DOTALL))
    for match in reversed(elements[-count:]):
        text = text[: match.start()] + text[match.end() :]
    left = max(len(elements) - count, 0)
    return re.sub(r"<attached_gpus>[^<]*<", f"<attached_gpus>{left}<", text, count=1)


def xml_text():
    text = lose_gpus(degrade_pcie(read("nvidia-smi-q-x.xml")))
    text = re.sub(r"<driver_version>[^<]*<", f"<driver_version>{DRIVER_VERSION}<", text)
    text = re.sub(r"<cuda_version>[^<]*<", f"<cuda_version>{CUDA_VERSION}<", text)
    return re.sub(r"<gsp_firmware_version>(?!N/A)[^<]*<", f"<gsp_firmware_version>{DRIVER_VERSION}<", text)


def gpus():
    root = ET.fromstring(xml_text().split("\n", 2)[2])
    out = []
    for gpu in root.findall("gpu"):
        out.append(
            {
                "index": str(len(out)),
                "name": gpu.findtext("product_name"),
                "uuid": gpu.findtext("uuid"),
                "pci.bus_id": gpu.findtext("pci/pci_bus_id"),
                "driver_version": DRIVER_VERSION,
                "memory.total": gpu.findtext("fb_memory_usage/total"),
                "memory.used": gpu.findtext("fb_memory_usage/used"),
                "serial": gpu.findtext("serial"),
                "vbios_version": gpu.findtext("vbios_version"),
                "persistence_mode": gpu.findtext("persistence_mode"),
                "mig.mode.current": gpu.findtext("mig_mode/current_mig"),
                "minor_number": gpu.findtext("minor_number"),
            }
        )
    return out


def query(fields, fmt):
    opts = fmt.split(",")
    if opts[0] != "csv":
        sys.stderr.write("gpusim nvidia-smi: only --format=csv is simulated\n")
        return 2
    rows = gpus()
    for field in fields:
        if rows and field not in rows[0]:
            sys.stdout.write(f'Field "{field}" is not a valid field to query.\n\n')
            return 2
    if "noheader" not in opts:
        sys.stdout.write(", ".join(fields) + "\n")
    for row in rows:
        values = [row[f] for f in fields]
        if "nounits" in opts:
            values = [v.replace(" MiB", "") for v in values]
        sys.stdout.write(", ".join(values) + "\n")
    return 0


def compute_apps(argv):
    """The processes on the GPUs: none, unless faults.json lists some ("gpu_processes")."""
    fields = argv[0].split("=", 1)[1].split(",")
    if argv[1:] != ["--format=csv,noheader"]:
        sys.stderr.write("gpusim nvidia-smi: use --query-compute-apps=FIELDS --format=csv,noheader\n")
        return 2
    known = {"pid", "gpu_uuid", "used_memory", "process_name"}
    if not set(fields) <= known:
        sys.stdout.write(f'Field "{sorted(set(fields) - known)[0]}" is not a valid field to query.\n\n')
        return 2
    uuids = [gpu["uuid"] for gpu in gpus()]
    for proc in faults().get("gpu_processes", []):
        row = {
            "pid": str(proc["pid"]),
            "gpu_uuid": uuids[int(proc.get("gpu", 0))],
            "used_memory": f"{proc.get('used_memory', 1024)} MiB",
            "process_name": proc.get("name", "python3"),
        }
        sys.stdout.write(", ".join(row[f] for f in fields) + "\n")
    return 0


def main(argv):
    if argv in (["-q", "-x"], ["-x", "-q"], ["--query", "--xml-format"]):
        sys.stdout.write(xml_text())
    elif argv in (["topo", "-m"], ["topo", "--matrix"]):
        sys.stdout.write(read("nvidia-smi-topo-m.txt"))
    elif argv[:1] == ["nvlink"] and len(argv) > 1 and argv[1] in ("-s", "--status"):
        return nvlink_status(argv)
    elif argv == ["-L"]:
        for gpu in gpus():
            sys.stdout.write("GPU {}: {} (UUID: {})\n".format(gpu["index"], gpu["name"], gpu["uuid"]))
    elif argv == ["--version"]:
        read("profile.json")
        nvml = DRIVER_VERSION.rsplit(".", 1)[0]
        sys.stdout.write(
            f"NVIDIA-SMI version  : {DRIVER_VERSION}\nNVML version        : {nvml}\n"
            f"DRIVER version      : {DRIVER_VERSION}\nCUDA Version        : {CUDA_VERSION}\n"
        )
    elif argv and argv[0].startswith("--query-compute-apps="):
        return compute_apps(argv)
    elif argv and argv[0].startswith("--query-gpu="):
        fmt = [a for a in argv[1:] if a.startswith("--format=")]
        if len(argv) != 2 or not fmt:
            sys.stderr.write("gpusim nvidia-smi: use --query-gpu=FIELDS --format=csv[,noheader][,nounits]\n")
            return 2
        return query(argv[0].split("=", 1)[1].split(","), fmt[0].split("=", 1)[1])
    elif not argv:
        rows = gpus()
        sys.stdout.write(
            f"NVIDIA-SMI {DRIVER_VERSION}    Driver Version: {DRIVER_VERSION}    CUDA Version: {CUDA_VERSION}\n"
        )
        for gpu in rows:
            sys.stdout.write(f"{gpu['index']:>3}  {gpu['name']:<32} {gpu['pci.bus_id']}  {gpu['memory.total']}\n")
    else:
        sys.stderr.write("gpusim nvidia-smi: arguments not simulated: {}\n".format(" ".join(argv)))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
