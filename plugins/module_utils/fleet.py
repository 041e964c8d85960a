# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet state: what the cluster-wide files need from each node, kept across runs.

One JSON file per node (``<dir>/<node>.json``) on the fleet host. A record holds sections, each
written by the role that owns it (``slurm``: the node's Slurm description; ``scrape``: its
exporter targets; ``validation``: its last verdict) with the date its data last changed. A run
records the sections of the nodes it reached and keeps what earlier runs recorded for the others;
the cluster-wide files are rendered from the result, intersected with the inventory.

Everything here is pure: reading a folder and writing files is the fleet_state module's.
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpuops.cluster.plugins.module_utils.imex import ImexError
from ansible_collections.gpuops.cluster.plugins.module_utils.imex import domains as imex_domains
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import node_lines, plain_data

# The record layout this collection writes. A file of a higher number comes from a newer
# collection: refused, never rewritten in a layout it does not know.
SCHEMA = 1

# \Z, not $: "$" also matches before a trailing newline ("gpu01\n" would pass).
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
_HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}\Z")
_TARGET = re.compile(r"[A-Za-z0-9.:\[\]_-]+:[0-9]{1,5}\Z")
_UUID = re.compile(r"[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}\Z")
# An IPv4 or IPv6 address as the imex role records it (ipaddress checks it again when listed).
_ADDRESS = re.compile(r"[0-9A-Fa-f.:]{2,45}\Z")
_GUID = re.compile(r"[0-9a-f]{16}\Z")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9:]{8}Z)?\Z")

_SPEC_INTS = ("cpus", "boards", "sockets_per_board", "cores_per_socket", "threads_per_core", "real_memory", "gpus")


class FleetError(ValueError):
    """A fleet-state file or record that cannot be used; the message names the node, the file and the fix."""


def check_node(node):
    """An inventory name usable as a file name; raise FleetError otherwise."""
    if not isinstance(node, str) or not _NODE.match(node) or node in (".", ".."):
        raise FleetError(
            f"{node!r} cannot name a fleet-state record: use inventory names of letters, digits, '.', '_' and '-'."
        )
    return node


def file_name(node):
    return check_node(node) + ".json"


def _need(cond, node, path, what):
    if cond:
        return
    if path is None:
        raise FleetError(
            f"{node}: this run's data for the fleet state: {what}. The role that recorded it gave a bad value; "
            "report it with the node's facts."
        )
    raise FleetError(
        f"{node}: the fleet state's {path}: {what}. Delete the file (the next run that reaches {node} "
        f"records it again) or restore it from a backup."
    )


def _nvlink_domain(domain):
    """A recorded NVLink domain: ``{"cluster_uuid": a UUID, "clique_id": a 32-bit number}``."""
    if not isinstance(domain, dict) or not isinstance(domain.get("cluster_uuid"), str):
        return False
    clique = domain.get("clique_id")
    if isinstance(clique, bool) or not isinstance(clique, int):
        return False
    return bool(_UUID.match(domain["cluster_uuid"])) and 0 <= clique < 2**32


def _ib_leaf(leaf):
    """A recorded InfiniBand leaf switch: ``{"guid": 16 lowercase hex digits, "description"}``."""
    if not isinstance(leaf, dict) or not isinstance(leaf.get("guid"), str):
        return False
    return bool(_GUID.match(leaf["guid"])) and isinstance(leaf.get("description"), str)


def _slurm(data, node, path):
    _need(isinstance(data, dict), node, path, "slurm section is not a mapping")
    _need(
        isinstance(data.get("hostname"), str) and _HOSTNAME.match(data["hostname"]),
        node,
        path,
        f"slurm section has no usable hostname ({data.get('hostname')!r})",
    )
    spec = data.get("spec")
    _need(isinstance(spec, dict), node, path, "slurm section has no node description (spec)")
    for key in _SPEC_INTS:
        value = spec.get(key)
        _need(
            isinstance(value, int) and not isinstance(value, bool) and value >= 0,
            node,
            path,
            f"node description has no whole number {key} (got {value!r})",
        )
    _need(spec["cpus"] > 0 and spec["real_memory"] > 0, node, path, "node description has no CPUs or memory")
    _need(
        isinstance(data.get("job_gpu_metrics", False), bool),
        node,
        path,
        f"job_gpu_metrics {data.get('job_gpu_metrics')!r} is not true or false",
    )
    partitions = data.get("partitions", [])
    _need(
        isinstance(partitions, list) and all(isinstance(name, str) and name for name in partitions),
        node,
        path,
        f"partitions {partitions!r} is not a list of partition names",
    )
    _need(
        isinstance(data.get("configless", False), bool),
        node,
        path,
        f"configless {data.get('configless')!r} is not true or false",
    )
    domain = data.get("nvlink_domain")
    _need(
        domain is None or _nvlink_domain(domain),
        node,
        path,
        f"nvlink_domain {domain!r} is not a cluster UUID and a clique number",
    )
    leaves = data.get("ib_leaves", [])
    _need(
        isinstance(leaves, list) and all(_ib_leaf(leaf) for leaf in leaves),
        node,
        path,
        f"ib_leaves {leaves!r} is not a list of leaf switches (guid, description)",
    )
    _need(isinstance(spec.get("gres"), str), node, path, "node description has no gres string")
    devices = spec.get("gres_devices")
    _need(isinstance(devices, list), node, path, "node description has no gres_devices list")
    for device in devices:
        described = isinstance(device, dict) and all(
            isinstance(value, str) for value in (device.get("type"), device.get("file", device.get("files")))
        )
        _need(
            described,
            node,
            path,
            f"gres device {device!r} has no type and file",
        )
        _need(
            all(isinstance(value, str) for value in device.values()),
            node,
            path,
            f"gres device {device!r} has a value that is not text",
        )


