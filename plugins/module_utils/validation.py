# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a healthy node measures, derived from its hardware facts, and the verdict on what it did.

Every check is a record ``{"check", "subject", "expected", "measured", "verdict", "reason"}``:
``verdict`` is ``pass``, ``fail``, ``warn`` (worth a look, does not drain) or ``skip`` (not
measured here, and ``reason`` says why). Expected values come from the facts modules (PCI
enumeration, the GPU's architecture, NVSwitches on the bus, the HCAs' own rates) and from the
published figures below, each with its source; ``validate_thresholds`` overrides any of them.

Pure functions: the node_health module reads the node and calls :func:`node_checks`; the
validation_report module calls :func:`firmware_checks` and :func:`nccl_check` on the controller.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils import compat
from ansible_collections.gpuops.cluster.plugins.module_utils.nccl_tests import largest, reached_max, wrong_rows
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import normalize_bus_id, pci_ancestors
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import compare_node
from ansible_collections.gpuops.cluster.plugins.module_utils.topology import natural_key

VERDICTS = ("pass", "warn", "fail", "skip")

# NVLink per GPU architecture: links per GPU on an NVSwitch system and each link's speed as
# `nvidia-smi nvlink -s` prints it (GB/s, one direction). Sources: Volta 25.781 (Azure/azhpc-
# diagnostics#73 capture; 6 links, DGX-2), Ampere 12 x 25 (A100 capture, tests/unit/fixtures/nvlink),
# Hopper 18 x 26.562 and Blackwell 18 x 53.125 (NVIDIA Health Validation
# `nvlink_bandwidth_count_speed`, nccl-tests#149; GB200 capture in NVIDIA/k8s-test-infra#371).
NVLINK = {
    "volta": {"links": 6, "gbps": 25.781, "generation": 2},
    "ampere": {"links": 12, "gbps": 25.0, "generation": 3},
    "hopper": {"links": 18, "gbps": 26.562, "generation": 4},
    "blackwell": {"links": 18, "gbps": 53.125, "generation": 5},
}
# A link counts as at speed from this share of its generation's speed (rounding in nvidia-smi).
LINK_SPEED_SHARE = 0.97

# all_reduce bus bandwidth at the largest size over one node's NVLink, as a share of its
# one-direction NVLink bandwidth (links x speed). Each share is a published measurement divided
# by that bandwidth:
#   NVSwitch with NVLink SHARP (Hopper): 476-480 GB/s on 8 x H100 (nccl-tests#212, #290) / 478 = 0.99
#   NVSwitch with NVLink SHARP (Blackwell): 830+ GB/s on 8 x B200 (NVIDIA/nccl#1807) / 956 = 0.87
#   NVSwitch without NVLink SHARP (Ampere): ~230 GB/s on 8 x A100 (nccl-tests#149; 232.2 in the
#     OCI BM.GPU4.8 capture) / 300 = 0.77
#   Direct NVLink, no switch (DGX-1 V100 hybrid cube mesh): 135.5 GB/s (OCI BM.GPU3.8 capture)
#     / (6 x 25.781) = 0.87
#   PCIe only: no published all_reduce figure was found; a conservative 0.5 of the slowest GPU's
#     PCIe bandwidth, to be replaced by a baseline (validate_baseline: record).
NCCL_NVLINK_EFFICIENCY = {"nvls": {4: 0.99, 5: 0.87}, "nvswitch": 0.77, "direct": 0.87}
# Across the trays of one multi-node NVLink domain (an NVL72 rack), NCCL_MNNVL_ENABLE=1 makes NCCL
# reduce over NVLink, not the NICs: each GPU's NVLink bandwidth sets the figure, as inside an
# NVSwitch node, at the same share. Published: 72 x GB200 over 18 trays, 835-847 GB/s at 4-8 GiB
# (coreweave/nccl-tests#43) = 0.88 of 18 x 53.125 = 956: the Blackwell share above (0.87) holds.
# NCCL_MNNVL_ENABLE=1 (NCCL 2.21 and later) fails the run where MNNVL cannot be used (an IMEX
# domain that is not up, no IMEX channel), rather than measuring the NICs under its name.
# Across nodes over the NICs, MNNVL is off: trays of one domain would otherwise reduce over NVLink
# (NCCL's default, 2, uses it wherever it can) and the run would not measure their NICs.
MNNVL_ENVIRONMENT = {"NCCL_MNNVL_ENABLE": "1"}
RING_ENVIRONMENT = {"NCCL_ALGO": "Ring", "NCCL_MNNVL_ENABLE": "0"}
NCCL_PCIE_EFFICIENCY = 0.5
# PCIe bandwidth per lane and direction (GB/s) per generation, after 128b/130b encoding.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# Across nodes, NCCL_ALGO=Ring measures the NICs: 46-48 GB/s per NDR 400 NIC (nccl-tests#290),
# ~24 per HDR 200 (nccl-tests#252, #160): 0.94 of the line rate in bytes.
NIC_EFFICIENCY = 0.94
# The gate is this share of the expected value (k8s_mig_validation.md 3.4: 0.92 of the
# single-node peak, 0.90 of the NIC figure; 370 GB/s = 0.92 of a 400 GB/s fabric in NVCRE ADR-021).
NODE_FLOOR_SHARE = 0.92
NIC_FLOOR_SHARE = 0.90
BASELINE_SHARE = 0.95

# Xids that take a GPU out of service, by the immediate action of NVIDIA's Xid catalog for Ampere
# and newer GPUs (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, "Resolution Bucket
# (Immediate Action)"): the GPU must be reset (RESET_GPU, WORKFLOW_XID_48, the NVLink workflows),
# the machine restarted (RESTART_BM, RESTART_VM), or its power checked (CHECK_MECHANICALS) before it
# takes work again. An Xid whose immediate action is RESTART_APP or IGNORE (13, 31, 43, 45, 63, 68,
# 69, 80, 92, 94, ...) concerns one application or is informational: a warning.
FATAL_XIDS = {
    46: "GPU stopped processing; RESET_GPU",
    48: "double bit ECC error; WORKFLOW_XID_48",
    54: "auxiliary power is not connected to the GPU board; CHECK_MECHANICALS",
    62: "internal micro-controller halt; RESET_GPU",
    64: "GPU memory remapping failure; RESET_GPU",
    74: "NVLink error; WORKFLOW_NVLINK_ERR",
    79: "GPU has fallen off the bus; RESTART_BM",
    95: "uncontained memory error; RESET_GPU",
    109: "context switch timeout error; RESET_GPU",
    110: "security fault error; RESET_GPU",
    119: "GSP RPC timeout; RESET_GPU",
    120: "GSP error; RESET_GPU",
    136: "link training failed; RESET_GPU",
    140: "ECC unrecovered error; RESET_GPU",
    143: "GPU initialization error; RESET_GPU",
    **{xid: "NVLink 5 error; WORKFLOW_NVLINK5_ERR" for xid in range(144, 151)},
    151: "key rotation error; RESTART_VM",
    155: "NVLink SW defined error; RESET_GPU",
    156: "resource retirement event; RESET_GPU",
    158: "GPU fatal timeout; RESET_GPU",
    # Unused on Ampere and newer (the catalog's archive for Volta and older GPUs has them), and
    # failed by Azure's HPC health checks (k8s_mig_validation.md 3.3): kept for older GPUs.
    56: "display engine error (GPUs before Ampere)",
    57: "error programming video memory interface (GPUs before Ampere)",
    58: "unstable video memory interface detected (GPUs before Ampere)",
    65: "video processor exception (GPUs before Ampere)",
    73: "NVENC2 error (GPUs before Ampere)",
    81: "VGA subsystem error (GPUs before Ampere)",
}
# Xid 154 states the recovery the other Xids need ("... changed from 0x0 (None) to 0x2 (Node
# Reboot Required)"): a reset or reboot it asks for is fatal too.
_XID_154 = re.compile(r"\bto\s+0x[0-9A-Fa-f]+\s+\(([^)]*)\)")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)\b")
_MAX_XIDS = 1000


