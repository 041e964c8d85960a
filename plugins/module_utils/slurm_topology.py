# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's topology.conf from the fleet state: blocks from NVLink domains, a tree from the switches.

A multi-node NVLink domain (the trays of a GB200 or GB300 NVL72 rack) is where a job's GPUs talk
over NVLink instead of the network: each GPU's fabric registration names its cluster (a UUID) and
its clique, and gpu_facts gives the node's ``nvlink_domain`` when every GPU of the node registered
in one. The slurm role records it with the node (``nvlink_domain`` of the slurm section), so that a
run that does not reach a node still writes its block. ``topology/block`` (Slurm 23.11 and later)
places a job in as few blocks as it can: one block per domain, ``BlockName=<name> Nodes=<hosts>``.

Where the fabric's shape cannot be read, the switches are declared (``slurm_topology_switches``):
each switch with the compute nodes it connects (a leaf) or the switches below it, written as
``topology/tree``'s ``SwitchName=<name> Nodes=<hosts>`` or ``Switches=<names>`` lines.

What Slurm does with them (topology.conf(5), and the block plugin's block_record.c of 24.11):
every node must hang off a switch of the tree, and a job spans only nodes of one connected tree;
the first block's node count is the base block size unless ``BlockSizes`` says otherwise, and a
smaller block later is fatal to slurmctld, so blocks of unequal sizes get an explicit
``BlockSizes`` (the smallest, and the four doublings Slurm assumes by default); a node outside
every block is allocated only to jobs whose candidate nodes include no block node (a partition of
its own).
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import hostlist_compress, hostlist_expand
from ansible_collections.gpuops.cluster.plugins.module_utils.ib_fabric import tree_from_leaves

MODES = ("auto", "none", "block", "tree")
# The largest NVLink domain sold as one rack: GB200 NVL72 and GB300 NVL72, 72 GPUs in 18 compute
# trays (NVIDIA's GB200 NVL72 and GB300 NVL72 product pages).
MAX_DOMAIN_GPUS = 72
# topology/block's levels by default: the base block and 2, 4, 8 and 16 of them (block_record.c,
# bit_nset(block_levels, 0, 4)).
_BLOCK_LEVELS = (1, 2, 4, 8, 16)
_SWITCH_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
_UUID_HEX = re.compile(r"[^0-9a-f]")


class TopologyError(ValueError):
    """A topology that Slurm would refuse, or that would place jobs wrongly."""


def domains(nodes):
    """The NVLink domains of the slurm section's nodes (inventory name -> ``{"hostname", "spec",
    "nvlink_domain"?}``): ``[{"name", "cluster_uuid", "clique_id", "members", "nodes", "count",
    "gpus"}]`` sorted by name, ``members`` the inventory names and ``nodes`` the host names as a
    hostlist."""
    groups = {}
    for node in sorted(nodes):
        data = nodes[node]
        domain = data.get("nvlink_domain") if isinstance(data, dict) else None
        if not domain:
            continue
        key = (str(domain["cluster_uuid"]).lower(), int(domain["clique_id"]))
        groups.setdefault(key, []).append(node)
    short = {}
    for uuid, _clique in groups:
        short.setdefault(_UUID_HEX.sub("", uuid)[:8], set()).add(uuid)
    out = []
    for (uuid, clique), members in groups.items():
        digits = _UUID_HEX.sub("", uuid)
        tag = digits[:8] if len(short[digits[:8]]) == 1 else digits
        gpus = sum(int(nodes[node]["spec"].get("gpus") or 0) for node in members)
        entry = {
            "name": f"nvl_{tag}_{clique}",
            "cluster_uuid": uuid,
            "clique_id": clique,
            "members": members,
            "nodes": hostlist_compress([nodes[node]["hostname"] for node in members]),
            "count": len(members),
            "gpus": gpus,
        }
        out.append(entry)
    return sorted(out, key=lambda entry: entry["name"])


def _switch_nodes(switch, value):
    """The inventory names a leaf lists (a list of names or a hostlist expression)."""
    if not isinstance(value, (str, list)) or not all(isinstance(item, str) for item in value):
        raise TopologyError(
            f"slurm_topology_switches: switch {switch}'s nodes must be a hostlist such as gpu[01-18] or a list of "
            f"inventory names, not {value!r}."
        )
    try:
        return hostlist_expand(value)
    except ValueError as err:
        raise TopologyError(f"slurm_topology_switches: switch {switch}'s nodes: {err}") from err


def _read_switches(switches):
    """The map as ``[(name, nodes or None, children or None)]``, each entry's shape checked."""
    if not isinstance(switches, list) or not switches:
        raise TopologyError(
            "slurm_topology is tree, but slurm_topology_switches is empty: list each switch with the compute "
            "nodes it connects (nodes) or the switches below it (switches)."
        )
    out, names = [], set()
    for index, switch in enumerate(switches):
        where = f"slurm_topology_switches[{index}]"
        if not isinstance(switch, dict):
            raise TopologyError(f"{where} is not a mapping with name and nodes or switches.")
        name = switch.get("name")
        if not isinstance(name, str) or not _SWITCH_NAME.match(name):
            raise TopologyError(
                f"{where}: name {name!r} must start with a letter and hold up to 64 letters, digits, _ or -."
            )
        if name in names:
            raise TopologyError(f"slurm_topology_switches: switch {name} is listed twice.")
        names.add(name)
        if bool(switch.get("nodes")) == bool(switch.get("switches")):
            raise TopologyError(
                f"slurm_topology_switches: switch {name} needs either nodes (a leaf) or switches (above leaves), "
                "not both and not neither."
            )
        if switch.get("nodes"):
            out.append((name, _switch_nodes(name, switch["nodes"]), None))
        else:
            children = switch["switches"]
            children = [children] if isinstance(children, str) else children
            if not isinstance(children, list) or not all(isinstance(child, str) for child in children):
                raise TopologyError(
                    f"slurm_topology_switches: switch {name}'s switches must be a list of switch names, not "
                    f"{switch['switches']!r}."
                )
            out.append((name, None, children))
    return out


def _check_parents(entries):
    """Each switch below one parent, every child a switch of the map, no loop: the parent of each
    switch (a walk up from each switch stops at one already walked, so the check is linear)."""
    names, parents = {entry[0] for entry in entries}, {}
    for name, _nodes, children in entries:
        for child in children or []:
            if child not in names:
                raise TopologyError(
                    f"slurm_topology_switches: switch {name} lists {child} below it, which is not a switch of the map."
                )
            if child == name or child in parents:
                raise TopologyError(
                    f"slurm_topology_switches: switch {child} is below {parents.get(child, name)} and {name}; "
                    "a switch has one parent in Slurm's tree."
                )
            parents[child] = name
    walked = set()
    for name in names:
        path, at = set(), name
        while at not in walked:
            if at in path:
                raise TopologyError(f"slurm_topology_switches: switch {name} is in a loop of switches ({at}).")
            path.add(at)
            if at not in parents:
                break
            at = parents[at]
        walked.update(path)
    return parents


def _tree(switches, hostnames):
    """topology.conf's switch lines and the map's names that are not compute nodes of the cluster (a
    node that left the inventory, or that has not joined yet: left out; a leaf or a switch left with
    nothing below it is left out too)."""
    entries = _read_switches(switches)
    parents = _check_parents(entries)
    leaf_of, unknown = {}, []
    for name, nodes, _children in entries:
        for node in nodes or []:
            if node not in hostnames:
                unknown.append(node)
            elif node in leaf_of:
                raise TopologyError(
                    f"slurm_topology_switches: {node} is on switch {leaf_of[node]} and on switch {name}; a node hangs "
                    "off one leaf."
                )
            else:
                leaf_of[node] = name
    missing = [node for node in hostnames if node not in leaf_of]
    if missing:
        raise TopologyError(
            f"slurm_topology_switches: {', '.join(missing)} hang off no switch of the map; Slurm's topology/tree "
            "needs every node on a leaf. Add them to their leaf switch."
        )
    # Switches with something of the cluster below them, leaves first, then each level above.
    kept = set()
    for name, nodes, _children in entries:
        if nodes and any(node in hostnames for node in nodes):
            at = name
            while at not in kept:
                kept.add(at)
                if at not in parents:
                    break
                at = parents[at]
    lines = []
    for name, nodes, children in entries:
        if name not in kept:
            continue
        if nodes:
            lines.append(
                f"SwitchName={name} Nodes={hostlist_compress([hostnames[n] for n in nodes if n in hostnames])}"
            )
        else:
            lines.append(f"SwitchName={name} Switches={','.join(child for child in children if child in kept)}")
    return lines, unknown


def _nodes(count):
    return f"{count} node{'s' if count != 1 else ''}"


def _blocks(found):
    counts = sorted({entry["count"] for entry in found})
    lines = []
    if len(counts) > 1:
        base = counts[0]
        lines.append("BlockSizes=" + ",".join(str(base * level) for level in _BLOCK_LEVELS))
    lines.extend(f"BlockName={entry['name']} Nodes={entry['nodes']}" for entry in found)
    return lines


def topology(described, mode="auto", switches=None, discover=False):
    """What slurm.conf and topology.conf say of the cluster's shape, from the node lines of the fleet
    state (:func:`slurm.node_lines`: ``domains`` and ``hostnames``), ``slurm_topology`` and
    ``slurm_topology_switches``: ``{"plugin": "topology/block" | "topology/tree" | None, "lines":
    [topology.conf's lines], "why": the decision in words, "outside": inventory names of the nodes
    outside every block}``.

    ``auto`` takes blocks where a node of the cluster registered in an NVLink domain, else the
    declared tree, else no topology; ``block`` and ``tree`` insist on theirs."""
    if mode not in MODES:
        raise TopologyError(f"slurm_topology is {mode!r}; it is one of {', '.join(MODES)}.")
    found = described.get("domains") or []
    hostnames = dict(described.get("hostnames") or {})
    discovered = []
    if discover:
        # The leaf switches the nodes' InfiniBand ports read (one group per shared leaf, one
        # fabric), beside the declared switches (the nodes discovery does not see: RoCE, Ethernet).
        discovered = tree_from_leaves(
            {node: dict(leaves) for node, leaves in (described.get("ib_leaves") or {}).items()}
        )
        switches = list(switches or []) + discovered
    if mode == "none" or (mode == "auto" and not found and not switches):
        why = "slurm_topology is none" if mode == "none" else "no NVLink domain in the cluster and no switch map"
        return {"plugin": None, "lines": [], "why": why, "outside": []}
    if mode == "block" or (mode == "auto" and found):
        if not found:
            raise TopologyError(
                "slurm_topology is block, but no compute node of the cluster registered in a multi-node NVLink "
                "domain (gpu_facts: nvlink_domain). Set slurm_topology: tree with slurm_topology_switches, or auto."
            )
        for entry in found:
            if entry["gpus"] > MAX_DOMAIN_GPUS:
                raise TopologyError(
                    f"NVLink domain {entry['name']} (cluster {entry['cluster_uuid']}, clique {entry['clique_id']}) "
                    f"would hold {entry['gpus']} GPUs on {entry['count']} nodes ({', '.join(entry['members'])}), more "
                    f"than the {MAX_DOMAIN_GPUS} of the largest rack (an NVL72): two racks report one cluster UUID and "
                    "clique. Check each tray's fabric registration (nvidia-smi -q: Fabric, Cluster UUID and Clique "
                    "ID) and the NVLink switch trays' partitions; until then set slurm_topology: none."
                )
        inside = {node for entry in found for node in entry["members"]}
        outside = [node for node in hostnames if node not in inside]
        why = (
            f"topology/block: {len(found)} NVLink domain{'s' if len(found) != 1 else ''} "
            f"({', '.join(entry['name'] + ' ' + _nodes(entry['count']) for entry in found)})"
        )
        if outside:
            why += f"; {', '.join(outside)} outside every block get only jobs of a partition without block nodes"
        return {"plugin": "topology/block", "lines": _blocks(found), "why": why, "outside": outside}
    tree, unknown = _tree(switches, hostnames)
    leaves = sum(1 for line in tree if " Nodes=" in line)
    why = f"topology/tree: {leaves} leaf switch{'es' if leaves != 1 else ''} of slurm_topology_switches"
    if discovered:
        why += " and of the InfiniBand leaves the nodes read"
    if unknown:
        why += f"; {', '.join(unknown)} of the map, not compute nodes of the cluster, left out"
    return {"plugin": "topology/tree", "lines": tree, "why": why, "outside": []}
