# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA IMEX for a multi-node NVLink domain: the daemons' node list, and their own word on the
domain as a gate.

IMEX (the Internode Memory Exchange service) lets the GPUs of a rack's trays share memory over
NVLink. Every tray of a domain runs ``nvidia-imex`` with the same ``nodes_config.cfg``: one address
per line, each tray's in the same order, the daemon finding itself by an address of its own ("Identified
this node as ID 0, using bind address of ...", the daemon's log). A list that names a tray of
another domain, or misses one, splits the domain; so the list comes from the trays' registration
(the cluster UUID and clique each GPU reports), never from a hand-kept file.

``nvidia-imex-ctl -N -j`` reads the whole domain as the daemons see it: the domain's state, each
node's status and its connection to every other node. The values are the protocol's enums as the
580 release's binary carries them (tests/unit/fixtures/SOURCES.md, imex/): a domain is ready for
jobs when it is ``UP``, every node ``READY`` and every connection ``CONNECTED``.
"""

from __future__ import annotations

import ipaddress
import json

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm_topology import MAX_DOMAIN_GPUS

COMMAND = "nvidia-imex-ctl -N -j"
DOMAIN_STATES = ("UP", "DEGRADED", "DOWN")
NODE_STATES = (
    "INITIALIZING",
    "STARTING_AUTH_SERVER",
    "WAITING_FOR_PEERS",
    "WAITING_FOR_RECOVERY",
    "INIT_GPU",
    "READY",
    "SHUTTING_DOWN",
    "UNAVAILABLE",
)
CONNECTION_STATES = (
    "INVALID",
    "NEVER_CONNECTED",
    "RECOVERING",
    "DISCONNECTED",
    "AUTHENTICATING",
    "CONNECTED",
    "WAITING_FOR_CONN_RECOVERY",
    "VERSION_MISMATCH",
    "NODES_MISMATCH",
    "AUTHENTICATION_ERROR",
)


class ImexError(ValueError):
    """A node list that would split or mix NVLink domains."""


def _field(mapping, key, kind, where):
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, kind):
        raise ParseError(
            f"{where} has no {key} of the expected kind (got {value!r}); is this nvidia-imex-ctl -N -j of the "
            "580 release or later?",
            COMMAND,
        )
    return value


def _state(value, known, what, where):
    if value not in known:
        raise ParseError(f"{where}: {what} {value!r} is none of {', '.join(known)}", COMMAND)
    return value


def parse_domain_status(text):
    """``nvidia-imex-ctl -N -j`` as ``{"status", "nodes": [{"index", "host", "hostname", "status",
    "version", "connections": {index: status}}], "problems": [text]}``, nodes in index order.
    ``problems`` names what keeps the domain from being ready: the domain not UP, a node not READY,
    a connection not CONNECTED (each once, from the node that reports it)."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ParseError(f"not JSON ({err}); the command prints one JSON object with -j", COMMAND) from err
    status = _state(_field(data, "status", str, "the domain"), DOMAIN_STATES, "state", "the domain")
    raw_nodes = _field(data, "nodes", dict, "the domain")
    nodes = []
    for key, node in raw_nodes.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()):
            raise ParseError(f"node id {key!r} is not a number", COMMAND)
        where = f"node #{key}"
        connections = {}
        for peer, link in _field(node, "connections", dict, where).items():
            if not (isinstance(peer, str) and peer.isascii() and peer.isdigit()):
                raise ParseError(f"{where}: connection id {peer!r} is not a number", COMMAND)
            connections[int(peer)] = _state(
                _field(link, "status", str, f"{where}'s connection to #{peer}"),
                CONNECTION_STATES,
                "connection",
                f"{where} to #{peer}",
            )
        nodes.append(
            {
                "index": int(key),
                "host": _field(node, "host", str, where),
                "hostname": node.get("hostName") if isinstance(node.get("hostName"), str) else "",
                "status": _state(_field(node, "status", str, where), NODE_STATES, "status", where),
                "version": node.get("version") if isinstance(node.get("version"), str) else "",
                "connections": dict(sorted(connections.items())),
            }
        )
    nodes.sort(key=lambda node: node["index"])
    problems = [] if status == "UP" else [f"the IMEX domain is {status}"]
    for node in nodes:
        name = f"node #{node['index']} ({node['host']})"
        if node["status"] != "READY":
            problems.append(f"{name} is {node['status']}")
        bad = [f"#{peer} {state}" for peer, state in node["connections"].items() if state != "CONNECTED"]
        if bad:
            problems.append(f"{name} has no connection to {', '.join(bad)}")
    return {"status": status, "nodes": nodes, "problems": problems}