def record(check, subject, expected, measured, verdict, reason=""):  # noqa: PLR0917 - a record's six fields
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}")
    return {
        "check": check,
        "subject": subject,
        "expected": expected,
        "measured": measured,
        "verdict": verdict,
        "reason": reason,
    }


def worst(records):
    """The verdict of a list of records: fail over warn over pass over skip."""
    verdicts = {r["verdict"] for r in records}
    for verdict in ("fail", "warn", "pass"):
        if verdict in verdicts:
            return verdict
    return "skip"


# ---------------------------------------------------------------------------------------------
# What to expect


def nvlink_expectation(nvidia_gpu, overrides=None):
    """``{"links": {gpu_label: n}, "gbps": float or None, "kind": nvls|nvswitch|direct|none, "reason"}``.

    NVSwitches on the PCI bus: every GPU has its architecture's links (the table above). No
    switch: a GPU's links are the NV# cells of its row in ``topo -m`` added up (DGX-1's NV1 and
    NV2, a bridge's NV4). Neither: no NVLink is expected (PCIe cards, or a VM that does not pass
    the NVLinks through).
    """
    overrides = overrides or {}
    nvidia_gpu = nvidia_gpu or {}
    arch = (nvidia_gpu.get("architecture") or "").lower()
    table = NVLINK.get(arch)
    topology = nvidia_gpu.get("topology") or {}
    gpus = list(topology.get("gpus") or []) or [f"GPU{i}" for i in range(int(nvidia_gpu.get("count") or 0))]
    gbps = overrides.get("nvlink_link_gbps") or (table or {}).get("gbps")
    rows = topology.get("links") or {}
    counts = {}
    for gpu in gpus:
        total = 0
        for other, cell in (rows.get(gpu) or {}).items():
            if other.startswith("GPU") and cell.startswith("NV"):
                total += int(cell[2:])
        counts[gpu] = total
    # Behind switches the host does not see (an NVL72 tray's GPUs reach the rack's switch trays),
    # topo -m prints each GPU's links in every peer's cell (NV18 to each of three): more than a GPU
    # has. A GPU registered in a multi-node NVLink domain is behind switches too.
    outside = nvidia_gpu.get("nvlink_domain") or (table and max(counts.values(), default=0) > table["links"])
    if (nvidia_gpu.get("nvswitch_count") or outside) and table:
        links = int(overrides.get("nvlink_links") or table["links"])
        kind = "nvls" if table["generation"] >= 4 else "nvswitch"
        where = (
            "{} NVSwitches on the PCI bus".format(nvidia_gpu["nvswitch_count"])
            if nvidia_gpu.get("nvswitch_count")
            else "NVLink switches outside the node (a multi-node NVLink domain)"
        )
        reason = "{}; {} GPUs have {} NVLink {} links at {} GB/s".format(
            where, arch.capitalize(), table["links"], table["generation"], table["gbps"]
        )
        return {"links": dict.fromkeys(gpus, links), "gbps": gbps, "kind": kind, "reason": reason}
    if any(counts.values()):
        return {
            "links": counts,
            "gbps": gbps,
            "kind": "direct",
            "reason": "no NVSwitch; each GPU's NV# cells in nvidia-smi topo -m, added up",
        }
    return {
        "links": dict.fromkeys(gpus, 0),
        "gbps": None,
        "kind": "none",
        "reason": "no NVSwitch on the PCI bus and no NV# link in nvidia-smi topo -m",
    }


def _pcie_gbps(gpus):
    rates = []
    for gpu in gpus:
        pcie = gpu.get("pcie") or {}
        if pcie.get("max_gen") in PCIE_LANE_GBPS and pcie.get("max_width"):
            rates.append(PCIE_LANE_GBPS[pcie["max_gen"]] * pcie["max_width"])
    return min(rates) if rates else None


def nccl_node_expectation(nvidia_gpu, gpus=None, overrides=None):
    """The single-node all_reduce bus bandwidth to expect and its floor, with the formula."""
    overrides = overrides or {}
    nvlink = nvlink_expectation(nvidia_gpu, overrides)
    count = int((nvidia_gpu or {}).get("count") or 0)
    if count < 2:
        return {"expected": None, "floor": None, "reason": "fewer than 2 GPUs: nothing to reduce across"}
    share = float(overrides.get("node_floor_share") or NODE_FLOOR_SHARE)
    if overrides.get("nccl_node_busbw_gbps"):
        return _overridden(overrides, "nccl_node_busbw_gbps", share)
    if nvlink["kind"] != "none" and nvlink["gbps"]:
        links = min(nvlink["links"].values()) if nvlink["links"] else 0
        arch = (nvidia_gpu.get("architecture") or "").lower()
        generation = NVLINK.get(arch, {}).get("generation")
        if nvlink["kind"] == "nvls":
            efficiency = NCCL_NVLINK_EFFICIENCY["nvls"].get(generation, NCCL_NVLINK_EFFICIENCY["nvswitch"])
        else:
            efficiency = NCCL_NVLINK_EFFICIENCY[nvlink["kind"]]
        expected = round(links * nvlink["gbps"] * efficiency, 1)
        reason = f"{links} NVLink links x {nvlink['gbps']} GB/s x {efficiency} ({nvlink['kind']})"
    else:
        pcie = _pcie_gbps(gpus or [])
        if not pcie:
            return {"expected": None, "floor": None, "reason": "no NVLink and no PCIe link facts"}
        expected = round(pcie * NCCL_PCIE_EFFICIENCY, 1)
        reason = f"PCIe only: {pcie:.1f} GB/s x {NCCL_PCIE_EFFICIENCY} (no published figure; record a baseline)"
    return {"expected": expected, "floor": round(share * expected, 1), "reason": reason + f"; gate {share} of it"}


def compute_ports(infiniband, fabric="auto"):
    """The compute fabric's ports: every port of the fabric's link layer (InfiniBand where any
    InfiniBand port is Active, else Ethernet/RoCE), as ``[{"name": "mlx5_0:1", "hca", "ca_type",
    "state", "physical_state", "rate"}]`` in natural order."""
    infiniband = infiniband or {}
    active = infiniband.get("active_ports") or {}
    if fabric == "auto":
        fabric = "InfiniBand" if active.get("InfiniBand") else "Ethernet"
    ports = []
    for hca in sorted(infiniband.get("hcas") or [], key=lambda h: natural_key(h["name"])):
        for port in hca.get("ports") or []:
            if port.get("link_layer") == fabric:
                ports.append(
                    {
                        "name": "{}:{}".format(hca["name"], port["port"]),
                        "hca": hca["name"],
                        "ca_type": hca.get("ca_type"),
                        "state": port.get("state"),
                        "physical_state": port.get("physical_state"),
                        "rate": port.get("rate"),
                    }
                )
    return fabric, ports


def nic_expectation(ports, overrides=None):
    """Each HCA model's expected rate: the override, or the fastest rate its ports on this node
    run at (a port below its siblings is the fault, not the norm)."""
    overrides = overrides or {}
    if overrides.get("ib_rate_gbps"):
        rate = overrides["ib_rate_gbps"]
        return {port["ca_type"]: rate for port in ports}
    rates = {}
    for port in ports:
        if port["rate"] is not None:
            rates[port["ca_type"]] = max(rates.get(port["ca_type"], 0), port["rate"])
    return rates


# validate_thresholds: each key with what it holds.
THRESHOLD_KEYS = {
    "nvlink_links": "a whole number of links per GPU",
    "nvlink_link_gbps": "GB/s per NVLink link",
    "ib_rate_gbps": "Gb/s per compute port",
    "nccl_node_busbw_gbps": "GB/s of all_reduce bus bandwidth on one node",
    "nccl_multi_busbw_gbps": "GB/s of all_reduce bus bandwidth across nodes",
    "nccl_mnnvl_busbw_gbps": "GB/s of all_reduce bus bandwidth across the trays of an NVLink domain",
    "node_floor_share": "a share above 0 and at most 1",
    "nic_floor_share": "a share above 0 and at most 1",
}


