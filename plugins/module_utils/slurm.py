# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm node description from the hardware facts: the slurm.conf node line and gres.conf.

Pure functions; the slurm role calls them through the ``slurm_node_spec`` and ``slurm_node_groups``
filters, the unit tests call them directly.

Slurm counts cores, not CPUs, in ``gres.conf`` ``Cores=``: "Core 0 will be the first core on the
first socket, while core 1 will be the second core on the first socket" (gres.conf(5)), the
logical core numbering of hwloc (``lstopo -l``). ``nvidia-smi topo -m`` gives a GPU's CPU affinity
as kernel CPU numbers, hyperthreads included. The conversion reads ``lscpu -p=CPU,CORE,SOCKET,NODE``
(which CPU sits on which core of which socket), numbers the sockets in order, numbers the cores of
each socket by their lowest CPU (the order hwloc gives them), so that core ``k`` of the ``s``-th
socket is index ``s * CoresPerSocket + k``, then maps every CPU of the affinity to its core.
On a DGX H100 (2 x 56 cores, CPUs 0-55 and 112-167 on socket 0) the affinity ``0-55,112-167``
becomes ``Cores=0-55``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ansible_collections.gpuops.cluster.plugins.module_utils import mig
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError, text_lines
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import hostlist_compress
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm_topology import domains
from ansible_collections.gpuops.cluster.plugins.module_utils.topology import link_count

LSCPU_COMMAND = "lscpu -p=CPU,CORE,SOCKET,NODE"
_COLUMNS = ("cpu", "core", "socket", "node")


class SlurmSpecError(ValueError):
    """Facts from which no consistent Slurm node description can be written."""


def number_list(numbers):
    """Sorted integers as Slurm and the kernel write them: ``0-55,112-167``."""
    values = sorted(set(numbers))
    if not values:
        return ""
    out, start, prev = [], values[0], values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = value
    out.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(out)


def _int_or_none(text, name, number, line):
    text = text.strip()
    if text == "":
        return None
    if not (text.isascii() and text.isdigit()):
        raise ParseError(f"the {name} column holds {text!r}, not a number", "lscpu -p", number, line)
    return int(text)


def parse_lscpu(text):
    """Rows of ``lscpu -p`` (any column set that has CPU, Core and Socket), as dicts.

    The column names come from the last comment line (``# CPU,Core,Socket,Node,,L1d,...``); other
    columns are ignored. Empty cells (no topology known) read as None.
    """
    header, rows, seen = None, [], set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            names = [name.strip().lower() for name in line.lstrip("#").split(",")]
            if names and names[0] == "cpu":
                header = names
            continue
        if header is None:
            raise ParseError("a data line comes before the '# CPU,Core,Socket,...' header", "lscpu -p", number, line)
        missing = [name for name in _COLUMNS[:3] if name not in header]
        if missing:
            raise ParseError(
                "the header has no {} column; run {}".format("/".join(missing), LSCPU_COMMAND),
                "lscpu -p",
                number,
                line,
            )
        cells = line.split(",")
        if len(cells) < 3:
            raise ParseError("too few columns", "lscpu -p", number, line)
        row = {}
        for name in _COLUMNS:
            if name in header:
                position = header.index(name)
                row[name] = _int_or_none(cells[position], name, number, line) if position < len(cells) else None
            else:
                row[name] = None
        if row["cpu"] is None:
            raise ParseError("the CPU column is empty", "lscpu -p", number, line)
        if row["cpu"] in seen:
            raise ParseError(f"CPU {row['cpu']} is listed twice", "lscpu -p", number, line)
        seen.add(row["cpu"])
        rows.append(row)
    if not rows:
        raise ParseError("no CPU lines", "lscpu -p")
    return rows


