# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL's settings for a node, from its hardware facts: which HCA ports (the compute fabric's
Active ports), the GPUDirect RDMA level from the GPU-to-NIC distances, RoCE's GID index, SHARP.

The policy lives here, so that the nccl role (through the nccl_conf filter), the sharp role and
the validation role choose the same HCA set with the same selectors. Pure functions; a setting
that cannot be written raises NcclConfigError naming the variable and the fix.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.topology import (
    GDR_LEVEL,
    PCIE_DISTANCES,
    natural_key,
    pcie_distance,
)

_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS")
_ROCE_V2_IPV4_GID = 3
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class NcclConfigError(ValueError):
    """Settings that cannot be written: names the variable, what is wrong and the fix."""

    def __init__(self, variable, message, fix):
        self.variable = variable
        super().__init__(f"{variable}: {message} Fix: {fix}")


def _fail(variable, message, fix):
    raise NcclConfigError(variable, message, fix)


def _ports(infiniband, fabric, hcas, exclude, notes, warnings):  # noqa: PLR0917 - two output lists
    infiniband = infiniband or {}
    active = infiniband.get("active_ports") or {}
    if fabric == "auto":
        fabric = "InfiniBand" if active.get("InfiniBand") else "Ethernet"
    chosen = []
    left_out = []
    for hca in sorted(infiniband.get("hcas") or [], key=lambda hca: natural_key(hca["name"])):
        for port in hca.get("ports") or []:
            if port.get("link_layer") != fabric:
                continue
            name = "{}:{}".format(hca["name"], port["port"])
            if hcas and hca["name"] not in hcas:
                continue
            if hca["name"] in exclude:
                left_out.append(f"{name} (excluded)")
            elif port.get("state") != "Active":
                left_out.append("{} ({})".format(name, port.get("state") or "no state"))
            else:
                chosen.append(name)
    known = {hca["name"] for hca in infiniband.get("hcas") or []}
    missing = sorted(set(hcas) - known)
    if missing:
        _fail(
            "nccl_ib_hcas",
            "{} not on this node (adapters: {}).".format(", ".join(missing), ", ".join(sorted(known)) or "none"),
            "name adapters that ibstat lists, or leave nccl_ib_hcas empty.",
        )
    used = {name.split(":")[0] for name in chosen}
    for name in hcas:
        if name in known and name not in used:
            ports = [
                "{}:{} {} {}".format(name, p.get("port"), p.get("link_layer"), p.get("state"))
                for hca in infiniband.get("hcas") or []
                if hca["name"] == name
                for p in hca.get("ports") or []
            ]
            warnings.append(
                f"nccl_ib_hcas lists {name}, which has no Active port on the {fabric} compute fabric "
                f"({', '.join(ports) or 'no ports'}): NCCL will not use it. Leave nccl_ib_hcas empty to "
                "take every Active compute port, or name the compute HCAs."
            )
    notes.append(f"compute fabric: {fabric}, {len(chosen)} Active port(s)")
    if left_out:
        notes.append("left out: " + ", ".join(left_out))
    return fabric, chosen


def _gdr_level(nvidia_gpu, chosen, gpudirect, notes):
    if gpudirect == "none":
        notes.append("no GPUDirect RDMA on this node: NCCL_NET_GDR_LEVEL=LOC keeps NCCL from trying it")
        return "LOC"
    topology = (nvidia_gpu or {}).get("topology") or {}
    links = topology.get("links") or {}
    nics = {name.split(":")[0] for name in chosen}
    worst, far = None, []
    for gpu in sorted((g for g in links if g.startswith("GPU")), key=natural_key):
        cells = [pcie_distance(links[gpu][nic]) for nic in nics if pcie_distance(links[gpu].get(nic))]
        if not cells:
            continue
        best = min(cells, key=PCIE_DISTANCES.index)
        if best == "SYS":
            far.append(gpu)
        if worst is None or PCIE_DISTANCES.index(best) > PCIE_DISTANCES.index(worst):
            worst = best
    if worst is None:
        notes.append("no GPU to NIC distances in the topology facts: NCCL_NET_GDR_LEVEL left to NCCL")
        return None
    if far:
        notes.append(
            "{} reach a compute NIC only across the CPU sockets: capped at PHB, so they do not use "
            "GPUDirect RDMA".format(", ".join(far))
        )
        return "PHB"
    notes.append(f"GPUDirect RDMA ({gpudirect}): every GPU's nearest compute NIC is at most {worst}")
    return GDR_LEVEL[worst]


def settings(
    infiniband,
    nvidia_gpu,
    *,
    fabric="auto",
    hcas=None,
    exclude_hcas=None,
    socket_ifname="",
    gid_index="auto",
    gdr_level="auto",
    gpudirect="none",
    collnet=False,
    overrides=None,
):
    if fabric not in ("auto", "InfiniBand", "Ethernet"):
        _fail("nccl_fabric", f"{fabric!r} is not a link layer.", "use auto, InfiniBand or Ethernet.")
    if gdr_level not in ("auto", *_LEVELS):
        _fail("nccl_net_gdr_level", f"{gdr_level!r} is not an NCCL level.", "use auto, " + ", ".join(_LEVELS) + ".")
    notes, warnings = [], []
    env = {}
    fabric, chosen = _ports(infiniband, fabric, list(hcas or []), list(exclude_hcas or []), notes, warnings)
    if chosen:
        env["NCCL_IB_HCA"] = "=" + ",".join(chosen)
    else:
        notes.append("no Active RDMA port on the compute fabric: NCCL falls back to sockets")
    if socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = "=" + str(socket_ifname).lstrip("=")
    if fabric == "Ethernet" and chosen:
        if gid_index == "auto":
            gid_index = _ROCE_V2_IPV4_GID
            notes.append("RoCE: GID index 3 is RoCE v2 over IPv4 on a ConnectX port with one IPv4 address")
        try:
            env["NCCL_IB_GID_INDEX"] = str(int(gid_index))
        except (TypeError, ValueError):
            _fail("nccl_ib_gid_index", f"{gid_index!r} is not a number.", "use auto, -1 (NCCL picks) or an index.")
    if chosen:
        level = _gdr_level(nvidia_gpu, chosen, gpudirect, notes) if gdr_level == "auto" else gdr_level
        if level:
            env["NCCL_NET_GDR_LEVEL"] = level
    if collnet:
        env["NCCL_COLLNET_ENABLE"] = "1"
        notes.append("SHARP: CollNet on")
    for key, given in sorted((overrides or {}).items()):
        if not _NAME.match(str(key)):
            _fail("nccl_conf_overrides", f"{key!r} is not a variable name.", "use names such as NCCL_IB_TIMEOUT.")
        if given is None or given == "":
            env.pop(key, None)
            continue
        value = ("1" if given else "0") if isinstance(given, bool) else str(given)
        if "\n" in value or value != value.strip():
            _fail(
                "nccl_conf_overrides",
                f"the value of {key} has a line break or surrounding spaces, which NCCL's file format keeps.",
                "write the value on one line without spaces around it.",
            )
        env[key] = value
    return {"env": env, "notes": notes, "hcas": chosen, "warnings": warnings}