def threshold_problems(thresholds, variable="validate_thresholds"):
    """Every value of ``thresholds`` the checks could not use, as messages naming the key and the fix
    (a quoted "26.5" is a string, not a number: it used to end in a traceback)."""
    if thresholds is None:
        return []
    if not isinstance(thresholds, dict):
        return [f"{variable} is {thresholds!r}: give a mapping of {', '.join(THRESHOLD_KEYS)} to numbers."]
    out = []
    for key, value in thresholds.items():
        where = f"{variable}.{key}"
        if key not in THRESHOLD_KEYS:
            out.append(f"{where} is no threshold the checks read: use {', '.join(THRESHOLD_KEYS)}.")
            continue
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            out.append(
                f"{where} is {value!r} ({type(value).__name__}), not a number: write {THRESHOLD_KEYS[key]} "
                "without quotes, such as 26.5."
            )
        elif value <= 0 or (key.endswith("_share") and value > 1):
            out.append(f"{where} is {value!r}: it must be {THRESHOLD_KEYS[key]}, above 0.")
        elif key == "nvlink_links" and value != int(value):
            out.append(f"{where} is {value!r}: it must be {THRESHOLD_KEYS[key]}.")
    return out


def _overridden(overrides, key, share):
    """The expectation a validate_thresholds value sets, gated at ``share`` of it."""
    expected = float(overrides[key])
    return {
        "expected": expected,
        "floor": round(share * expected, 1),
        "reason": f"validate_thresholds.{key} = {expected}",
    }


def nccl_multi_expectation(nodes_ports, overrides=None):
    """Across nodes with NCCL_ALGO=Ring: the node with the fewest or slowest compute ports sets it."""
    overrides = overrides or {}
    share = float(overrides.get("nic_floor_share") or NIC_FLOOR_SHARE)
    if overrides.get("nccl_multi_busbw_gbps"):
        return _overridden(overrides, "nccl_multi_busbw_gbps", share)
    totals = []
    for host, ports in sorted(nodes_ports.items()):
        active = [p for p in ports if p["state"] == "Active" and p["rate"]]
        if not active:
            return {"expected": None, "floor": None, "reason": f"{host} has no Active compute port"}
        rate = max(p["rate"] for p in active)
        totals.append((len(active) * rate, len(active), rate, host))
    if len(totals) < 2:
        return {"expected": None, "floor": None, "reason": "fewer than 2 nodes"}
    _total, count, rate, host = min(totals)
    expected = round(count * NIC_EFFICIENCY * rate / 8, 1)
    return {
        "expected": expected,
        "floor": round(share * expected, 1),
        "reason": f"{count} compute port(s) x {rate} Gb/s x {NIC_EFFICIENCY} / 8 ({host}); gate {share} of it",
    }


def nccl_mnnvl_expectation(nvidia_gpu, overrides=None):
    """Across the trays of a multi-node NVLink domain: each GPU's NVLink links x speed x the share
    NVLink SHARP reaches on its generation; None where the node is in no domain."""
    overrides = overrides or {}
    nvidia_gpu = nvidia_gpu or {}
    if not nvidia_gpu.get("nvlink_domain"):
        return {"expected": None, "floor": None, "reason": "the node's GPUs are in no multi-node NVLink domain"}
    share = float(overrides.get("node_floor_share") or NODE_FLOOR_SHARE)
    if overrides.get("nccl_mnnvl_busbw_gbps"):
        return _overridden(overrides, "nccl_mnnvl_busbw_gbps", share)
    arch = (nvidia_gpu.get("architecture") or "").lower()
    table = NVLINK.get(arch)
    if not table:
        return {
            "expected": None,
            "floor": None,
            "reason": f"no NVLink figures for the {arch or 'unknown'} architecture",
        }
    links = int(overrides.get("nvlink_links") or table["links"])
    gbps = float(overrides.get("nvlink_link_gbps") or table["gbps"])
    efficiency = NCCL_NVLINK_EFFICIENCY["nvls"].get(table["generation"], NCCL_NVLINK_EFFICIENCY["nvswitch"])
    expected = round(links * gbps * efficiency, 1)
    return {
        "expected": expected,
        "floor": round(share * expected, 1),
        "reason": f"{links} NVLink {table['generation']} links x {gbps} GB/s x {efficiency} across the domain's trays "
        f"(NCCL_MNNVL_ENABLE=1); gate {share} of it",
    }


def mndiag_support(nvidia_gpu, dcgm_version):
    """None where DCGM's multi-node diagnostic runs on this node's GPUs with ``dcgm_version``, else
    why not."""
    gpus = (nvidia_gpu or {}).get("gpus") or []
    devices = {re.sub(r"^0x", "", str(gpu.get("pci_device_id") or "").lower())[:4] for gpu in gpus}
    first = compat.DCGM_MNDIAG.first_release
    if not gpus or not devices <= set(first):
        return "DCGM's multi-node diagnostic runs on GB200 and GB300 NVL GPUs only"
    if not dcgm_version:
        return "no DCGM release known (dcgm_version)"
    need = max((first[d] for d in devices), key=compat.vtuple)
    if compat.vtuple(dcgm_version) < compat.vtuple(need):
        return f"DCGM {dcgm_version} has no multi-node diagnostic for these GPUs (DCGM {need} and later)"
    return None


# ---------------------------------------------------------------------------------------------
# Node checks


def parse_xids(text):
    """``[{"xid": int, "pci": "0000:3b:00", "line": str}]`` from kernel log lines ``NVRM: Xid (PCI:...): N, ...``."""
    found = []
    for line in (text or "").splitlines():
        if "NVRM: Xid" not in line:
            continue
        match = _XID.search(line)
        if match:
            found.append({"xid": int(match.group(2)), "pci": match.group(1).lower(), "line": line.strip()[:300]})
            if len(found) >= _MAX_XIDS:
                break
    return found


def check_gpu_count(pci_count, smi_gpus, source="lspci"):
    """GPUs on the PCI bus against those nvidia-smi sees; ``pci_count`` 0: no PCI enumeration."""
    measured = len(smi_gpus)
    if not pci_count:
        return [
            record(
                "gpu_count",
                "node",
                None,
                measured,
                "skip",
                "no PCI enumeration: lspci is missing and sysfs lists no NVIDIA GPU",
            )
        ]
    verdict = "pass" if measured == pci_count else "fail"
    return [
        record(
            "gpu_count",
            "node",
            pci_count,
            measured,
            verdict,
            f"NVIDIA GPUs on the PCI bus ({source}, vendor 10de) against those nvidia-smi sees",
        )
    ]


def check_driver(installed, loaded):
    if not installed:
        return [record("driver_version", "node", None, loaded, "skip", "no driver package is installed")]
    verdict = "pass" if loaded == installed else "fail"
    return [
        record(
            "driver_version",
            "node",
            installed,
            loaded,
            verdict,
            "the installed package's version against the one nvidia-smi reports loaded",
        )
    ]


def check_kernel_modules(entries, running, container=None, signer=None):
    """One ``kernel_modules`` record per kernel read (module_utils/kernel_modules.py): the running
    kernel without good NVIDIA modules fails (the driver cannot load there again); another
    installed kernel without them warns (a reboot into it leaves the node without its driver).
    In a container the kernel is the host's and none of the node's is installed: a skip."""
    if not entries:
        reason = f"in a container ({container}): its kernel is the host's" if container else "no kernel to check"
        return [record("kernel_modules", "node", None, None, "skip", reason)]
    out = []
    for entry in entries:
        kernel = entry["kernel"]
        expected = "NVIDIA modules" + (f" signed by '{signer}'" if signer else "")
        if entry["ok"]:
            out.append(record("kernel_modules", kernel, expected, "present", "pass", "modinfo, per module"))
        elif kernel == running:
            reason = "the running kernel: the driver cannot load again after a restart"
            out.append(record("kernel_modules", kernel, expected, "; ".join(entry["problems"]), "fail", reason))
        else:
            reason = f"a reboot into {kernel} leaves the node without its driver"
            out.append(record("kernel_modules", kernel, expected, "; ".join(entry["problems"]), "warn", reason))
    return out