def _scrape(data, node, path):
    _need(isinstance(data, dict), node, path, "scrape section is not a mapping")
    targets = data.get("targets")
    _need(isinstance(targets, dict), node, path, "scrape section has no targets mapping")
    for job, target in targets.items():
        _need(
            isinstance(job, str) and isinstance(target, str) and _TARGET.match(target),
            node,
            path,
            f"scrape target {job!r}: {target!r} is not host:port",
        )
    labels = data.get("labels", {})
    _need(
        isinstance(labels, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()),
        node,
        path,
        "scrape labels are not text",
    )


def _imex(data, node, path):
    _need(isinstance(data, dict), node, path, "imex section is not a mapping")
    _need(
        isinstance(data.get("address"), str) and _ADDRESS.match(data["address"]),
        node,
        path,
        f"imex address {data.get('address')!r} is not an IP address",
    )
    _need(
        _nvlink_domain(data.get("nvlink_domain")),
        node,
        path,
        f"imex nvlink_domain {data.get('nvlink_domain')!r} is not a cluster UUID and a clique number",
    )
    gpus = data.get("gpus")
    _need(isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0, node, path, f"imex gpus {gpus!r}")


def _validation(data, node, path):
    _need(isinstance(data, dict), node, path, "validation section is not a mapping")
    _need(data.get("verdict") in ("pass", "fail"), node, path, f"validation verdict {data.get('verdict')!r}")
    _need(isinstance(data.get("date"), str) and _DATE.match(data["date"]), node, path, "validation date is not a date")
    _need(isinstance(data.get("findings", []), list), node, path, "validation findings are not a list")
    # What a later run needs to pair a node with this one (records of older runs lack them).
    _need(data.get("fabric") is None or isinstance(data["fabric"], str), node, path, "validation fabric is not text")
    ports = data.get("compute_ports", [])
    _need(
        isinstance(ports, list) and all(isinstance(p, dict) for p in ports),
        node,
        path,
        "validation compute_ports is not a list of mappings",
    )
    gpus = data.get("gpus", 0)
    _need(isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 0, node, path, f"validation gpus {gpus!r}")
    _need(isinstance(data.get("name", ""), str), node, path, "validation name is not text")
    failed = data.get("failed_checks", [])
    _need(
        isinstance(failed, list) and all(isinstance(name, str) for name in failed),
        node,
        path,
        "validation failed_checks is not a list of check names",
    )
    faults = data.get("gpu_faults", [])
    _need(
        isinstance(faults, list) and all(_gpu_fault(f) for f in faults),
        node,
        path,
        "validation gpu_faults is not a list of GPU faults (serial, t, detail)",
    )


def _gpu_fault(entry):
    """One fault of a GPU as validation records it: its board serial, time and what it was."""
    if not isinstance(entry, dict) or not isinstance(entry.get("serial"), str):
        return False
    when = entry.get("t")
    return isinstance(when, (int, float)) and not isinstance(when, bool) and isinstance(entry.get("detail", ""), str)


# Each section with the check its data must pass, written and read alike.
SECTIONS = {"slurm": _slurm, "scrape": _scrape, "validation": _validation, "imex": _imex}


def check_section(section, data, node, path):
    if section not in SECTIONS:
        raise FleetError(f"{section!r} is not a fleet-state section; the sections are {', '.join(sorted(SECTIONS))}.")
    SECTIONS[section](data, node, path)


def parse_record(text, node, path):
    """One node's record from its file's text: ``{"schema", "node", "sections": {name: {"data", "since"}}}``.

    Sections this collection does not know are kept as they are (a newer collection's, same
    schema); a known section is checked.
    """
    check_node(node)
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise FleetError(
            f"{node}: {path} is not valid JSON ({err}). Delete it (the next run that reaches {node} records "
            "it again) or restore it from a backup."
        ) from None
    _need(isinstance(record, dict), node, path, "is not a JSON object")
    schema = record.get("schema")
    _need(isinstance(schema, int) and not isinstance(schema, bool), node, path, "has no schema number")
    if schema > SCHEMA:
        raise FleetError(
            f"{node}: {path} has fleet-state schema {schema}, written by a newer gpuops.cluster (this one reads "
            f"{SCHEMA}). Run the newer collection, or move the folder aside to start the state again."
        )
    _need(record.get("node") == node, node, path, f"names node {record.get('node')!r}, not {node!r}")
    sections = record.get("sections")
    _need(isinstance(sections, dict), node, path, "has no sections")
    for name, entry in sections.items():
        _need(
            isinstance(entry, dict) and "data" in entry and isinstance(entry.get("since"), str),
            node,
            path,
            f"section {name!r} has no data and date",
        )
        if name in SECTIONS:
            check_section(name, entry["data"], node, path)
    return record