def cpu_topology(rows):
    """Sockets, cores and threads as slurm.conf counts them, and each CPU's Slurm core index."""
    cores = {}
    for row in rows:
        socket = row["socket"] if row["socket"] is not None else 0
        core = row["core"] if row["core"] is not None else row["cpu"]
        cores.setdefault((socket, core), []).append(row["cpu"])
    sockets = sorted({socket for socket, _core in cores})
    per_socket = {socket: sorted(cpus for (s, _c), cpus in cores.items() if s == socket) for socket in sockets}
    counts = sorted({len(groups) for groups in per_socket.values()})
    if len(counts) != 1:
        raise SlurmSpecError(
            "the sockets have different core counts ({}); slurm.conf describes a node with one "
            "CoresPerSocket value. Set slurm_node_overrides for this host.".format(
                ", ".join(f"socket {s}: {len(per_socket[s])}" for s in sockets)
            )
        )
    threads = sorted({len(cpus) for cpus in cores.values()})
    if len(threads) != 1:
        raise SlurmSpecError(
            "the cores have different thread counts ({}), as on CPUs with two core types; "
            "slurm.conf describes a node with one ThreadsPerCore value. Set slurm_node_overrides "
            "for this host.".format(", ".join(str(t) for t in threads))
        )
    cores_per_socket = counts[0]
    core_index = {}
    for position, socket in enumerate(sockets):
        for offset, cpus in enumerate(sorted(per_socket[socket], key=min)):
            for cpu in cpus:
                core_index[cpu] = position * cores_per_socket + offset
    return {
        "cpus": len(rows),
        "boards": 1,
        "sockets_per_board": len(sockets),
        "cores_per_socket": cores_per_socket,
        "threads_per_core": threads[0],
        "core_index": core_index,
    }


def gpu_cores(cpus, topology, label="GPU"):
    """Slurm core indices of the CPUs in a GPU's affinity."""
    unknown = sorted(cpu for cpu in cpus if cpu not in topology["core_index"])
    if unknown:
        raise SlurmSpecError(
            f"{label} has CPU affinity {number_list(cpus)} but lscpu shows no CPU {number_list(unknown)}; the "
            "facts come from different hosts or CPUs are offline. Re-gather the facts on this host."
        )
    return sorted({topology["core_index"][cpu] for cpu in cpus})


def _bus_key(gpu):
    return str(gpu.get("pci_bus_id") or "").lower()


def mig_type(gres_type, profile):
    """The gres type of a MIG device: the GPU's type and the profile (h100_1g.10gb, as SchedMD's
    gres.conf page writes a100_3g.20gb); a '+' (1g.10gb+me) becomes '_', which Gres= lines take."""
    return "{}_{}".format(gres_type, profile.replace("+", "_"))


def mig_devices(gpu, label, gres_type):
    """One record per MIG device (compute instance) of a GPU in MIG mode, in placement order:
    the GPU's device file with the nvidia-caps files of its GPU and compute instance
    (MultipleFiles=), typed by the instance's profile."""
    instances = gpu.get("mig_instances")
    if instances is None:
        raise SlurmSpecError(
            f"{label} ({gpu.get('pci_bus_id')}) is in MIG mode but its GPU instances were not read (gpu_facts "
            "with mig: false, or nvidia-smi mig -lgi failed): read the facts again with mig: true."
        )
    minor = gpu["minor_number"]
    devices = []
    for instance in sorted(instances, key=lambda i: ((i.get("placement") or {}).get("start", 0), i["id"])):
        computes = instance.get("compute_instances") or []
        for compute in computes:
            # One compute instance takes the whole GPU instance (its profile); several split it (1c.2g.10gb).
            profile = instance["profile"] if len(computes) == 1 else compute["profile"]
            caps = "/dev/nvidia-caps/nvidia-cap{}"
            devices.append(
                {
                    "files": ",".join(
                        [
                            f"/dev/nvidia{minor}",
                            caps.format(mig.caps_minor(minor, instance["id"])),
                            caps.format(mig.caps_minor(minor, instance["id"], compute["id"])),
                        ]
                    ),
                    "type": mig_type(gres_type, profile),
                }
            )
    return devices