def _per_gpu(check, gpus, test, expected, reason):
    bad = []
    for gpu in gpus:
        measured = test(gpu)
        if measured is not None:
            bad.append(record(check, "GPU{}".format(gpu["index"]), expected, measured, "fail", reason))
    if bad:
        return bad
    return [record(check, "all GPUs", expected, expected, "pass", reason)]


def check_persistence(gpus):
    return _per_gpu(
        "persistence_mode",
        gpus,
        lambda g: None if g.get("persistence_mode") == "enabled" else (g.get("persistence_mode") or "unknown"),
        "enabled",
        "nvidia-persistenced keeps the driver initialised between jobs",
    )


def check_ecc(gpus):
    def test(gpu):
        ecc = gpu.get("ecc") or {}
        problems = []
        if ecc.get("remapped_rows_pending"):
            problems.append("row remap pending")
        if ecc.get("remapped_rows_failure"):
            problems.append("row remap failure")
        if ecc.get("retired_pages_pending"):
            problems.append("page retirement pending")
        if ecc.get("volatile_uncorrectable"):
            problems.append("{} uncorrectable errors".format(ecc["volatile_uncorrectable"]))
        return ", ".join(problems) or None

    return _per_gpu(
        "ecc",
        gpus,
        test,
        "no pending remap or retirement, 0 uncorrectable",
        "nvidia-smi -q -x: remapped rows, retired pages, volatile uncorrectable ECC counts",
    )


# nvidia-smi's fabric states (NVML's nvmlGpuFabricState_t): a GPU on an NVSwitch or NVLink5 fabric is
# usable once Fabric Manager (or the NVLink subnet manager) has registered it: "Completed" with
# status "Success". "Not Started" and "In Progress" are a registration that never finished (CUDA then
# fails with error 802, system not yet initialised); "Completed" with another status (seen: "Insufficient
# Resources", Azure/azhpc-images#506) is a failed one. GPUs without such a fabric print "Not Supported",
# or N/A (before Hopper, and in a VM that passes one GPU through).
_FABRIC_UNSUPPORTED = (None, "Not Supported")


def check_fabric(gpus, nvswitch_count=0):
    """Each GPU's NVLink fabric registration from ``nvidia-smi -q -x`` (``fabric`` of parse_query_xml)."""
    reason = "nvidia-smi -q -x fabric state: Fabric Manager registered the GPU with the NVLink fabric"
    reporting = [g for g in gpus if (g.get("fabric") or {}).get("state") not in _FABRIC_UNSUPPORTED]
    if not reporting:
        why = "no GPU reports an NVLink fabric registration (GPUs before Hopper, GPUs without NVSwitch, or a VM)"
        if nvswitch_count:
            why += f"; the node has {nvswitch_count} NVSwitches, whose Fabric Manager the driver checks do cover"
        return [record("fabric", "all GPUs", "Completed, Success", None, "skip", why)]
    records = []
    for gpu in reporting:
        fabric = gpu["fabric"]
        state, status = fabric.get("state"), fabric.get("status")
        subject = "GPU{}".format(gpu["index"])
        if state == "Completed" and status == "Success":
            if (fabric.get("health_summary") or "").lower() == "unhealthy":
                records.append(
                    record(
                        "fabric",
                        subject,
                        "Healthy",
                        "Completed, Success, health Unhealthy",
                        "warn",
                        reason + "; its health summary says the fabric is degraded",
                    )
                )
            continue
        measured = f"{state}, {status}" if status else state
        why = reason
        if state != "Completed":
            why += (
                "; the registration has not finished (CUDA error 802 until it does): is nvidia-fabricmanager "
                "running at the driver's version?"
            )
        records.append(record("fabric", subject, "Completed, Success", measured, "fail", why))
    if not any(r["verdict"] == "fail" for r in records):
        records.insert(0, record("fabric", "all GPUs", "Completed, Success", "Completed, Success", "pass", reason))
    return records


# PCIe Access Control Services: a bridge with P2P request or completion redirect on sends the traffic
# between two devices below it up to the root complex instead of across the switch. NCCL's
# troubleshooting guide ("PCI Access Control Services (ACS)", docs.nvidia.com/deeplearning/nccl/
# user-guide/docs/troubleshooting.html): it can make GPU Direct perform poorly or hang, and on bare
# metal ACS on PCI switches must be off (BIOS: IO virtualization / VT-d, or setpci ECAP_ACS+0x6.w=0000
# at each boot). GPUDirect RDMA and GPUDirect Storage need the same direct path between GPU and NIC.
# In a VM the hypervisor's passthrough depends on ACS: the check does not judge there.
ACS_REDIRECT = ("ReqRedir", "CmpltRedir")
_ACS_REASON = (
    "lspci -vvv ACSCtl of every bridge between two GPUs or a GPU and a NIC (NCCL troubleshooting guide: "
    "PCI Access Control Services)"
)


def check_acs(devices, endpoints, virtualization=None, error=None):
    """PCIe ACS on the bridges between the node's GPUs and between each GPU and each NIC.

    ``devices``: ``pci.parse_lspci_verbose`` of ``lspci -D -vvv`` (None where it could not be read,
    ``error`` saying why). ``endpoints``: ``[(name, pci_bus_id, "gpu" or "nic")]``.
    ``virtualization``: the GPUs' virtualization mode from ``nvidia-smi -q -x`` (``None`` on bare metal,
    ``Pass-Through`` or ``VGPU`` in a virtual machine).
    A bridge is between two devices when it is above one of them and not above both.
    """
    expected = "ReqRedir- CmpltRedir-"
    if virtualization and virtualization.lower() != "none":
        why = (
            f"a virtual machine (nvidia-smi virtualization mode {virtualization}): the hypervisor's device "
            "passthrough relies on ACS, and the guest's bridges are the hypervisor's"
        )
        return [record("acs", "node", expected, None, "skip", why)]
    if devices is None:
        return [record("acs", "node", expected, None, "skip", error or "lspci -vvv could not be read")]
    listed = {d["pci_bus_id"] for d in devices}
    found = [(name, normalize_bus_id(bus), kind) for name, bus, kind in endpoints if normalize_bus_id(bus) in listed]
    if not any(kind == "gpu" for _name, _bus, kind in found) or len(found) < 2:
        why = "fewer than two of the node's GPUs and NICs are on lspci's list: no path between them to read"
        return [record("acs", "node", expected, None, "skip", why)]
    above = {bus: pci_ancestors(devices, bus) for _name, bus, _kind in found}
    between = {}
    for i, (name_a, bus_a, kind_a) in enumerate(found):
        after = i + 1
        for name_b, bus_b, kind_b in found[after:]:
            if "gpu" not in (kind_a, kind_b):
                continue
            ids_a = {d["pci_bus_id"] for d in above[bus_a]}
            ids_b = {d["pci_bus_id"] for d in above[bus_b]}
            for bridge, name in [(b, name_a) for b in above[bus_a]] + [(b, name_b) for b in above[bus_b]]:
                if (bridge["pci_bus_id"] in ids_a) != (bridge["pci_bus_id"] in ids_b):
                    # the device below the bridge, whose traffic with the other one it redirects
                    between.setdefault(bridge["pci_bus_id"], (bridge, set()))[1].add(name)
    if any(not bridge["capabilities_read"] for bridge, _names in between.values()):
        why = "lspci printed <access denied> for the bridges' capabilities: node_health must run as root"
        return [record("acs", "node", expected, None, "skip", why)]
    records = []
    for bus_id, (bridge, names) in sorted(between.items()):
        acs = bridge["acs"] or {}
        on = [bit for bit in ACS_REDIRECT if acs.get(bit)]
        if not on:
            continue
        measured = " ".join(f"{bit}{'+' if acs.get(bit) else '-'}" for bit in ACS_REDIRECT)
        peers = ", ".join(sorted(names, key=natural_key))
        why = (
            f"ACS sends the peer-to-peer traffic of {peers} below it through the root complex: NCCL and GPUDirect slow "
            f"down or hang; turn IO virtualization (VT-d/IOMMU ACS) off in the BIOS, or clear it at each boot "
            f"(setpci -s {bus_id} ECAP_ACS+0x6.w=0000). {_ACS_REASON}"
        )
        records.append(record("acs", bus_id, expected, measured, "fail", why))
    if not records:
        measured = f"{len(between)} bridges between them, none redirects" if between else "no bridge between them"
        records.append(record("acs", "all bridges", expected, measured, "pass", _ACS_REASON))
    return records


