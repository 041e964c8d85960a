# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The InfiniBand fabric's shape for Slurm's topology/tree, from what each node reads of its ports.

A node reads the switch at the other end of each Active InfiniBand port with two read-only
direct-route queries of one hop (``smpquery -C <ca> -P <port> -D nodeinfo 0,1`` and ``nodedesc
0,1``, infiniband-diags; libibmad prints ``Key:....value`` lines): those switches are its leaves.
Nodes whose leaves are shared (a rail-optimised fabric puts each node's eight adapters on eight
rail leaves, shared by the nodes of a scalable unit) form one group, and Slurm gets one leaf per
group, then one switch above the groups.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError

# NVIDIA's managed switches describe themselves "MF0;<switch host name>:<model>/U1".
_MANAGED = re.compile(r"MF0;([A-Za-z][A-Za-z0-9_-]{0,62}):")


def _guid(text):
    return text.lower().zfill(16)


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


def tree_from_leaves(leaves_of):
    """Slurm's switches from each compute node's leaf switches (``leaves_of``: inventory name to
    ``{guid: description}``): one Slurm leaf per group of nodes that share a leaf switch, named
    after the group's first switch (:func:`switch_name`), then one switch above the groups where
    there is more than one (one fabric: a site with several declares its tree)."""
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
    switches = []
    for root in sorted(groups, key=lambda leaf: members[leaf][0]):
        first = members[root][0]
        name = switch_name(first, names[first])
        switches.append({"name": name, "nodes": groups[root]})
    if len(switches) > 1:
        switches.append({"name": "ib_fabric0", "switches": [switch["name"] for switch in switches]})
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
