# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: nccl_conf
short_description: NCCL's settings for a node, from its hardware facts
version_added: 0.1.0
description:
  - Derives the C(/etc/nccl.conf) settings of a node from C(ansible_facts.infiniband)
    (M(gpuops.cluster.ib_facts)) and C(ansible_facts.nvidia_gpu) (M(gpuops.cluster.gpu_facts)).
  - C(NCCL_IB_HCA) lists, with exact names (C(=mlx5_0:1,...)), the Active ports of the compute
    fabric only; ports that are Down, or on the other link layer, are left out.
  - C(NCCL_NET_GDR_LEVEL) is the largest distance between a GPU and its nearest compute-fabric NIC,
    so that every GPU uses GPUDirect RDMA with that NIC; a NIC reachable only across the CPU
    sockets (C(SYS)) is capped at C(PHB), and no GPUDirect at all gives C(LOC).
  - Returns C(env) (the settings, in file order) and C(notes) (why, one line each, for the file's
    comments).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: C(ansible_facts.infiniband).
    type: dict
    required: true
  nvidia_gpu:
    description: C(ansible_facts.nvidia_gpu); its topology gives the GPU to NIC distances.
    type: dict
    required: true
  fabric:
    description:
      - The compute fabric's link layer. V(auto) takes InfiniBand when an InfiniBand port is
        Active, otherwise Ethernet (RoCE).
    type: str
    choices: [auto, InfiniBand, Ethernet]
    default: auto
  hcas:
    description: Only these adapters (names such as V(mlx5_0)); empty for every adapter of the fabric.
    type: list
    elements: str
  exclude_hcas:
    description: Adapters never to use (a storage or management port on the same fabric).
    type: list
    elements: str
  socket_ifname:
    description: Interface for NCCL's bootstrap and socket traffic, written as an exact name; empty leaves it out.
    type: str
  gid_index:
    description: C(NCCL_IB_GID_INDEX) on RoCE; V(auto) is 3, the RoCE v2 IPv4 entry of ConnectX's GID table.
    type: raw
    default: auto
  gdr_level:
    description: C(NCCL_NET_GDR_LEVEL); V(auto) derives it from the topology.
    type: str
    default: auto
  gpudirect:
    description: The GPUDirect RDMA method preflight resolved (peermem, dmabuf or none).
    type: str
    default: none
  collnet:
    description: Set C(NCCL_COLLNET_ENABLE=1) (SHARP).
    type: bool
    default: false
  overrides:
    description: Users' settings, merged last; a null or empty value removes a setting.
    type: dict
"""

EXAMPLES = r"""
- name: Write /etc/nccl.conf
  ansible.builtin.copy:
    content: "{{ __conf.env | dict2items | map(attribute='key') | zip(__conf.env.values()) | map('join', '=')
      | join('\n') }}\n"
    dest: /etc/nccl.conf
    mode: "0644"
  vars:
    __conf: "{{ ansible_facts.infiniband | gpuops.cluster.nccl_conf(ansible_facts.nvidia_gpu, gpudirect='peermem') }}"
"""

RETURN = r"""
_value:
  description: C(env) (name to value, in file order), C(notes) (list of str) and C(hcas) (the ports used).
  type: dict
  sample:
    env: {NCCL_IB_HCA: "=mlx5_0:1,mlx5_3:1", NCCL_NET_GDR_LEVEL: PIX}
    notes: ["compute fabric: InfiniBand, 2 Active ports"]
    hcas: ["mlx5_0:1", "mlx5_3:1"]
"""

import re

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.ibstat import natural_key

# nvidia-smi topo -m distances, nearest first, and the NCCL_NET_GDR_LEVEL each one needs. NCCL
# has no NODE level: a path across host bridges of one NUMA node is its PHB.
_DISTANCE = ["PIX", "PXB", "PHB", "NODE", "SYS"]
_GDR_LEVEL = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS")
_ROCE_V2_IPV4_GID = 3
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _fail(variable, message, fix):
    raise AnsibleFilterError(f"{variable}: {message} Fix: {fix}")


def _ports(infiniband, fabric, hcas, exclude, notes):
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
    for gpu in sorted((g for g in links if g.startswith("GPU")), key=lambda g: int(g[3:])):
        cells = [links[gpu][nic] for nic in nics if links[gpu].get(nic) in _DISTANCE]
        if not cells:
            continue
        best = min(cells, key=_DISTANCE.index)
        if best == "SYS":
            far.append(gpu)
        if worst is None or _DISTANCE.index(best) > _DISTANCE.index(worst):
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
    return _GDR_LEVEL[worst]


def nccl_conf(
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
    notes = []
    env = {}
    fabric, chosen = _ports(infiniband, fabric, list(hcas or []), list(exclude_hcas or []), notes)
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
    return {"env": env, "notes": notes, "hcas": chosen}


class FilterModule:
    def filters(self):
        return {"nccl_conf": nccl_conf}