def check_recovery_action(gpus):
    """Each GPU's recovery action as the driver states it (``nvidia-smi -q -x``'s
    ``gpu_recovery_action``, driver 550 and later): ``None`` passes, anything else (Reset, Reboot,
    Drain P2P...) fails; drivers that print none give no record."""
    records = []
    for gpu in gpus:
        value = gpu.get("recovery_action")
        if value is None:
            continue
        verdict = "pass" if value.strip().lower() == "none" else "fail"
        records.append(
            record(
                "recovery_action",
                "GPU{}".format(gpu["index"]),
                "None",
                value,
                verdict,
                "the driver's recovery action (nvidia-smi -q, GPU Recovery Action)",
            )
        )
    return records


def check_xids(xids, gpus):
    by_bus = {}
    for gpu in gpus:
        by_bus[(gpu.get("pci_bus_id") or "").lower()[-12:-2]] = "GPU{}".format(gpu["index"])
    records = []
    for xid in xids:
        gpu = by_bus.get(xid["pci"][-10:], xid["pci"])
        entry = FATAL_XIDS.get(xid["xid"])
        description, _sep, action = (entry or "").partition("; ")
        if xid["xid"] == 154:
            stated = _XID_154.search(xid["line"])
            if stated and re.search(r"Reset|Reboot", stated.group(1)):
                description, action = f"GPU recovery action changed to {stated.group(1)}", "XID_154"
        verdict = "fail" if description else "warn"
        records.append(
            record(
                "xid",
                gpu,
                "no fatal Xid since boot",
                "Xid {} ({})".format(xid["xid"], description or "not in the fatal list"),
                verdict,
                xid["line"] + (f" (NVIDIA's Xid catalog, immediate action: {action})" if action else ""),
            )
        )
    if not records:
        records.append(
            record(
                "xid",
                "all GPUs",
                "no fatal Xid since boot",
                "none",
                "pass",
                "kernel log since boot; fatal list: " + ", ".join(map(str, sorted(FATAL_XIDS))),
            )
        )
    return records


def check_nvlink(expectation, status, gpus):
    if expectation["kind"] == "none":
        return [record("nvlink", "node", "none", "none", "skip", expectation["reason"])]
    if status is None:
        return [record("nvlink", "node", "links active", None, "fail", "nvidia-smi nvlink -s gave nothing to read")]
    records = []
    floor = expectation["gbps"] * LINK_SPEED_SHARE if expectation["gbps"] else None
    for gpu in gpus:
        label = "GPU{}".format(gpu["index"])
        want = expectation["links"].get(label, 0)
        links = (status.get(gpu["index"]) or {}).get("links", [])
        inactive = [str(i) for i, speed in enumerate(links) if speed is None]
        slow = [f"{i} ({speed} GB/s)" for i, speed in enumerate(links) if speed is not None and floor and speed < floor]
        active = len(links) - len(inactive)
        expected = "{} links at {} GB/s".format(want, expectation["gbps"])
        problems = []
        if (status.get(gpu["index"]) or {}).get("all_inactive"):
            problems.append("all links inactive (NVML: unable to retrieve NVLink information)")
        elif active != want:
            problems.append(f"{active} of {want} links active")
        if inactive:
            problems.append("inactive: link " + ", ".join(inactive))
        if slow:
            problems.append("below speed: link " + ", ".join(slow))
        if problems:
            records.append(record("nvlink", label, expected, "; ".join(problems), "fail", expectation["reason"]))
    if not records:
        records.append(
            record(
                "nvlink",
                "all GPUs",
                "{} links per GPU at {} GB/s".format(
                    min(expectation["links"].values()) if expectation["links"] else 0, expectation["gbps"]
                ),
                "all active at speed",
                "pass",
                expectation["reason"],
            )
        )
    return records


def check_pcie(gpus):
    records = []
    for gpu in gpus:
        pcie = gpu.get("pcie") or {}
        if None in (pcie.get("max_gen"), pcie.get("current_gen"), pcie.get("max_width"), pcie.get("current_width")):
            continue
        expected = "Gen{} x{}".format(pcie["max_gen"], pcie["max_width"])
        measured = "Gen{} x{}".format(pcie["current_gen"], pcie["current_width"])
        if measured == expected:
            continue
        idle = gpu.get("performance_state") not in (None, "P0") and pcie["current_width"] == pcie["max_width"]
        verdict = "warn" if idle else "fail"
        reason = (
            "the GPU lowers its link speed when idle ({}); width is full".format(gpu["performance_state"])
            if idle
            else "current link below the maximum the GPU and slot negotiate"
        )
        records.append(record("pcie", "GPU{}".format(gpu["index"]), expected, measured, verdict, reason))
    if not records:
        return [
            record(
                "pcie",
                "all GPUs",
                "current = max",
                "current = max",
                "pass",
                "nvidia-smi -q -x pcie_gen and link_widths",
            )
        ]
    return records


def check_hca_pcie(links):
    """``links``: ``{hca: {"current_speed", "max_speed", "current_width", "max_width"}}`` from sysfs."""
    if not links:
        return [
            record("hca_pcie", "node", "current = max", None, "skip", "no PCIe link attributes in sysfs for the HCAs")
        ]
    records = []
    for hca, link in sorted(links.items(), key=lambda item: natural_key(item[0])):
        expected = "{} x{}".format(link["max_speed"], link["max_width"])
        measured = "{} x{}".format(link["current_speed"], link["current_width"])
        if expected != measured:
            records.append(
                record("hca_pcie", hca, expected, measured, "fail", "sysfs current_link_* against max_link_*")
            )
    return records or [
        record(
            "hca_pcie", "all HCAs", "current = max", "current = max", "pass", "sysfs current_link_* against max_link_*"
        )
    ]


def check_hcas_listed(cas, reason, infiniband, hca_pci):
    """The adapters the node has must be listed by ibstat now: ``cas`` (parsed ibstat, None when it
    is missing, failed or could not be read, with ``reason``), against the CAs ib_facts recorded
    (``infiniband``) and the HCAs gpu_facts found on PCI (``hca_pci``). A node whose HCAs vanished
    (mlx5_core not loaded, the RDMA stack broken after an upgrade) is a failure, never "no ports"."""
    known = [hca["name"] for hca in (infiniband or {}).get("hcas") or [] if isinstance(hca, dict) and hca.get("name")]
    on_pci = [hca for hca in hca_pci or [] if isinstance(hca, dict) and not hca.get("virtual_function")]
    if not known and not on_pci:
        return []
    has = (
        ", ".join(known)
        if known
        else "{} on PCI ({})".format(len(on_pci), ", ".join(str(hca.get("pci_bus_id")) for hca in on_pci))
    )
    if cas is None:
        return [
            record(
                "ib_ports",
                "adapters",
                f"ibstat lists the node's adapters: {has}",
                reason or "no output",
                "fail",
                "the node has adapters and ibstat cannot list them: install infiniband-diags, load mlx5_core "
                "(and mlx5_ib), or set validate_fabric: none where they carry no compute traffic",
            )
        ]
    listed = {ca.get("name") for ca in cas}
    missing = [name for name in known if name not in listed]
    if not missing and not known and len(cas) < len(on_pci):
        missing = [f"{len(on_pci) - len(cas)} of {len(on_pci)} on PCI"]
    return [
        record(
            "ib_ports", name, "listed by ibstat", "missing", "fail", "ib_facts recorded it; ibstat does not list it now"
        )
        for name in missing
    ]


