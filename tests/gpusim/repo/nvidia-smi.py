#!/usr/bin/env python
# gpusim stand-in for nvidia-smi, shipped by the stand-in driver package. It reports the
# node's profile (the hardware) with the version of the driver package that installed it.
# Supports: (no args), -L, -q -x, topo -m|--matrix, nvlink -s|--status [-i N], --version,
# --query-gpu=... --format=csv[,...], and MIG: [-i N] -mig 0|1, [-i N] -r, mig [-i N] -lgip |
# -lgipp | -lgi | -lci | -cgi LIST [-C] | -dci [-gi IDS] | -dgi [-gi IDS]. Faults injected in
# /etc/gpusim/faults.json (tests/gpusim/tasks/faults.yml) show: "pcie" [{gpu, gen, width}] in the
# XML, "fabric" [{gpu, state, status, clique_id?}] as the GPU's NVLink fabric registration in the XML,
# "nvlink_down" [{gpu, link}] in nvlink -s, "gpu_processes" [{pid, gpu, used_memory, name}] in
# --query-compute-apps and as a GPU that holds a MIG mode change pending, "lost_gpus" {count,
# driver} everywhere (the last GPUs gone, under that driver version only), "recovery_action" [{gpu,
# action}] as the driver's GPU recovery action in the XML (Reset, Reboot...; -r on the GPU turns a
# Reset, Drain P2P or Drain and Reset into None, as the driver does once the GPU is reset).
import json
import os
import re
import stat
import sys
import xml.etree.ElementTree as ET

DRIVER_VERSION = "@DRIVER_VERSION@"
CUDA_VERSION = "@CUDA_VERSION@"
PROFILE = os.environ.get("GPUSIM_PROFILE_DIR", "/usr/share/gpusim/profile")

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)
# Left untemplated where this file is put over a distribution's nvidia-smi with dpkg-divert
# (tests/gpusim/tasks/canonical-driver.yml): the driver is then the one whose nvidia.ko is installed
# for the node's kernel, and its CUDA version, which that harness writes after every dpkg run.
if DRIVER_VERSION.startswith("@"):
    try:
        with open("/usr/share/gpusim/driver-version") as _driver, open("/usr/share/gpusim/cuda-version") as _cuda:
            DRIVER_VERSION, CUDA_VERSION = _driver.read().strip(), _cuda.read().strip()
    except OSError:
        sys.stdout.write(NO_DRIVER)
        sys.exit(9)


def read(name):
    try:
        with open(f"{PROFILE}/{name}") as handle:
            return handle.read()
    except OSError:
        sys.stdout.write(NO_DRIVER)
        sys.exit(9)


FAULTS = os.environ.get("GPUSIM_FAULTS", "/etc/gpusim/faults.json")