def render_record(record):
    """The file's text: sorted keys, so that equal records are equal bytes."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def merge(stored, section, fresh, inventory, *, today, remove=(), partial=False):
    """Merge this run's data for one section into the stored records.

    ``stored``: node -> parsed record (every file of the folder). ``fresh``: node -> this run's
    data for ``section``. ``inventory``: the nodes that belong to the section's files now.
    ``remove``: nodes whose whole record goes. Returns a dict with
    ``writes`` (node -> record to write, only where it differs), ``deletes`` (nodes whose file goes),
    ``nodes`` (node -> data, the inventory's nodes with data, fresh or kept), ``kept`` (node -> the
    date of the data kept for a node this run did not reach), ``missing`` (inventory nodes with
    no data), ``absent`` (node -> data, for the nodes recorded for this section but out of the
    inventory), ``new``
    (fresh nodes that had no data for this section before) and ``changed_keys`` (node -> the keys of
    its data that differ from what was recorded, for the fresh nodes that had data before).
    ``partial``: the inventory is a part of the cluster's (an AWX job slice holds its own hosts
    only), so a node recorded for this section and out of it is kept, never ``absent``.
    """
    if section not in SECTIONS:
        raise FleetError(f"{section!r} is not a fleet-state section; the sections are {', '.join(sorted(SECTIONS))}.")
    inventory = [check_node(node) for node in inventory]
    remove = set(check_node(node) for node in remove)
    if partial:
        listed = set(inventory)
        inventory += [
            node
            for node, record in sorted(stored.items())
            if node not in listed and section in (record.get("sections") or {})
        ]
    both = sorted(remove & set(fresh))
    if both:
        raise FleetError(
            f"{', '.join(both)}: recorded by this run and removed by it at once. Take "
            f"{'them' if len(both) > 1 else 'it'} out of the removal, or out of this run (--limit)."
        )
    writes, new, changed_keys = {}, [], {}
    for node in sorted(fresh):
        check_node(node)
        data = fresh[node]
        check_section(section, data, node, None)
        before = stored.get(node)
        entry = ((before or {}).get("sections") or {}).get(section)
        if entry is not None and entry["data"] == data:
            continue
        if entry is None:
            new.append(node)
        elif isinstance(entry["data"], dict) and isinstance(data, dict):
            changed_keys[node] = sorted(
                key for key in set(entry["data"]) | set(data) if entry["data"].get(key) != data.get(key)
            )
        record = {
            "schema": SCHEMA,
            "node": node,
            "sections": dict((before or {}).get("sections") or {}),
        }
        record["sections"][section] = {"data": data, "since": today}
        writes[node] = record
    nodes, kept, missing = {}, {}, []
    for node in inventory:
        if node in remove:
            continue
        if node in fresh:
            nodes[node] = fresh[node]
            continue
        entry = ((stored.get(node) or {}).get("sections") or {}).get(section)
        if entry is None:
            missing.append(node)
        else:
            nodes[node] = entry["data"]
            kept[node] = entry["since"]
    members = set(inventory)
    absent = {
        node: record["sections"][section]["data"]
        for node, record in sorted(stored.items())
        if section in record.get("sections", {}) and node not in members
    }
    deletes = sorted(node for node in remove if node in stored)
    return {
        "writes": writes,
        "deletes": deletes,
        "nodes": nodes,
        "kept": kept,
        "missing": missing,
        "absent": absent,
        "new": new,
        "changed_keys": changed_keys,
    }


def scrape_targets(nodes):
    """The file_sd entries of each scrape job, from the scrape section (node -> ``{"targets",
    "labels"}``): job -> ``[{"targets": [host:port], "labels": {"node": node, ...}}]`` in node order."""
    jobs = {}
    for node, data in sorted(plain_data(nodes).items()):
        for job, target in sorted(data["targets"].items()):
            jobs.setdefault(job, []).append({"targets": [target], "labels": {"node": node, **data.get("labels", {})}})
    return jobs


def files(section, nodes):
    """What the cluster-wide files say of a section's nodes (the ``nodes`` that :func:`merge` returns),
    worked out once in Python so that a template walks a few entries instead of every node: for
    ``slurm``, slurm.conf's and gres.conf's node lines (:func:`slurm.node_lines`); for ``scrape``,
    each job's file_sd entries (:func:`scrape_targets`); for ``imex``, each NVLink domain's IMEX node
    list (:func:`imex.domains`); for ``validation``, nothing."""
    if section == "imex":
        try:
            return {"domains": imex_domains(nodes)}
        except ImexError as err:
            raise FleetError(f"the fleet state's IMEX domains: {err}") from None
    if section == "slurm":
        return node_lines(nodes)
    if section == "scrape":
        return scrape_targets(nodes)
    return {}