def check_ib_ports(fabric, ports, expected_rates):
    if not ports:
        return [record("ib_ports", "node", None, None, "skip", "no compute fabric port on this node")]
    records = []
    for port in ports:
        rate = expected_rates.get(port["ca_type"])
        expected = f"Active, LinkUp, {rate} Gb/s"
        problems = []
        if port["state"] != "Active":
            problems.append(port["state"] or "no state")
        if port["physical_state"] not in (None, "LinkUp"):
            problems.append(port["physical_state"])
        if rate and port["rate"] is not None and port["rate"] < rate:
            problems.append("{} Gb/s".format(port["rate"]))
        if problems:
            records.append(
                record(
                    "ib_ports",
                    port["name"],
                    expected,
                    ", ".join(problems),
                    "fail",
                    f"{fabric} compute port; rate of its fastest sibling {port['ca_type']}",
                )
            )
    if not records:
        records.append(
            record(
                "ib_ports",
                f"{len(ports)} {fabric} port(s)",
                "Active, LinkUp, at rate",
                "all Active, LinkUp, at rate",
                "pass",
                "ibstat",
            )
        )
    return records


def nccl_ib_hca(spec, ports):
    """The ports of ``ports`` (``mlx5_0:1`` names) that NCCL uses under ``NCCL_IB_HCA=spec``, and the
    entries the spec names exactly: ``(selected, named)``.

    As NCCL reads it (NCCL's environment variables, NCCL_IB_HCA): entries are ``device[:port]``
    separated by commas; a leading ``^`` excludes the entries instead of selecting them; a leading
    ``=`` (after ``^`` if any) matches device names exactly, otherwise each entry is a prefix
    (``mlx5`` is every mlx5 device); an entry without a port takes every port of its device.
    ``named`` holds the exact, selecting entries (``=mlx5_0:1``), which must each be there.
    """
    text = spec.strip()
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    entries = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        device, _sep, port = item.partition(":")
        entries.append((device, port or None))

    def matches(name):
        device, _sep, port = name.partition(":")
        return any(
            (device == e_device if exact else device.startswith(e_device)) and (e_port is None or port == e_port)
            for e_device, e_port in entries
        )

    selected = [name for name in ports if matches(name) != exclude]
    named = [d + ":" + (p or "1") for d, p in entries] if exact and not exclude else []
    return selected, named


def check_nccl_hcas(configured, ports):
    """``configured``: the value of NCCL_IB_HCA in nccl.conf (None when it sets none), read as
    NCCL reads it (nccl_ib_hca): the ports it selects must be the active compute ports."""
    active = [p["name"] for p in ports if p["state"] == "Active"]
    if configured is None:
        return [record("nccl_hcas", "nccl.conf", active, None, "skip", "nccl.conf sets no NCCL_IB_HCA: NCCL picks")]
    selected, named = nccl_ib_hca(configured, [p["name"] for p in ports])
    measured = named or [name for name in selected if name in active]
    missing = sorted(set(active) - set(selected), key=natural_key)
    extra = sorted(set(named) - set(active), key=natural_key)
    if not missing and not extra:
        return [
            record(
                "nccl_hcas",
                "nccl.conf",
                active,
                measured,
                "pass",
                f"NCCL_IB_HCA={configured} selects the active compute ports",
            )
        ]
    problems = []
    if missing:
        problems.append(f"active but not selected by NCCL_IB_HCA={configured}: " + ", ".join(missing))
    if extra:
        problems.append("in NCCL_IB_HCA but not an active compute port: " + ", ".join(extra))
    return [record("nccl_hcas", "nccl.conf", active, measured, "fail", "; ".join(problems))]


def mig_split_gpus(nvidia_gpu):
    """The GPUs (``nvidia_gpu`` facts) in MIG mode in any layout but one GPU instance of the whole
    GPU with one compute instance: the only MIG layout dcgmi diag runs on (a DCGM maintainer in
    NVIDIA/DCGM#31; on any other it prints "GPU N's MIG configuration is incompatible with the
    diagnostic because it prevents access to the entire GPU", NVIDIA/DCGM#94)."""
    out = []
    for gpu in (nvidia_gpu or {}).get("gpus") or []:
        if gpu.get("mig_mode") != "enabled":
            continue
        instances = gpu.get("mig_instances") or []
        profiles = gpu.get("mig_profiles") or []
        whole = max(profiles, key=lambda p: p.get("memory_gib") or 0)["name"] if profiles else None
        computes = instances[0].get("compute_instances") or [] if len(instances) == 1 else []
        if not (whole and len(instances) == 1 and instances[0].get("profile") == whole and len(computes) == 1):
            out.append(gpu.get("index"))
    return out


def check_dcgm(result, level, error=None):
    if error:
        return [record("dcgm_diag", f"level {level}", "every test passes", error, "fail", "dcgmi diag did not run")]
    if result is None:
        return [record("dcgm_diag", f"level {level}", "every test passes", None, "skip", "DCGM is not installed")]
    failed = [t for t in result["tests"] if t["result"] == "Fail"]
    if result["error"]:
        return [record("dcgm_diag", f"level {level}", "every test passes", result["error"], "fail", "dcgmi diag")]
    if failed:
        return [
            record("dcgm_diag", t["name"], "Pass", "Fail", "fail", t["info"] or f"dcgmi diag -r {level}")
            for t in failed
        ]
    # DCGM's Warn is not a pass: each is a warning with DCGM's own text. A run where nothing passed
    # (every test skipped: not supported on this GPU, or no GPU to test) proves nothing: skip.
    warned = [
        record("dcgm_diag", t["name"], "Pass", "Warn", "warn", t["info"] or f"dcgmi diag -r {level} warned")
        for t in result["tests"]
        if t["result"] == "Warn"
    ]
    passed = [t["name"] for t in result["tests"] if t["result"] == "Pass"]
    expected = "every test passes"
    if not passed:
        skipped = [
            t["name"] + (f" ({t['info']})" if t["info"] else "") for t in result["tests"] if t["result"] == "Skip"
        ]
        reason = "no test passed; skipped: " + (", ".join(skipped) or "none")
        return [*warned, record("dcgm_diag", f"level {level}", expected, "none passed", "skip", reason)]
    return [
        *warned,
        record("dcgm_diag", f"level {level}", expected, f"{len(passed)} passed", "pass", ", ".join(passed)),
    ]


def check_slurmd(declared, measured, headroom_mib, overrides_config):
    if overrides_config:
        return [
            record(
                "slurmd",
                "node",
                None,
                None,
                "skip",
                "SlurmdParameters=config_overrides: slurmd takes slurm.conf's counts, not the hardware's",
            )
        ]
    if declared is None or measured is None:
        return [record("slurmd", "node", declared, measured, "skip", "no slurmd or no NodeName line for this node")]
    differences = compare_node(declared, measured, headroom_mib)
    if not differences:
        return [
            record(
                "slurmd",
                "node",
                "slurm.conf = slurmd -C",
                "equal",
                "pass",
                f"CPUs, sockets, cores, threads; RealMemory within the {headroom_mib} MiB headroom",
            )
        ]
    return [
        record("slurmd", d["key"], d["declared"], d["measured"], "fail", "slurm.conf NodeName against slurmd -C")
        for d in differences
    ]


# ---------------------------------------------------------------------------------------------
# Cluster checks and NCCL


def firmware_checks(nodes):
    """One firmware per HCA model across the cluster. ``nodes``: ``{host: [{"hca_id", "fw_ver",
    "vendor_part_id", "board_id"}]}`` (ibv_devinfo). The most common version of a model is the
    reference; each HCA on another version fails on its node."""
    versions = {}
    out = {host: [] for host in nodes}
    for host, hcas in nodes.items():
        for hca in hcas:
            model = hca.get("vendor_part_id")
            if not hca.get("fw_ver") or not model:
                # Nothing to compare: a warning, never a vacuous pass.
                out[host].append(
                    record(
                        "hca_firmware",
                        hca["hca_id"],
                        "a firmware version and part id",
                        hca.get("fw_ver") or None,
                        "warn",
                        "ibv_devinfo printed none",
                    )
                )
                continue
            versions.setdefault(model, {}).setdefault(hca.get("fw_ver"), []).append((host, hca["hca_id"]))
    for model, by_version in versions.items():
        reference = sorted(by_version.items(), key=lambda item: (-len(item[1]), str(item[0])))[0][0]
        for version, members in by_version.items():
            for host, hca in members:
                if version != reference:
                    out[host].append(
                        record(
                            "hca_firmware",
                            hca,
                            reference,
                            version,
                            "fail",
                            f"the most common firmware of part {model} across the cluster",
                        )
                    )
    for host, records in out.items():
        if not any(r["verdict"] == "fail" for r in records):
            count = sum(1 for hca in nodes[host] if hca.get("fw_ver") and hca.get("vendor_part_id"))
            verdict = "pass" if count else "skip"
            records.append(
                record(
                    "hca_firmware",
                    "all HCAs",
                    "one version per model",
                    "consistent" if count else None,
                    verdict,
                    "ibv_devinfo fw_ver by vendor_part_id" if count else "no HCA",
                )
            )
    return out