def gres_devices(nvidia_gpu, topology, gres_type):
    """One gres.conf record per GPU, in PCI bus order (Slurm's device numbering); a GPU in MIG mode
    gives one record per MIG device instead (``files``: MultipleFiles=, its type the profile's).

    ``cores`` is omitted when the affinity is unknown or spans every core (gres.conf(5): then
    Cores= only slows the scheduler); ``links`` is given only where some GPUs share NVLinks, and
    none is given on a node with a GPU in MIG mode (MIG devices have no NVLink peers, and Links=
    counts across every record of the node).
    """
    gpus = sorted(nvidia_gpu.get("gpus") or [], key=_bus_key)
    links = (nvidia_gpu.get("topology") or {}).get("links") or {}
    all_cores = set(range(topology["sockets_per_board"] * topology["cores_per_socket"]))
    labels = [f"GPU{gpu['index']}" for gpu in gpus]
    any_mig = any(gpu.get("mig_mode") == "enabled" for gpu in gpus)
    any_nvlink = not any_mig and any(
        link_count((links.get(a) or {}).get(b)) > 0 for a in labels for b in labels if a != b
    )
    devices = []
    for gpu, label in zip(gpus, labels):
        if gpu.get("minor_number") is None:
            raise SlurmSpecError(
                f"{label} ({gpu.get('pci_bus_id')}) has no minor number in the facts: the driver is not "
                "loaded. Install the driver first, or set slurm_gres_autodetect: nvml."
            )
        affinity = gpu.get("cpu_affinity") or []
        cores = gpu_cores(affinity, topology, label) if affinity else []
        if gpu.get("mig_mode") == "enabled":
            for device in mig_devices(gpu, label, gres_type):
                if cores and set(cores) != all_cores:
                    device["cores"] = number_list(cores)
                devices.append(device)
            continue
        device = {"file": f"/dev/nvidia{gpu['minor_number']}", "type": gres_type}
        if cores and set(cores) != all_cores:
            device["cores"] = number_list(cores)
        if any_nvlink:
            row = links.get(label) or {}
            device["links"] = ",".join(
                "-1" if other == label else str(max(link_count(row.get(other)), 0)) for other in labels
            )
        devices.append(device)
    return devices


def real_memory(memtotal_mib, reserve_percent, reserve_min_mib):
    """RealMemory: the node's memory less what the OS, the daemons and the page cache keep."""
    memtotal_mib = int(memtotal_mib)
    reserve = max(int(memtotal_mib * float(reserve_percent) / 100), int(reserve_min_mib))
    if reserve >= memtotal_mib:
        raise SlurmSpecError(
            f"the memory headroom ({reserve} MiB) is not below the node's memory ({memtotal_mib} MiB); "
            "lower slurm_memory_reserve_percent or slurm_memory_reserve_min_mib."
        )
    return memtotal_mib - reserve


def node_spec(lscpu_text, nvidia_gpu, memtotal_mib, *, reserve_percent=5, reserve_min_mib=1024, gres_type=None):
    """Everything slurm.conf and gres.conf say about one node."""
    topology = cpu_topology(parse_lscpu(lscpu_text))
    nvidia_gpu = nvidia_gpu or {}
    spec = {
        "cpus": topology["cpus"],
        "boards": topology["boards"],
        "sockets_per_board": topology["sockets_per_board"],
        "cores_per_socket": topology["cores_per_socket"],
        "threads_per_core": topology["threads_per_core"],
        "real_memory": real_memory(memtotal_mib, reserve_percent, reserve_min_mib),
        "gres": "",
        "gres_devices": [],
        "gpus": 0,
    }
    count = int(nvidia_gpu.get("count") or 0)
    if nvidia_gpu.get("present") and count:
        gres_type = gres_type or nvidia_gpu.get("slug")
        if not gres_type or not str(gres_type).replace("_", "").replace("-", "").isalnum():
            raise SlurmSpecError(
                f"the GPU type {gres_type!r} cannot be a gres type; set slurm_gres_type (letters, digits, - and _)."
            )
        spec["gres_devices"] = gres_devices(nvidia_gpu, topology, gres_type)
        counts = {}
        for device in spec["gres_devices"]:
            counts[device["type"]] = counts.get(device["type"], 0) + 1
        spec["gres"] = ",".join(f"gpu:{kind}:{n}" for kind, n in counts.items())
        spec["gpus"] = count
    return spec


