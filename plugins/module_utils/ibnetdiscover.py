# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The InfiniBand fabric's shape from ``ibnetdiscover``, for Slurm's topology/tree.

``ibnetdiscover`` (infiniband-diags, read-only: it walks the subnet with SMP queries and changes
nothing) prints one record per node of the subnet: a header (``Switch``, ``Ca`` or ``Rt``, its port
count, ``"S-<node GUID>"``, then after ``#`` its node description in quotes) and one line per
linked port: ``[port]`` (a CA's port GUID in parentheses), the peer ``"S-<GUID>"[port]``, and
after ``#`` the peer's description. The format is rdma-core's (infiniband-diags/ibnetdiscover.c,
the man page's "Topology file format"); the fixtures are its documented example and a capture.

A compute node is found in the fabric by its adapters' node description, whose first word is the
host name (rdma-core writes ``<hostname> <device>``, such as ``gpu01 mlx5_0``): every node the
fleet state records is placed, whether or not a run reaches it. Its leaves are the switches its
adapters link to. Nodes whose leaves are shared (a rail-optimised fabric puts each node's eight
adapters on eight rail leaves, shared by the nodes of a scalable unit) form one group, and Slurm
gets one leaf per group; above them one switch per connected fabric.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError

COMMAND = "ibnetdiscover"
_HEADER = re.compile(r'(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9A-Fa-f]{1,16})"\s*(?:#\s*"([^"]*)")?')
_PORT = re.compile(
    r'\[(\d+)\](?:\[ext \d+\])?(?:\([0-9A-Fa-f]{1,16}\))?\s*"([SHR])-([0-9A-Fa-f]{1,16})"\[(\d+)\]'
    r'(?:\[ext \d+\])?(?:\s*\([0-9A-Fa-f]{1,16}\))?\s*(?:#[^"]*"([^"]*)")?'
)
_KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
_PREFIX_KIND = {"S": "switch", "H": "ca", "R": "router"}
# NVIDIA's managed switches describe themselves "MF0;<switch host name>:<model>/U1".
_MANAGED = re.compile(r"MF0;([A-Za-z][A-Za-z0-9_-]{0,62}):")


def _guid(text):
    return text.lower().zfill(16)


def parse_ibnetdiscover(text):
    """``ibnetdiscover``'s topology as ``{guid: {"kind", "ports", "description", "links": {port:
    (peer guid, peer port)}}}`` (GUIDs as 16 lowercase hex digits). A peer named only on a link
    (outside the records printed) is kept with the description the link gives."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", COMMAND)
    nodes, current, seen = {}, None, False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or "=" in line.split('"', 1)[0]:
            continue
        if line.startswith(("Switch", "Ca", "Rt")):
            match = _HEADER.match(line)
            if not match:
                raise ParseError(f"line {number}: a node header that does not read: {line[:120]!r}", COMMAND)
            kind, ports, _prefix, guid, description = match.groups()
            guid = _guid(guid)
            node = nodes.setdefault(guid, {"kind": _KINDS[kind], "ports": 0, "description": "", "links": {}})
            node.update(kind=_KINDS[kind], ports=int(ports), description=description or node["description"])
            current, seen = guid, True
            continue
        if line.startswith("["):
            match = _PORT.match(line)
            if not match or current is None:
                raise ParseError(f"line {number}: a port line that does not read: {line[:120]!r}", COMMAND)
            port, prefix, peer, peer_port, description = match.groups()
            peer = _guid(peer)
            nodes[current]["links"][int(port)] = (peer, int(peer_port))
            other = nodes.setdefault(
                peer, {"kind": _PREFIX_KIND[prefix], "ports": 0, "description": description or "", "links": {}}
            )
            other["links"].setdefault(int(peer_port), (current, int(port)))
            continue
        if line.startswith("Chassis") or line == "Non-Chassis Nodes":
            continue
        raise ParseError(f"line {number}: not a line of ibnetdiscover's topology: {line[:120]!r}", COMMAND)
    if not seen:
        raise ParseError("no Switch, Ca or Rt record: is this ibnetdiscover's output?", COMMAND)
    return nodes


def switch_name(guid, description):
    """A Slurm switch name for a switch: the host name a managed switch gives in its description
    (``MF0;leaf01:MQM9700/U1``), else ``ib_`` and its GUID."""
    match = _MANAGED.match(description or "")
    return match.group(1) if match else f"ib_{guid}"


def _find(parents, item):
    while parents[item] != item:
        parents[item] = parents[parents[item]]
        item = parents[item]
    return item


def switch_map(fabric, hostnames):
    """Slurm's tree from a fabric (:func:`parse_ibnetdiscover`) for the compute nodes ``hostnames``
    (inventory name to host name): ``{"switches": [slurm_topology_switches' entries], "unplaced":
    [inventory names of nodes none of whose adapters the fabric shows on a switch]}``, grouped as
    :func:`tree_from_leaves` does, with one top switch per connected fabric."""
    by_host = {}
    for node in sorted(hostnames):
        by_host.setdefault(str(hostnames[node]).split(".", maxsplit=1)[0].lower(), []).append(node)
    leaves_of = {}
    for entry in fabric.values():
        if entry["kind"] != "ca":
            continue
        host = (entry["description"].split() or [""])[0].split(".", maxsplit=1)[0].lower()
        for node in by_host.get(host, []):
            for peer, _port in entry["links"].values():
                if fabric.get(peer, {}).get("kind") == "switch":
                    leaves_of.setdefault(node, {})[peer] = fabric[peer]["description"]
    # Connected fabrics: switches joined by switch-to-switch links.
    fabric_of = {guid: guid for guid, entry in fabric.items() if entry["kind"] == "switch"}
    for guid in fabric_of:
        for peer, _port in fabric[guid]["links"].values():
            if peer in fabric_of:
                fabric_of[_find(fabric_of, peer)] = _find(fabric_of, guid)
    switches = tree_from_leaves(leaves_of, lambda leaf: _find(fabric_of, leaf))
    return {"switches": switches, "unplaced": sorted(node for node in hostnames if node not in leaves_of)}


def tree_from_leaves(leaves_of, fabric_of=None):
    """Slurm's switches from each compute node's leaf switches (``leaves_of``: inventory name to
    ``{guid: description}``): one Slurm leaf per group of nodes that share a leaf switch, named
    after the group's first switch (:func:`switch_name`), then one switch above the groups of each
    fabric that has more than one (``fabric_of``: a leaf's fabric; without it, one fabric)."""
    parents, names = {}, {}
    for leaves in leaves_of.values():
        for leaf, description in leaves.items():
            parents.setdefault(leaf, leaf)
            names.setdefault(leaf, description)
    for leaves in leaves_of.values():
        first, *rest = sorted(leaves)
        for leaf in rest:
            parents[_find(parents, leaf)] = _find(parents, first)
    groups, members = {}, {}
    for node, leaves in sorted(leaves_of.items()):
        groups.setdefault(_find(parents, min(leaves)), []).append(node)
    for guid in sorted(parents):
        members.setdefault(_find(parents, guid), []).append(guid)
    switches, tops = [], {}
    for root in sorted(groups, key=lambda leaf: members[leaf][0]):
        first = members[root][0]
        name = switch_name(first, names[first])
        switches.append({"name": name, "nodes": groups[root]})
        tops.setdefault(fabric_of(first) if fabric_of else "", []).append(name)
    for index, (_root, group_names) in enumerate(sorted(tops.items(), key=lambda item: item[1][0])):
        if len(group_names) > 1:
            switches.append({"name": f"ib_fabric{index}", "switches": group_names})
    return switches


SMPQUERY = "smpquery -D"
_SMP_LINE = re.compile(r"([A-Za-z][A-Za-z ]*?):\.*(.*)")


def parse_smpquery(text):
    """``smpquery``'s ``nodeinfo`` or ``nodedesc`` (libibmad's dump: ``Key:....value`` lines after a
    ``# Node info:`` header; ``Node Description:....text``) as ``{key: value}``."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", SMPQUERY)
    fields = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("ibwarn:"):
            continue
        match = _SMP_LINE.fullmatch(line)
        if not match:
            raise ParseError(f"line {number}: not a Key:....value line: {line[:120]!r}", SMPQUERY)
        fields[match.group(1)] = match.group(2).strip()
    if not fields:
        raise ParseError("no Key:....value line: is this smpquery's nodeinfo or nodedesc?", SMPQUERY)
    return fields


def neighbour(nodeinfo, nodedesc):
    """The node at the other end of a port (``smpquery -D nodeinfo 0,1`` and ``nodedesc 0,1``):
    ``{"kind": "switch" | "ca" | "router", "guid": 16 hex digits, "description"}``."""
    info, desc = parse_smpquery(nodeinfo), parse_smpquery(nodedesc)
    kinds = {"Switch": "switch", "Channel Adapter": "ca", "Router": "router"}
    kind = kinds.get(info.get("NodeType", ""))
    guid = info.get("Guid", "")
    if kind is None or not re.fullmatch(r"0x[0-9A-Fa-f]{1,16}", guid):
        raise ParseError(
            f"nodeinfo has no NodeType of {', '.join(kinds)} and Guid (got {info.get('NodeType')!r}, {guid!r})",
            SMPQUERY,
        )
    if "Node Description" not in desc:
        raise ParseError("nodedesc has no Node Description line", SMPQUERY)
    return {"kind": kind, "guid": _guid(guid[2:]), "description": desc["Node Description"]}