def nccl_check(  # noqa: PLR0917
    check, subject, result, expectation, baseline=None, baseline_share=BASELINE_SHARE, *, ranks=None
):
    """The verdict on one nccl-tests run: the bus bandwidth at the largest size against the floor
    (or ``baseline_share`` of a recorded baseline); wrong or out-of-bounds values fail regardless,
    and so does a run that did not finish (no closing lines, or its largest size short of the
    ``maxBytes`` it was given) or ran another number of ranks than ``ranks``, the ones asked for."""
    row = largest(result)
    busbw = None
    if row is not None:
        values = [v for v in (row["oop"]["busbw"], row["ip"]["busbw"]) if v is not None]
        busbw = max(values) if values else None
    floor, reason = expectation.get("floor"), expectation.get("reason", "")
    if baseline:
        floor = round(baseline_share * float(baseline), 1)
        reason = f"{baseline_share} of this node's baseline {baseline} GB/s"
    expected = f">= {floor} GB/s at {row['size']} B" if floor is not None and row else None
    measured = f"{busbw} GB/s" if busbw is not None else None
    problems = []
    bad = wrong_rows(result)
    if bad:
        problems.append("wrong values at {} size(s), first {} B".format(len(bad), bad[0]["size"]))
    if result.get("out_of_bounds"):
        problems.append("{} out-of-bounds values".format(result["out_of_bounds"]))
    if row is not None and (result.get("complete") is False or not reached_max(result)):
        problems.append(
            "the run stopped at {} B, before the end of its table (maxBytes {}, closing lines {}): it was cut "
            "off".format(row["size"], result.get("max_bytes"), "printed" if result.get("complete") else "missing")
        )
    if ranks and result.get("nranks") and result["nranks"] != ranks:
        problems.append("{} ranks ran where {} were asked for".format(result["nranks"], ranks))
    if problems:
        return record(check, subject, expected, measured, "fail", "; ".join(problems))
    if floor is None:
        return record(
            check,
            subject,
            None,
            measured,
            "warn" if busbw is None else "pass",
            "no floor: " + (expectation.get("reason") or "nothing derived"),
        )
    if busbw is None or busbw < floor:
        return record(check, subject, expected, measured, "fail", reason)
    return record(check, subject, expected, measured, "pass", reason)


def mndiag_checks(subject, parsed, names):
    """The verdict on one ``dcgmi mndiag`` run over a domain's trays: ``(record, {host: [records]})``.

    ``parsed``: :func:`dcgm.parse_dcgmi_mndiag`'s result; ``names``: each inventory host by the
    name the run was given (its host name). A GPU that failed is a ``mndiag`` record of its host
    (which drains it); a run that did not finish, or failed without naming a GPU, fails the run
    (every tray's finding, no drain: nothing says which tray); a tray without a result fails it too.
    """
    per_host = {}
    short = {name.split(".")[0]: host for name, host in names.items()}
    for result in parsed["results"]:
        host = names.get(result["host"]) or short.get(result["host"].split(".")[0])
        if host is None:
            continue
        verdict = {"Fail": "fail", "Warn": "warn", "Pass": "pass"}.get(result["status"], "skip")
        reason = "; ".join(result["messages"]) or f"mnubergemm: {result['status']}"
        per_host.setdefault(host, []).append(
            record("mndiag", result["entity"], "Pass", result["status"], verdict, reason)
        )
    expected = "Pass on every GPU of " + ", ".join(sorted(names.values(), key=natural_key))
    if parsed["runtime_error"] or parsed["status"] is None:
        why = parsed["runtime_error"] or "the report lists no test"
        errors = "; ".join(parsed["errors"])
        return record(
            "mndiag", subject, expected, None, "fail", f"cannot check: {why}" + (f" ({errors})" if errors else "")
        ), per_host
    missing = sorted((host for host in names.values() if host not in per_host), key=natural_key)
    failed = sorted((h for h, records in per_host.items() if worst(records) == "fail"), key=natural_key)
    if failed:
        return record(
            "mndiag", subject, expected, parsed["status"], "fail", "GPUs failed on " + ", ".join(failed)
        ), per_host
    if parsed["status"] == "Fail" or missing:
        why = "; ".join(parsed["errors"]) or "it failed without naming a GPU"
        if missing:
            why = "no result for the GPUs of " + ", ".join(missing) + ("; " + why if parsed["status"] == "Fail" else "")
        return record("mndiag", subject, expected, parsed["status"], "fail", why), per_host
    verdict = {"Pass": "pass", "Warn": "warn"}.get(parsed["status"], "fail")
    return record(
        "mndiag", subject, expected, parsed["status"], verdict, f"mnubergemm over {len(names)} trays"
    ), per_host


def drain_reason(records, limit=200):
    """``gpuops-validate: nvlink GPU3, pcie GPU5``: the failed checks, for scontrol's Reason."""
    failed = ["{} {}".format(r["check"], r["subject"]) for r in records if r["verdict"] == "fail"]
    text = "gpuops-validate: " + ", ".join(failed)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def drained_for(reason, prefix="gpuops-validate: "):
    """The check names an earlier drain_reason() listed (``nvlink``, ``pcie``), or [] for another
    reason (burn-in, an operator's own)."""
    if not reason.startswith(prefix):
        return []
    names = []
    for item in reason.removeprefix(prefix).split(", "):
        check = item.strip().split(" ", 1)[0]
        if re.fullmatch(r"[a-z][a-z0-9_]*", check) and check not in names:
            names.append(check)
    return names


def unproven(reason, records, prefix="gpuops-validate: ", recorded=None):
    """The checks a node was drained for that do not pass now: each had to pass again, not be
    skipped (``ib_ports`` that skips because ibstat is gone proves nothing). ``[(check, now)]``,
    ``now`` the check's verdicts this run ("skip", "fail", or "not run").

    The checks are those the reason names and ``recorded`` (the full set the fleet state kept when
    the node was drained: Slurm keeps a reason of limited length). A reason that was cut (``...``)
    with no recorded set proves nothing of what it lost: every check of this run must pass."""
    names = drained_for(reason, prefix)
    names += [name for name in recorded or [] if isinstance(name, str) and name not in names]
    if recorded is None and reason.startswith(prefix) and reason.endswith("..."):
        names += [r["check"] for r in records if r["check"] not in names]
    out = []
    for check in dict.fromkeys(names):
        verdicts = sorted({r["verdict"] for r in records if r["check"] == check})
        if not verdicts or any(verdict in ("fail", "skip") for verdict in verdicts):
            out.append((check, "/".join(verdicts) or "not run"))
    return out


# ---------------------------------------------------------------------------------------------
# What the validate role runs and collects