def plain_data(value):
    """A copy of ``value`` as plain dicts, lists, strings and numbers. A filter gets its argument as
    the templating engine's lazy containers, which render a value each time it is read: comparing
    descriptions read each of their values again per comparison (at 1,000 nodes, 250,000 reads and
    6 s). The copy reads each value once."""
    if isinstance(value, Mapping):
        return {str(key): plain_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    # A tagged str, int or float as its plain type (the tags mark where a value came from).
    for kind in (str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value


def group_nodes(specs):
    """Hosts with equal descriptions on one line: [{"nodes": "gpu[01-08]", "spec": {...}}, ...], the
    hosts grouped by their description's canonical JSON (one pass, however many groups)."""
    groups = {}
    for host in sorted(specs):
        key = json.dumps(specs[host], sort_keys=True, default=str)
        groups.setdefault(key, {"hosts": [], "spec": specs[host]})["hosts"].append(host)
    return sorted(
        ({"nodes": hostlist_compress(group["hosts"]), "spec": group["spec"]} for group in groups.values()),
        key=lambda group: group["nodes"],
    )


def node_lines(nodes):
    """What slurm.conf and gres.conf say of the compute nodes, from the fleet state's slurm section
    (inventory name -> ``{"hostname", "spec", ...}``), worked out once in Python so that the
    templates walk a few groups instead of every node: ``groups`` (see :func:`group_nodes`, by the
    nodes' host names), ``gpu_types`` (the ``gres/gpu:<type>`` names of AccountingStorageTRES,
    sorted), ``hostnames`` (inventory name -> host name, for the partitions), ``domains`` (the
    multi-node NVLink domains, :func:`slurm_topology.domains`, for topology.conf) and ``ib_leaves``
    (inventory name -> ``{guid: description}`` of the leaf switches its InfiniBand ports link to,
    where they were read)."""
    nodes = plain_data(nodes)
    specs = {data["hostname"]: data["spec"] for data in nodes.values()}
    types = set()
    for spec in specs.values():
        for gres in str(spec.get("gres") or "").split(","):
            name, sep, rest = gres.partition(":")
            kind, sep2, _count = rest.partition(":")
            if name == "gpu" and sep and sep2 and kind:
                types.add(f"gres/gpu:{kind}")
    return {
        "groups": group_nodes(specs),
        "gpu_types": sorted(types),
        "hostnames": {node: data["hostname"] for node, data in nodes.items()},
        "domains": domains(nodes),
        # The leaf switches each node's InfiniBand ports link to (the slurm role's discovery).
        "ib_leaves": {
            node: {leaf["guid"]: leaf["description"] for leaf in data["ib_leaves"]}
            for node, data in sorted(nodes.items())
            if data.get("ib_leaves")
        },
    }


SLURMD_C_COMMAND = "slurmd -C"
_SLURMD_INT_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
_SLURMD_KEYS = ("NodeName", *_SLURMD_INT_KEYS, "Gres")


def parse_slurmd_config(text):
    """Parse ``slurmd -C``: the NodeName line's keys (``NodeName``, ``CPUs``, ``Boards``,
    ``SocketsPerBoard``, ``CoresPerSocket``, ``ThreadsPerCore``, ``RealMemory`` as ints, ``Gres``
    as a string or None). Other lines (``UpTime=``, ``Found gpu:...``) are ignored.
    """
    found = None
    for number, line in enumerate(text_lines(text, SLURMD_C_COMMAND), 1):
        words = line.split()
        if not words or not words[0].startswith("NodeName="):
            continue
        if found is not None:
            raise ParseError("a second NodeName line", SLURMD_C_COMMAND, number, line)
        values = {}
        for word in words:
            key, sep, value = word.partition("=")
            if not sep or not key:
                raise ParseError(f"{word!r} is not Key=Value", SLURMD_C_COMMAND, number, line)
            if key in _SLURMD_INT_KEYS:
                if not value.isascii() or not value.isdigit():
                    raise ParseError(f"{key} is not a number: {value!r}", SLURMD_C_COMMAND, number, line)
                values[key] = int(value)
            else:
                values[key] = value
        found = {key: values.get(key) for key in _SLURMD_KEYS}
        missing = [key for key in ("CPUs", "RealMemory") if found[key] is None]
        if missing:
            raise ParseError("the NodeName line has no " + " or ".join(missing), SLURMD_C_COMMAND, number, line)
    if found is None:
        raise ParseError("no NodeName= line; is slurmd installed?", SLURMD_C_COMMAND)
    return found


def compare_node(declared, measured, headroom_mib=0):
    """Differences between the node line we generated (``declared``: the keys of
    :func:`parse_slurmd_config`) and what ``slurmd -C`` measures, as a list of
    ``{"key", "declared", "measured"}``. Every count must match. ``RealMemory`` must not promise
    more than the node has, nor less than the node's memory minus ``headroom_mib`` (the headroom
    :func:`real_memory` subtracts) and 1 % for what the kernel reports differently."""
    differences = []
    for key in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore"):
        if declared.get(key) is not None and measured.get(key) is not None and declared[key] != measured[key]:
            differences.append({"key": key, "declared": declared[key], "measured": measured[key]})
    real, have = declared.get("RealMemory"), measured.get("RealMemory")
    if real is not None and have is not None:
        floor = have - int(headroom_mib) - max(64, have // 100)
        if real > have or real < floor:
            differences.append({"key": "RealMemory", "declared": real, "measured": have})
    return differences


# QOS: sacctmgr's parsable listing of the fields the workload tiers set, and the changes to it.
QOS_FIELDS = ("Name", "Priority", "Preempt", "PreemptMode", "GraceTime")
QOS_COMMAND = "sacctmgr --noheader --parsable2 show qos format=" + ",".join(QOS_FIELDS)


def seconds(text):
    """sacctmgr's time ('00:01:05', '1-00:00:00', '05:00') in seconds; None when it is none."""
    text = text.strip()
    days, _dash, clock = text.rpartition("-")
    parts = clock.split(":")
    # ASCII digits only: str.isdigit() takes "²", which int() refuses.
    digits = [*parts, days] if days else parts
    if not text or not 1 <= len(parts) <= 3 or not all(p.isascii() and p.isdigit() for p in digits):
        return None
    total = 0
    for part in parts:
        total = total * 60 + int(part)
    return total + int(days or 0) * 86400


def parse_qos(text):
    """``sacctmgr --noheader --parsable2 show qos format=Name,Priority,Preempt,PreemptMode,GraceTime``
    -> ``{name: {"priority", "preempt" (sorted names), "preempt_mode", "grace_time"}}``."""
    out = {}
    for number, line in enumerate(text_lines(text, QOS_COMMAND), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != len(QOS_FIELDS):
            raise ParseError(f"expected {len(QOS_FIELDS)} fields ({', '.join(QOS_FIELDS)})", QOS_COMMAND, number, line)
        name, prio, preempt, mode, grace = fields
        grace_time = seconds(grace) if grace else 0
        if not name or not (prio.strip().isascii() and prio.strip().isdigit()) or grace_time is None:
            raise ParseError("expected a name, a whole-number priority and a time", QOS_COMMAND, number, line)
        out[name] = {
            "priority": int(prio),
            "preempt": sorted(p for p in preempt.split(",") if p),
            "preempt_mode": mode.strip().lower() or "cluster",
            "grace_time": grace_time,
        }
    return out


def qos_changes(wanted, current):
    """What brings the QOS to ``wanted`` (slurm_qos of the workload tiers): ``[{"name", "action":
    "add"|"modify", "before", "after"}]``. QOS that are not wanted are left alone."""
    out = []
    for qos in wanted:
        after = {k: qos[k] for k in ("priority", "preempt", "preempt_mode", "grace_time")}
        after["preempt"] = sorted(after["preempt"])
        before = current.get(qos["name"])
        if before != after:
            out.append(
                {"name": qos["name"], "action": "add" if before is None else "modify", "before": before, "after": after}
            )
    return out


def qos_set_args(change, sacctmgr="sacctmgr"):
    """The ``sacctmgr -i modify qos`` arguments of one change."""
    after = change["after"]
    return [
        sacctmgr,
        "-i",
        "modify",
        "qos",
        "where",
        f"name={change['name']}",
        "set",
        f"Priority={after['priority']}",
        "Preempt=" + ",".join(after["preempt"]),
        f"PreemptMode={after['preempt_mode']}",
        f"GraceTime={after['grace_time']}",
    ]
