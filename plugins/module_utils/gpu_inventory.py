# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Merge what lspci, ``nvidia-smi -q -x`` and ``nvidia-smi topo -m`` say into the ``nvidia_gpu`` facts.

Pure: the module runs the commands and hands the parsed results (and a reader for sysfs) here.
"""

from __future__ import annotations

from collections import Counter

from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import expand_cpulist, nearest_nics
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import identify_gpu, normalize_bus_id, slugify
from ansible_collections.gpuops.cluster.plugins.module_utils.topology import nvlinks

_ARCHITECTURES = {
    "volta": "volta",
    "turing": "turing",
    "ampere": "ampere",
    "ada lovelace": "ada",
    "ada": "ada",
    "hopper": "hopper",
    "blackwell": "blackwell",
}
# Where the architecture alone fixes the compute capability (Ampere and Blackwell have several).
_ONLY_CAPABILITY = {"volta": "7.0", "turing": "7.5", "ada": "8.9", "hopper": "9.0"}


def _no_sysfs(_path):
    return None


def _sysfs_numa(read, bus_id):
    text = read(f"bus/pci/devices/{bus_id}/numa_node")
    if text is None or not text.strip().lstrip("-").isdigit():
        return None
    node = int(text.strip())
    return node if node >= 0 else None


def _sysfs_cpus(read, bus_id):
    text = read(f"bus/pci/devices/{bus_id}/local_cpulist")
    if text is None:
        return None
    try:
        return expand_cpulist(text.strip(), "sysfs local_cpulist")
    except ValueError:
        return None


def _from_query(gpu, pci_by_bus):
    bus_id = normalize_bus_id(gpu["pci_bus_id"])
    pci_device = pci_by_bus.get(bus_id, {})
    known = identify_gpu(gpu["pci_device_id"] or pci_device.get("device_id"), pci_device.get("device_name"))
    architecture = known["architecture"]
    if architecture is None and gpu["architecture"]:
        architecture = _ARCHITECTURES.get(gpu["architecture"].lower(), gpu["architecture"].lower())
    capability = known["compute_capability"] or _ONLY_CAPABILITY.get(architecture)
    # A GPU the table does not know is named by the driver's product name.
    slug = known["slug"] if known["known"] else (slugify(gpu["name"]) or known["slug"])
    return {
        "index": gpu["index"],
        "uuid": gpu["uuid"],
        # The board's serial: what follows a GPU moved to another slot or node (its fault history).
        "serial": gpu.get("serial"),
        "name": gpu["name"],
        "pci_bus_id": bus_id,
        "pci_device_id": gpu["pci_device_id"] or pci_device.get("device_id"),
        "minor_number": gpu["minor_number"],
        "memory_total_mib": gpu["memory_total_mib"],
        "mig_mode": gpu["mig_mode"],
        "mig_mode_pending": gpu["mig_mode_pending"],
        "mig_devices": gpu["mig_devices"],
        "virtualization_mode": gpu["virtualization_mode"],
        "persistence_mode": gpu["persistence_mode"],
        "vbios_version": gpu["vbios_version"],
        "module_id": gpu["module_id"],
        "pcie": gpu["pcie"],
        # Where the GPU slows down and shuts down (static; the current temperature is left out, so
        # that the facts do not change from one run to the next).
        "temperature_thresholds": {
            key: gpu["temperature"][key]
            for key in ("slowdown_c", "shutdown_c", "slowdown_tlimit_c", "shutdown_tlimit_c")
        },
        "slug": slug,
        "architecture": architecture,
        "compute_capability": capability,
        # Its NVLink fabric registration (state, status, clique and cluster), without the health,
        # which changes from one run to the next.
        "fabric": {key: gpu["fabric"][key] for key in ("state", "status", "clique_id", "cluster_uuid")},
    }


# A cluster UUID of zeros is no multi-node domain: GPUs whose NVLink stays in the node (HGX H100)
# report it, and so does a GB200 tray whose registration failed (state Completed, status
# Insufficient Resources, clique 0: Azure/azhpc-images#506; meta-pytorch/torchcomms#1385).
_NO_DOMAIN = {None, "", "00000000-0000-0000-0000-000000000000"}


def nvlink_domain(gpus):
    """The multi-node NVLink domain (an NVL72 rack's clique) the node's GPUs registered in, from each
    GPU's ``fabric``: None where no GPU names a cluster; else ``{"cluster_uuid", "clique_id",
    "gpus"}`` (the GPUs registered in it) and ``problem``: None when every GPU registered, with state
    Completed and status Success, in that one clique; else what differs, GPU by GPU."""
    named = [gpu for gpu in gpus if (gpu.get("fabric") or {}).get("cluster_uuid") not in _NO_DOMAIN]
    if not named:
        return None
    domains = {}
    for gpu in named:
        fabric = gpu["fabric"]
        domains.setdefault((fabric["cluster_uuid"], fabric["clique_id"]), []).append(gpu["index"])
    (cluster_uuid, clique_id), members = max(domains.items(), key=lambda item: (len(item[1]), str(item[0])))
    problems = []
    for gpu in gpus:
        fabric = gpu.get("fabric") or {}
        where = (fabric.get("cluster_uuid"), fabric.get("clique_id"))
        if gpu["index"] not in members:
            problems.append(f"GPU{gpu['index']} is in cluster {where[0]} clique {where[1]}")
        elif fabric.get("state") != "Completed" or fabric.get("status") != "Success":
            state, status = fabric.get("state") or "N/A", fabric.get("status") or "N/A"
            problems.append(f"GPU{gpu['index']} has fabric state {state}, status {status}")
    return {
        "cluster_uuid": cluster_uuid,
        "clique_id": clique_id,
        "gpus": members,
        "problem": (
            f"not every GPU is registered in cluster {cluster_uuid} clique {clique_id}: " + "; ".join(problems)
            if problems
            else None
        ),
    }


def _from_pci(index, device):
    return {
        "index": index,
        "uuid": None,
        "serial": None,
        "name": "NVIDIA {}".format(device["model"]) if device["model"] else None,
        "pci_bus_id": device["pci_bus_id"],
        "pci_device_id": device["device_id"],
        "minor_number": None,
        "memory_total_mib": None,
        "mig_mode": None,
        "mig_mode_pending": None,
        "mig_devices": 0,
        "virtualization_mode": None,
        "persistence_mode": None,
        "vbios_version": None,
        "module_id": None,
        "pcie": None,
        "temperature_thresholds": None,
        "slug": device["slug"],
        "architecture": device["architecture"],
        "compute_capability": device["compute_capability"],
        "fabric": None,
    }


def _mig_facts(gpu, mig):
    """A GPU's MIG profiles (``mig -lgip``) and its GPU instances (``-lgi``) each with its compute
    instances (``-lci``); None where the command was not run or did not answer."""
    index = gpu["index"]
    profiles = mig.get("profiles")
    gpu["mig_profiles"] = (
        None
        if profiles is None
        else [
            {key: row[key] for key in ("name", "id", "free", "total", "memory_gib")}
            for row in profiles
            if row["gpu"] == index
        ]
    )
    instances, compute = mig.get("instances"), mig.get("compute")
    if instances is None:
        gpu["mig_instances"] = None
        return
    gpu["mig_instances"] = [
        {
            "id": row["instance_id"],
            "profile": row["name"],
            "profile_id": row["profile_id"],
            "placement": row["placement"],
            "compute_instances": [
                {"id": ci["instance_id"], "profile": ci["name"], "profile_id": ci["profile_id"]}
                for ci in compute or []
                if ci["gpu"] == index and ci["gpu_instance_id"] == row["instance_id"]
            ],
        }
        for row in instances
        if row["gpu"] == index
    ]


def build_gpu_facts(pci, query=None, topology=None, read_sysfs=None, nvidia_smi_error=None, *, mig=None, machine=None):
    """The ``nvidia_gpu`` facts.

    ``pci`` is :func:`pci.classify` output (or None when lspci is missing), ``query`` the parsed
    ``nvidia-smi -q -x`` (None before the driver), ``topology`` the parsed ``topo -m`` (None when
    not run), ``read_sysfs(relative_path)`` returns a sysfs file's text or None, ``mig`` the parsed
    ``nvidia-smi mig -lgip``, ``-lgi`` and ``-lci`` (keys ``profiles``, ``instances``, ``compute``;
    a key left out or None where that command was not run).
    """
    read = read_sysfs or _no_sysfs
    pci_read = pci is not None
    pci = pci or {"gpus": [], "nvswitches": [], "hcas": []}
    pci_by_bus = {device["pci_bus_id"]: device for device in pci["gpus"]}
    driver_loaded = query is not None
    if driver_loaded:
        gpus = [_from_query(gpu, pci_by_bus) for gpu in query["gpus"]]
        source = "nvidia-smi"
    else:
        gpus = [_from_pci(index, device) for index, device in enumerate(pci["gpus"])]
        source = "lspci" if pci["gpus"] else None

    # A set: membership in the list made this loop cubic in the GPU count (512 GPUs took 1 s).
    topology_gpus = set(topology["gpus"]) if topology else set()
    for gpu in gpus:
        label = "GPU{}".format(gpu["index"])
        cpus = topology["cpu_affinity"].get(label) if topology else None
        numa = topology["numa_affinity"].get(label) if topology else None
        gpu["cpu_affinity"] = cpus if cpus is not None else _sysfs_cpus(read, gpu["pci_bus_id"])
        gpu["numa_node"] = numa if numa is not None else _sysfs_numa(read, gpu["pci_bus_id"])
        if topology and label in topology["links"]:
            gpu["nearest_nics"], gpu["nearest_nic_link"] = nearest_nics(topology, label)
            gpu["nvlink_peers"] = sum(
                1 for other, cell in topology["links"][label].items() if other in topology_gpus and nvlinks(cell) > 0
            )
        else:
            gpu["nearest_nics"], gpu["nearest_nic_link"], gpu["nvlink_peers"] = [], None, None
        _mig_facts(gpu, mig or {})

    first = gpus[0] if gpus else {}
    models = Counter((gpu["name"], gpu["slug"]) for gpu in gpus)
    return {
        "present": bool(gpus) or bool(pci["gpus"]),
        # False when lspci could not be run: "no GPU" then means "not looked for on PCI".
        "pci_read": pci_read,
        "source": source,
        "driver_loaded": driver_loaded,
        "driver_version": query["driver_version"] if query else None,
        "cuda_version": query["cuda_version"] if query else None,
        "nvidia_smi_error": nvidia_smi_error,
        "count": len(gpus),
        "pci_gpu_count": len(pci["gpus"]),
        "product": first.get("name"),
        "slug": first.get("slug"),
        "architecture": first.get("architecture"),
        "compute_capability": first.get("compute_capability"),
        "heterogeneous": len(models) > 1,
        "models": [
            {"product": name, "slug": slug, "count": count} for (name, slug), count in sorted(models.items(), key=str)
        ],
        "mig_enabled": any(gpu["mig_mode"] == "enabled" for gpu in gpus),
        "mig_capable": any(gpu["mig_mode"] is not None for gpu in gpus),
        "mig_pending": any(
            gpu["mig_mode_pending"] is not None and gpu["mig_mode_pending"] != gpu["mig_mode"] for gpu in gpus
        ),
        "nvlink_domain": nvlink_domain(gpus),
        # The host's CPU architecture as the kernel names it (x86_64, aarch64 on Grace).
        "host_architecture": machine,
        "nvswitch_count": len(pci["nvswitches"]),
        "nvswitches": [device["pci_bus_id"] for device in pci["nvswitches"]],
        "hca_pci": [
            {
                "pci_bus_id": device["pci_bus_id"],
                "device_id": device["device_id"],
                "model": device["model"],
                "virtual_function": device["virtual_function"],
            }
            for device in pci["hcas"]
        ],
        "gpus": gpus,
        "topology": {"links": topology["links"] if topology else {}, "nics": topology["nics"] if topology else []},
    }