def multi_node_plan(nodes, overrides=None, whole_set=True, partners=None):
    """The NCCL runs across nodes: disjoint pairs of nodes on the same fabric (an odd node out
    pairs with a validated partner of its fabric where there is one, else with the first), then
    the whole set of each fabric when it has more than two nodes.

    ``nodes``: ``{host: node_health's result}`` (its ``fabric``, ``compute_ports`` and ``gpus``;
    hosts without ``checks`` did not run it and are left out). ``partners``: nodes out of this
    run that passed their last validation (the fleet state's validation records: ``fabric``,
    ``compute_ports``, ``gpus``), so that a run over part of the cluster (``--limit``) still
    measures each node's fabric against a node known to be good. Returns
    ``{"runs": [{"check", "subject", "hosts", "gpus_per_node", "expectation"}], "skipped": [records]}``.
    """
    overrides = overrides or {}
    by_fabric, skipped = {}, []
    counts, ports = {}, {}
    for host in sorted(nodes, key=natural_key):
        node = nodes[host]
        if not isinstance(node, dict) or "checks" not in node:
            continue
        gpus = node.get("gpus") or []
        counts[host] = len(gpus) if isinstance(gpus, list) else int(gpus)
        if node.get("mig_gpus"):
            skipped.append(record("nccl_pair", host, None, None, "skip", "GPUs in MIG mode: no NCCL run across nodes"))
            continue
        if node.get("nccl_tests_present") is False:
            skipped.append(record("nccl_pair", host, None, None, "skip", "nccl-tests is not on this node"))
            continue
        active = [p for p in node.get("compute_ports") or [] if p.get("state") == "Active"]
        if not active or counts[host] < 1:
            skipped.append(record("nccl_pair", host, None, None, "skip", "no Active compute port or no GPU"))
            continue
        ports[host] = node["compute_ports"]
        by_fabric.setdefault(node.get("fabric") or "unknown", []).append(host)
    good = {}
    for host in sorted(partners or {}, key=natural_key):
        node = (partners or {})[host]
        if host in nodes or not isinstance(node, dict) or node.get("verdict") != "pass":
            continue
        active = [p for p in node.get("compute_ports") or [] if isinstance(p, dict) and p.get("state") == "Active"]
        if node.get("fabric") and active and int(node.get("gpus") or 0) >= 1:
            counts[host], ports[host] = int(node["gpus"]), node["compute_ports"]
            good.setdefault(node["fabric"], []).append(host)
    runs = []
    runs_nvlink, mndiag = _nvlink_domain_runs(nodes, counts, skipped)
    for fabric, hosts in sorted(by_fabric.items()):
        partner = (good.get(fabric) or [None])[0]
        if len(hosts) < 2 and partner is None:
            skipped.append(
                record(
                    "nccl_pair",
                    hosts[0],
                    None,
                    None,
                    "skip",
                    f"the only node on the {fabric} fabric and no validated node there: no pair to measure",
                )
            )
            continue
        pairs = [[hosts[i], hosts[i + 1]] for i in range(0, len(hosts) - 1, 2)]
        if len(hosts) % 2:
            pairs.append([hosts[-1], partner or hosts[0]])
        groups = [("nccl_pair", pair) for pair in pairs]
        if whole_set and len(hosts) > 2:
            groups.append(("nccl_all", hosts))
        for check, members in groups:
            gpus = min(counts[h] for h in members)
            expectation = nccl_multi_expectation({h: ports[h] for h in members}, overrides)
            subject = "+".join(members) if check == "nccl_pair" else f"all {len(members)} {fabric} nodes"
            runs.append(
                {
                    "check": check,
                    "subject": subject,
                    "hosts": members,
                    "gpus_per_node": gpus,
                    "expectation": expectation,
                    "environment": dict(RING_ENVIRONMENT),
                }
            )
    return {"runs": runs + runs_nvlink, "skipped": skipped, "mndiag": mndiag}


def _nvlink_domain_runs(nodes, counts, skipped):
    """Per multi-node NVLink domain of this run's nodes (the trays whose GPUs all registered in one
    cluster UUID and clique): an NCCL run over all its trays with NCCL_MNNVL_ENABLE=1, and DCGM's
    multi-node diagnostic where it runs on them (node_health's ``mndiag``: None, or why not)."""
    domains = {}
    for host in sorted(nodes, key=natural_key):
        node = nodes[host]
        if not isinstance(node, dict) or "checks" not in node:
            continue
        domain = node.get("nvlink_domain")
        if not isinstance(domain, dict) or not domain.get("cluster_uuid"):
            continue
        if domain.get("problem"):
            skipped.append(record("nccl_mnnvl", host, None, None, "skip", domain["problem"]))
            continue
        if node.get("mig_gpus") or node.get("nccl_tests_present") is False or counts.get(host, 0) < 1:
            skipped.append(
                record("nccl_mnnvl", host, None, None, "skip", "GPUs in MIG mode, no GPU or no nccl-tests on this tray")
            )
            continue
        domains.setdefault((str(domain["cluster_uuid"]), str(domain.get("clique_id"))), []).append(host)
    runs, mndiag = [], []
    for (cluster, clique), hosts in sorted(domains.items()):
        name = f"NVLink domain {cluster} clique {clique}"
        if len(hosts) < 2:
            skipped.append(record("nccl_mnnvl", hosts[0], None, None, "skip", f"the only tray of {name} in this run"))
            continue
        expectations = [nodes[h].get("nccl_mnnvl_expected") or {} for h in hosts]
        floors = [e for e in expectations if e.get("floor") is not None]
        expectation = min(floors, key=lambda e: e["floor"]) if floors else (expectations[0] or {})
        subject = f"{len(hosts)} trays of {name}"
        runs.append(
            {
                "check": "nccl_mnnvl",
                "subject": subject,
                "hosts": hosts,
                "gpus_per_node": min(counts[h] for h in hosts),
                "expectation": expectation,
                "environment": dict(MNNVL_ENVIRONMENT),
            }
        )
        why = sorted({nodes[h]["mndiag"] for h in hosts if nodes[h].get("mndiag")})
        if why:
            skipped.append(record("mndiag", subject, None, None, "skip", "; ".join(why)))
        else:
            mndiag.append({"check": "mndiag", "subject": subject, "hosts": hosts})
    return runs, mndiag


SINFO_FORMAT = "%N|%t|%E"


def parse_sinfo_reasons(text):
    """``{node: reason}`` of the drained or draining nodes, from ``sinfo -h -N -o '%N|%t|%E'``."""
    reasons = {}
    for line in (text or "").splitlines():
        node, _sep, rest = line.strip().partition("|")
        state, _sep, reason = rest.partition("|")
        if node and state.strip().rstrip("*~#!%$@^-").startswith(("drain", "drng")):
            reasons[node] = reason.strip()
    return reasons


def common_partitions(text, nodes):
    """The Slurm partitions that hold every one of ``nodes``, in sinfo's order, from ``sinfo -h -N -o
    '%N|%R'`` (a node listed once per partition): where a run's srun must ask for, since without
    ``--partition`` it asks the default one, which need not hold them."""
    held = {}
    for line in (text or "").splitlines():
        node, _sep, partition = line.strip().partition("|")
        if node and partition.strip():
            held.setdefault(partition.strip(), set()).add(node)
    return [name for name, members in held.items() if set(nodes) <= members]


def report_nodes(hosts, health, nccl, facts, sinfo_text="", names=None):  # noqa: PLR0917 - parallel lists
    """The validation_report module's ``nodes``: per host that ran node_health, its checks, HCAs,
    compute ports and fabric, its NCCL run, its GPU facts and its current Slurm drain reason
    (``names``: each host's Slurm node name, its short host name, in the same order)."""
    reasons = parse_sinfo_reasons(sinfo_text)
    names = list(names or hosts)
    nodes = {}
    for index, host in enumerate(hosts):
        result = health[index] if index < len(health) else None
        if not isinstance(result, dict) or "checks" not in result:
            continue
        run = nccl[index] if index < len(nccl) else None
        nodes[host] = {
            "checks": result["checks"],
            "hcas": result.get("hcas") or [],
            "compute_ports": result.get("compute_ports") or [],
            "fabric": result.get("fabric"),
            "nccl": [run] if isinstance(run, dict) and "record" in run else [],
            "nvidia_gpu": facts[index] if index < len(facts) and isinstance(facts[index], dict) else {},
            "drained": reasons.get(names[index] if index < len(names) else host, ""),
            # gpuops-health's state file as node_health read it: the report's repair section.
            "health_state": result.get("health_state"),
            "name": names[index] if index < len(names) and names[index] else host,
        }
    return nodes