def read_json(path):
    """A JSON state file's content; {} where there is none (or it is unreadable)."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def faults():
    return read_json(FAULTS)


FABRIC = os.environ.get("GPUSIM_FABRIC", "/etc/gpusim/fabric.json")


def place_in_domain(text):
    """The node's place in its rack's NVLink domain, from /etc/gpusim/fabric.json ({cluster_uuid,
    clique_id}: gpusim_nvlink_domain, tests/gpusim/tasks/hardware.yml): every GPU's clique and cluster UUID, where the
    profile prints them (a tray of a multi-node NVLink domain)."""
    place = read_json(FABRIC)
    if "cluster_uuid" in place:
        text = re.sub(r"<clusterUuid>[^<]*<", "<clusterUuid>{}<".format(place["cluster_uuid"]), text)
    if "clique_id" in place:
        text = re.sub(r"<cliqueId>[^<]*<", "<cliqueId>{}<".format(place["clique_id"]), text)
    return text


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


def degrade_fabric(text):
    """Each faulted GPU's fabric state and status (a registration that never finished), in its <gpu>
    element; a tray's clique and cluster stay, or take the fault's (clique_id: a tray registered in
    another clique than its rack's)."""
    for fault in faults().get("fabric", []):
        parts = text.split("<gpu id=")
        index = int(fault["gpu"]) + 1
        if index < len(parts):
            start, end = parts[index].find("<fabric>"), parts[index].find("</fabric>")
            if 0 <= start < end:
                fabric = parts[index][start:end]
                fabric = re.sub(r"<state>[^<]*<", "<state>{}<".format(fault.get("state", "In Progress")), fabric)
                fabric = re.sub(r"<status>[^<]*<", "<status>{}<".format(fault.get("status", "N/A")), fabric)
                if "clique_id" in fault:
                    fabric = re.sub(r"<cliqueId>[^<]*<", "<cliqueId>{}<".format(fault["clique_id"]), fabric)
                parts[index] = parts[index][:start] + fabric + parts[index][end:]
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


def recovery_actions(text):
    """Each faulted GPU's recovery action (``<gpu_recovery_action>``), in its <gpu> element: the one the
    capture has replaced, or one added after the GPU's UUID where the capture's driver printed none."""
    for fault in faults().get("recovery_action", []):
        parts = text.split("<gpu id=")
        index = int(fault["gpu"]) + 1
        if index < len(parts):
            element = "<gpu_recovery_action>{}</gpu_recovery_action>".format(fault.get("action", "Reset"))
            part, count = re.subn(r"<gpu_recovery_action>[^<]*</gpu_recovery_action>", element, parts[index], count=1)
            if not count:
                part = re.sub(r"(</uuid>)", r"\1\n\t\t" + element, part, count=1)
            parts[index] = part
            text = "<gpu id=".join(parts)
    return text


def reset_recovery(index):
    """A reset GPU's recovery action back at None (as the driver reports it), where it asked for a reset."""
    current = faults()
    after = [
        dict(fault, action="None")
        if int(fault["gpu"]) == index and any(w in str(fault.get("action", "")).lower() for w in ("reset", "drain"))
        else fault
        for fault in current.get("recovery_action", [])
    ]
    if after != current.get("recovery_action", after):
        current["recovery_action"] = after
        with open(FAULTS, "w") as handle:
            json.dump(current, handle)


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
    text = place_in_domain(read("nvidia-smi-q-x.xml"))
    text = lose_gpus(recovery_actions(degrade_fabric(degrade_pcie(mig_xml(text)))))
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
                "mig.mode.pending": gpu.findtext("mig_mode/pending_mig"),
                "pci.device_id": "0x" + (gpu.findtext("pci/pci_device_id") or "")[:8],
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


# --- MIG: per-GPU mode and instances, kept in a state file --------------------------------------
# The profile folder's mig-lgip.txt and mig-lgipp.txt (real captures, tests/gpusim/captures/
# SOURCES.md) say which profiles a GPU offers and where each may be placed; every GPU of the
# profile offers them. The state (mode, pending mode, GPU and compute instances) lives in
# /var/lib/gpusim/mig.json; GPU instance ids come from per-size pools (7g: 0; 3g/4g: 1-2;
# 2g: 3-6; 1g: 7-13), which is how the real drivers in the captures number them.
MIG_STATE = os.environ.get("GPUSIM_MIG_STATE", "/var/lib/gpusim/mig.json")
ID_POOLS = {8: range(0, 1), 4: range(1, 3), 2: range(3, 7), 1: range(7, 14)}
LGIP_ROW = re.compile(
    r"\|\s*\d+\s+MIG\s+(\S+)\s+(\d+)\s+\d+/(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*\|"
    r"\s*\n\|\s+(\S+)\s+(\S+)\s+(\S+)\s*\|"
)
LGIPP_ROW = re.compile(r"GPU +\d+ +Profile ID +(\d+) +Placements? *: *\{([0-9,]*)\}:(\d+)")
DEV = os.environ.get("GPUSIM_DEV_ROOT", "/dev")
CAPS_MAJOR = 508  # dynamic on real hosts (242 in the A100 capture); any free number serves here


def mig_profiles():
    """[{name, id, total, memory, p2p, sm, dec, enc, ce, jpeg, ofa, starts, size}] or [] (no MIG)."""
    try:
        with open(f"{PROFILE}/mig-lgip.txt") as handle:
            lgip = handle.read()
        with open(f"{PROFILE}/mig-lgipp.txt") as handle:
            lgipp = handle.read()
    except OSError:
        return []
    places = {
        int(m.group(1)): ([int(s) for s in m.group(2).split(",")], int(m.group(3))) for m in LGIPP_ROW.finditer(lgipp)
    }
    out = []
    for m in LGIP_ROW.finditer(lgip):
        name, pid, total, memory, p2p, sm, dec, enc, ce, jpeg, ofa = m.groups()
        starts, size = places[int(pid)]
        out.append(
            dict(
                name=name,
                id=int(pid),
                total=int(total),
                memory=memory,
                p2p=p2p,
                sm=sm,
                dec=dec,
                enc=enc,
                ce=ce,
                jpeg=jpeg,
                ofa=ofa,
                starts=starts,
                size=size,
            )
        )
    return out


def compute_of(name):
    return int(re.match(r"(\d)g\.", name).group(1))


def mig_state():
    return read_json(MIG_STATE)


def save_mig_state(state):
    os.makedirs(os.path.dirname(MIG_STATE), exist_ok=True)
    tmp = MIG_STATE + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(tmp, MIG_STATE)


def gpu_mig(state, index):
    return state.setdefault(str(index), {"mode": "Disabled", "pending": "Disabled", "gis": []})


def free_count(gpu, profile):
    """How many more instances of ``profile`` fit beside the GPU's instances (all of them with MIG
    off: a real H100 lists 7/7 for 1g.10gb before MIG is enabled)."""
    taken = [(gi["start"], gi["size"]) for gi in gpu["gis"]]
    compute = 7 - sum(compute_of(gi["name"]) for gi in gpu["gis"])
    if "+me" in profile["name"] and any("+me" in gi["name"] for gi in gpu["gis"]):
        return 0
    same = sum(1 for gi in gpu["gis"] if gi["profile_id"] == profile["id"])
    count = 0
    for start in profile["starts"]:
        if all(start + profile["size"] <= s or s + z <= start for s, z in taken):
            taken.append((start, profile["size"]))
            count += 1
    return max(0, min(count, profile["total"] - same, compute // compute_of(profile["name"])))


def targets(argv):
    """The GPUs and the indices of ``-i N[,M]`` (all GPUs without it); None for an index that does
    not exist, after printing what nvidia-smi prints then."""
    rows = gpus()
    if "-i" not in argv:
        return rows, list(range(len(rows)))
    wanted = [int(i) for i in argv[argv.index("-i") + 1].split(",")]
    if all(0 <= i < len(rows) for i in wanted):
        return rows, wanted
    sys.stdout.write("No devices were found\n")
    return rows, None


def busy_gpus():
    """The GPUs a process holds (faults.json "gpu_processes")."""
    return {int(p.get("gpu", 0)) for p in faults().get("gpu_processes", [])}


def take_mode(gpu, mode):
    """The GPU's MIG mode becomes ``mode``; with MIG off it has no instances."""
    gpu["mode"] = mode
    if mode == "Disabled":
        gpu["gis"] = []


def set_mig_mode(argv):
    value = argv[argv.index("-mig") + 1]
    if value not in ("0", "1"):
        sys.stderr.write("Invalid MIG mode: use 0 (disable) or 1 (enable)\n")
        return 2
    if not mig_profiles():
        sys.stdout.write("Unable to {} MIG Mode: Not Supported\n".format("enable" if value == "1" else "disable"))
        return 3
    rows, indices = targets(argv)
    if indices is None:
        return 6
    state = mig_state()
    busy = busy_gpus()
    mode = "Enabled" if value == "1" else "Disabled"
    for index in indices:
        gpu = gpu_mig(state, index)
        bus = rows[index]["pci.bus_id"]
        gpu["pending"] = mode
        if index in busy:
            sys.stdout.write(
                f"Warning: MIG mode is in pending {mode.lower().removesuffix('d')} state for GPU {bus}:"
                "In use by another client\n"
                f"{bus} is currently being used by one or more other processes (e.g. CUDA application or a "
                "monitoring application such as another instance of nvidia-smi). Please first kill all processes "
                "using the device and retry the command or reboot the system to make MIG mode effective.\n"
            )
            continue
        take_mode(gpu, mode)
        sys.stdout.write(f"{mode} MIG Mode for GPU {bus}\n")
    save_mig_state(state)
    sys.stdout.write("All done.\n")
    return 0


def gpu_reset(argv):
    """-r / --gpu-reset: a pending MIG mode takes effect (refused while processes hold the GPU)."""
    rows, indices = targets(argv)
    if indices is None:
        return 6
    busy = busy_gpus()
    state = mig_state()
    for index in indices:
        bus = rows[index]["pci.bus_id"]
        if index in busy:
            sys.stdout.write(f"GPU {bus} is currently in use by another process.\n")
            return 255
        gpu = gpu_mig(state, index)
        take_mode(gpu, gpu["pending"])
        reset_recovery(index)
        sys.stdout.write(f"GPU {bus} was successfully reset.\n")
    save_mig_state(state)
    sys.stdout.write("All done.\n")
    return 0


def caps_node(gpu_minor, gi, ci=None):
    """Create /dev/nvidia-caps/nvidia-cap<N> for a GPU or compute instance, as the driver's
    nvidia-modprobe does (minors as in /proc/driver/nvidia-caps/mig-minors)."""
    minor = 3 + gpu_minor * 135 + gi * 9 + (0 if ci is None else 1 + ci)
    path = f"{DEV}/nvidia-caps/nvidia-cap{minor}"
    try:
        os.makedirs(f"{DEV}/nvidia-caps", exist_ok=True)
        if not os.path.exists(path):
            os.mknod(path, 0o444 | stat.S_IFCHR, os.makedev(CAPS_MAJOR, minor))
    except OSError:
        pass  # not root (the unit tests): the node is not needed to answer


def mig_enabled_indices(state, indices):
    return [i for i in indices if gpu_mig(state, i)["mode"] == "Enabled"]


def create_gpu_instances(argv, rows, indices, state):
    profiles = mig_profiles()
    wanted = argv[argv.index("-cgi") + 1].split(",")
    with_ci = "-C" in argv or "--default-compute-instance" in argv
    rc = 0
    for index in indices:
        gpu = gpu_mig(state, index)
        for asked in wanted:
            item = asked.strip().removeprefix("MIG ")
            found = [p for p in profiles if str(p["id"]) == item or p["name"] == item]
            if not found:
                sys.stdout.write(f"Unable to create a GPU instance on GPU {index:2d} using profile {item}: Not Found\n")
                rc = 2
                continue
            profile = found[0]
            start = None
            if free_count(gpu, profile) > 0:
                taken = [(gi["start"], gi["size"]) for gi in gpu["gis"]]
                # Half-GPU instances take the highest free start, the others the lowest: a real
                # H100 put 3g.40gb at 4:4 and 2g.20gb, 1g.10gb x 2 at 0:2, 2:1, 3:1 (NVIDIA/DCGM#138).
                starts = profile["starts"][::-1] if profile["size"] == 4 else profile["starts"]
                for candidate in starts:
                    if all(candidate + profile["size"] <= s or s + z <= candidate for s, z in taken):
                        start = candidate
                        break
            if start is None:
                sys.stdout.write(
                    f"Unable to create a GPU instance on GPU {index:2d} using profile {profile['id']}: "
                    "Insufficient Resources\n"
                )
                rc = 2
                continue
            used = {gi["id"] for gi in gpu["gis"]}
            gi_id = next(i for i in ID_POOLS[profile["size"]] if i not in used)
            gi = {
                "id": gi_id,
                "profile_id": profile["id"],
                "name": profile["name"],
                "start": start,
                "size": profile["size"],
                "cis": [],
            }
            gpu["gis"].append(gi)
            minor = int(rows[index]["minor_number"])
            caps_node(minor, gi_id)
            sys.stdout.write(
                f"Successfully created GPU instance ID {gi_id:2d} on GPU {index:2d} using profile "
                f"MIG {profile['name']} (ID {profile['id']:2d})\n"
            )
            if with_ci:
                g = compute_of(profile["name"])
                ci_profile = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[g]
                gi["cis"].append({"id": 0, "profile_id": ci_profile, "start": 0, "size": g})
                caps_node(minor, gi_id, 0)
                sys.stdout.write(
                    f"Successfully created compute instance ID  0 on GPU {index:2d} GPU instance ID {gi_id:2d} "
                    f"using profile MIG {profile['name'].split('+')[0]} (ID {ci_profile:2d})\n"
                )
    return rc


def destroy(argv, indices, state, what):
    only = None
    if "-gi" in argv:
        only = {int(i) for i in argv[argv.index("-gi") + 1].split(",")}
    done = 0
    for index in indices:
        gpu = gpu_mig(state, index)
        for gi in list(gpu["gis"]):
            if only is not None and gi["id"] not in only:
                continue
            if what == "ci":
                for ci in gi["cis"]:
                    sys.stdout.write(
                        f"Successfully destroyed compute instance ID {ci['id']:2d} from GPU {index:2d} "
                        f"GPU instance ID {gi['id']:2d}\n"
                    )
                    done += 1
                gi["cis"] = []
            elif gi["cis"]:
                sys.stdout.write(
                    f"Unable to destroy GPU instance ID {gi['id']:2d} from GPU {index:2d}: In use by another client\n"
                )
                return 2
            else:
                gpu["gis"].remove(gi)
                sys.stdout.write(f"Successfully destroyed GPU instance ID {gi['id']:2d} from GPU {index:2d}\n")
                done += 1
    if not done:
        sys.stdout.write(
            "No compute instances found: Not Found\n" if what == "ci" else "No GPU instances found: Not Found\n"
        )
        return 6
    return 0


def border(width):
    return "+" + "-" * width + "+\n"


def list_profiles(indices, state, placements):
    profiles = mig_profiles()
    if not profiles:
        sys.stdout.write("No MIG-capable devices found.\n")
        return 6
    if placements:
        for index in indices:
            for p in profiles:
                word = "Placements" if len(p["starts"]) > 1 else "Placement "
                starts = ",".join(str(s) for s in p["starts"])
                sys.stdout.write(f"GPU {index:2d} Profile ID {p['id']:2d} {word}: {{{starts}}}:{p['size']}\n")
        return 0
    width = 79
    out = border(width)
    out += "| GPU instance profiles:" + " " * 56 + "|\n"
    out += "| GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  |\n"
    out += "|                                Free/Total   GiB              CE    JPEG  OFA  |\n"
    out += "|" + "=" * width + "|\n"
    for index in indices:
        gpu = gpu_mig(state, index)
        for p in profiles:
            free = free_count(gpu, p)
            first = (
                f"| {index:3d}  MIG {p['name']:<16}{p['id']:>2}     {str(free) + '/' + str(p['total']):<11}"
                f"{p['memory']:<11}{p['p2p']:<7}{p['sm']:<7}{p['dec']:<6}{p['enc']:<4}"
            )
            second = f"|{' ' * 63}{p['ce']:<6}{p['jpeg']:<6}{p['ofa']:<4}"
            out += first.ljust(width + 1) + "|\n" + second.ljust(width + 1) + "|\n" + border(width)
    sys.stdout.write(out)
    return 0


def list_instances(indices, state, compute):
    enabled = mig_enabled_indices(state, indices)
    if not enabled:
        sys.stdout.write("No MIG-enabled devices found.\n")
        return 6
    rows = []
    for index in enabled:
        for gi in sorted(gpu_mig(state, index)["gis"], key=lambda g: g["start"]):
            if not compute:
                rows.append(
                    f"| {index:3d}  MIG {gi['name']:<16}{gi['profile_id']:>2}{gi['id']:>9}"
                    f"{gi['start']:>11}:{gi['size']:<5}"
                )
            for ci in gi["cis"] if compute else []:
                rows.append(
                    f"| {index:3d}{gi['id']:>7}       MIG {gi['name'].split('+')[0]:<16}{ci['profile_id']:>2}"
                    f"{ci['id']:>10}{ci['start']:>11}:{ci['size']:<5}"
                )
    if not rows:
        sys.stdout.write(
            "No compute instances found: Not Found\n" if compute else "No GPU instances found: Not Found\n"
        )
        return 6
    width = 68 if compute else 57
    out = border(width)
    if compute:
        out += "| Compute instances:".ljust(width + 1) + "|\n"
        out += "| GPU     GPU       Name             Profile   Instance   Placement  |\n"
        out += "|       Instance                       ID        ID       Start:Size |\n"
        out += "|         ID                                                         |\n"
    else:
        out += "| GPU instances:".ljust(width + 1) + "|\n"
        out += "| GPU   Name               Profile  Instance   Placement  |\n"
        out += "|                            ID       ID       Start:Size |\n"
    out += "|" + "=" * width + "|\n"
    for row in rows:
        out += row.ljust(width + 1) + "|\n" + border(width)
    sys.stdout.write(out)
    return 0


def mig(argv):
    rows, indices = targets(argv)
    if indices is None:
        return 6
    state = mig_state()
    flags = set(argv)
    listings = {
        ("-lgip", "--list-gpu-instance-profiles"): lambda: list_profiles(indices, state, placements=False),
        ("-lgipp", "--list-gpu-instance-possible-placements"): lambda: list_profiles(indices, state, placements=True),
        ("-lgi", "--list-gpu-instances"): lambda: list_instances(indices, state, compute=False),
        ("-lci", "--list-compute-instances"): lambda: list_instances(indices, state, compute=True),
    }
    for names, listing in listings.items():
        if flags & set(names):
            return listing()
    enabled = mig_enabled_indices(state, indices)
    if not enabled:
        sys.stdout.write("No MIG-enabled devices found.\n")
        return 6
    if "-cgi" in flags:
        rc = create_gpu_instances(argv, rows, enabled, state)
    elif "-dci" in flags:
        rc = destroy(argv, enabled, state, "ci")
    elif "-dgi" in flags:
        rc = destroy(argv, enabled, state, "gi")
    else:
        sys.stderr.write("gpusim nvidia-smi: mig arguments not simulated: {}\n".format(" ".join(argv)))
        return 2
    save_mig_state(state)
    return rc


def mig_xml(text):
    """Each GPU's MIG mode and MIG devices from the state, in its <gpu> element."""
    state = mig_state()
    if not state:
        return text
    parts = text.split("<gpu id=")
    for index in range(len(parts) - 1):
        gpu = state.get(str(index))
        if not gpu:
            continue
        part = parts[index + 1]
        part = re.sub(r"<current_mig>[^<]*<", "<current_mig>{}<".format(gpu["mode"]), part, count=1)
        part = re.sub(r"<pending_mig>[^<]*<", "<pending_mig>{}<".format(gpu["pending"]), part, count=1)
        devices = []
        for gi in sorted(gpu["gis"], key=lambda g: g["start"]):
            for ci in gi["cis"]:
                devices.append(
                    "\t\t\t<mig_device>\n\t\t\t\t<index>{}</index>\n\t\t\t\t<gpu_instance_id>{}</gpu_instance_id>\n"
                    "\t\t\t\t<compute_instance_id>{}</compute_instance_id>\n\t\t\t</mig_device>\n".format(
                        len(devices), gi["id"], ci["id"]
                    )
                )
        body = "\n" + "".join(devices) + "\t\t" if devices else "None"
        start, end = part.find("<mig_devices>"), part.find("</mig_devices>")
        if 0 <= start < end:
            part = part[:start] + f"<mig_devices>{body}" + part[end:]
        parts[index + 1] = part
    return "<gpu id=".join(parts)


def mig_devices_list(index, state):
    """The -L lines of a GPU's MIG devices, each with a UUID made of its GPU, GPU and compute instance."""
    gpu = state.get(str(index)) or {}
    if gpu.get("mode") != "Enabled":
        return []
    out = []
    for gi in sorted(gpu["gis"], key=lambda g: g["start"]):
        for ci in gi["cis"]:
            digest = "{:08x}{:08x}{:08x}{:08x}".format(index, gi["id"], ci["id"], gi["start"])
            uuid = f"MIG-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:]}"
            out.append("  MIG {:<12} Device {:2d}: (UUID: {})".format(gi["name"], len(out), uuid))
    return out


def query_gpu(argv):
    fmt = [a for a in argv[1:] if a.startswith("--format=")]
    if len(argv) != 2 or not fmt:
        sys.stderr.write("gpusim nvidia-smi: use --query-gpu=FIELDS --format=csv[,noheader][,nounits]\n")
        return 2
    return query(argv[0].split("=", 1)[1].split(","), fmt[0].split("=", 1)[1])


def version():
    read("profile.json")
    nvml = DRIVER_VERSION.rsplit(".", 1)[0]
    sys.stdout.write(
        f"NVIDIA-SMI version  : {DRIVER_VERSION}\nNVML version        : {nvml}\n"
        f"DRIVER version      : {DRIVER_VERSION}\nCUDA Version        : {CUDA_VERSION}\n"
    )


def mig_command(argv):
    """The exit code of a MIG command (mig ..., -mig, -r), or None for another command."""
    if argv[:1] == ["mig"]:
        return mig(argv[1:])
    if "-mig" in argv or "--multi-instance-gpu" in argv:
        return set_mig_mode(["-mig" if a == "--multi-instance-gpu" else a for a in argv])
    if argv[:1] in (["-r"], ["--gpu-reset"]) or argv[-1:] in (["-r"], ["--gpu-reset"]):
        return gpu_reset(argv)
    return None


def main(argv):
    rc = mig_command(argv)
    if rc is not None:
        return rc
    if argv in (["-q", "-x"], ["-x", "-q"], ["--query", "--xml-format"]):
        sys.stdout.write(xml_text())
    elif argv in (["topo", "-m"], ["topo", "--matrix"]):
        sys.stdout.write(read("nvidia-smi-topo-m.txt"))
    elif argv[:1] == ["nvlink"] and len(argv) > 1 and argv[1] in ("-s", "--status"):
        return nvlink_status(argv)
    elif argv == ["-L"]:
        state = mig_state()
        for gpu in gpus():
            sys.stdout.write("GPU {}: {} (UUID: {})\n".format(gpu["index"], gpu["name"], gpu["uuid"]))
            for line in mig_devices_list(int(gpu["index"]), state):
                sys.stdout.write(line + "\n")
    elif argv == ["--version"]:
        version()
    elif argv and argv[0].startswith("--query-compute-apps="):
        return compute_apps(argv)
    elif argv and argv[0].startswith("--query-gpu="):
        return query_gpu(argv)
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