def node_list(members):
    """The lines of ``nodes_config.cfg`` for one domain's trays: ``members`` maps each tray's
    inventory name to ``{"address", "nvlink_domain": {"cluster_uuid", "clique_id"}, "gpus"}``. One
    address per tray in inventory-name order (every tray writes the same file). Refused: trays of
    two domains, a tray outside any, an address that is not an IP address or that two trays share,
    more than :data:`MAX_DOMAIN_GPUS` GPUs."""
    if not members:
        raise ImexError("no tray to list: the IMEX node list needs the trays of one NVLink domain.")
    domains = {}
    for node in sorted(members):
        domain = members[node].get("nvlink_domain") or {}
        key = (str(domain.get("cluster_uuid", "")).lower(), domain.get("clique_id"))
        if not domain:
            raise ImexError(
                f"{node} registered in no NVLink domain (its GPUs name no cluster UUID): it cannot join an IMEX "
                "domain. Check its fabric registration (nvidia-smi -q: Fabric) or leave it out of IMEX."
            )
        domains.setdefault(key, []).append(node)
    if len(domains) > 1:
        parts = [
            f"cluster {uuid} clique {clique}: {', '.join(nodes)}" for (uuid, clique), nodes in sorted(domains.items())
        ]
        raise ImexError(
            "one IMEX node list would mix NVLink domains (" + "; ".join(parts) + "): each domain's trays run a "
            "domain of their own. Check the trays whose cluster UUID or clique differs from their rack's."
        )
    gpus = sum(int(members[node].get("gpus") or 0) for node in members)
    if gpus > MAX_DOMAIN_GPUS:
        raise ImexError(
            f"the NVLink domain of {', '.join(sorted(members))} would hold {gpus} GPUs, more than the "
            f"{MAX_DOMAIN_GPUS} of the largest rack (an NVL72): two racks report one cluster UUID and clique."
        )
    lines, seen = [], {}
    for node in sorted(members):
        raw = members[node].get("address")
        try:
            address = str(ipaddress.ip_address(str(raw)))
        except ValueError as err:
            raise ImexError(
                f"{node}'s IMEX address {raw!r} is not an IP address: the daemon finds itself in the list by "
                "an address of one of its interfaces."
            ) from err
        if address in seen:
            raise ImexError(f"{node} and {seen[address]} share the IMEX address {address}: each tray needs its own.")
        seen[address] = node
        lines.append(address)
    return lines


def domain_problems(status, expected):
    """What keeps this tray's IMEX domain from being ready: ``status`` as :func:`parse_domain_status`
    returns it, ``expected`` the node list the tray's ``nodes_config.cfg`` holds. The daemon reads
    its list at start: a daemon that lists other nodes runs an older list (restart it)."""
    problems = list(status["problems"])
    hosts = [node["host"] for node in status["nodes"]]
    if hosts != list(expected):
        problems.insert(
            0,
            "the daemon's nodes are {} but nodes_config.cfg lists {}: restart nvidia-imex on every tray of "
            "the domain so that each reads the same list".format(
                ", ".join(hosts) or "none", ", ".join(expected) or "none"
            ),
        )
    return problems


def parse_node_list(text):
    """The addresses of a ``nodes_config.cfg`` (one per line; blank lines and ``#`` comments skipped)."""
    addresses = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            addresses.append(str(ipaddress.ip_address(line)))
        except ValueError as err:
            raise ParseError(f"line {number} {line[:80]!r} is not an IP address", "nodes_config.cfg") from err
    return addresses


def domains(records):
    """The IMEX domains of the fleet state's ``imex`` section (inventory name to ``{"address",
    "nvlink_domain", "gpus"}``): ``[{"cluster_uuid", "clique_id", "members", "nodes"}]``, one per
    NVLink domain in (UUID, clique) order, ``nodes`` its node list (:func:`node_list`)."""
    grouped = {}
    for node in sorted(records):
        domain = records[node].get("nvlink_domain") or {}
        key = (str(domain.get("cluster_uuid", "")).lower(), domain.get("clique_id"))
        grouped.setdefault(key, {})[node] = records[node]
    return [
        {"cluster_uuid": uuid, "clique_id": clique, "members": sorted(members), "nodes": node_list(members)}
        for (uuid, clique), members in sorted(grouped.items(), key=lambda item: (item[0][0], item[0][1] or 0))
    ]


NODES_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"
EXPECTED = "domain UP, every node READY and CONNECTED"


def check_records(nodes_text, ctl_output, reason=None):
    """The validation records (``check``, ``subject``, ``expected``, ``measured``, ``verdict``,
    ``reason``) of a tray's IMEX domain: its node list's text, ``nvidia-imex-ctl -N -j``'s output
    (None with ``reason`` where the command could not run)."""

    def rec(measured, verdict, why):
        return {
            "check": "imex",
            "subject": "domain",
            "expected": EXPECTED,
            "measured": measured,
            "verdict": verdict,
            "reason": why,
        }

    try:
        expected = parse_node_list(nodes_text)
    except ParseError as err:
        return [rec(None, "fail", f"{NODES_CONFIG}: {err}")]
    if ctl_output is None:
        return [rec(None, "fail", f"`{COMMAND}`: {reason or 'no output'}")]
    try:
        status = parse_domain_status(ctl_output)
    except ParseError as err:
        return [rec(None, "fail", f"could not read `{COMMAND}`: {err}")]
    problems = domain_problems(status, expected)
    ready = sum(1 for node in status["nodes"] if node["status"] == "READY")
    measured = f"{status['status']}, {ready}/{len(status['nodes'])} nodes READY"
    return [rec(measured, "fail" if problems else "pass", "; ".join(problems))]
