# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for ``ibstat`` (infiniband-diags) and ``ibdev2netdev`` (MLNX/DOCA OFED)."""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError, text_lines
from ansible_collections.gpuops.cluster.plugins.module_utils.topology import natural_key

IBSTAT_COMMAND = "ibstat"
IBDEV2NETDEV_COMMAND = "ibdev2netdev"

_CA = re.compile(r"CA '([^']+)'\Z")
_PORT = re.compile(r"Port (\d+):\Z")
_KEY = re.compile(r"[A-Za-z][A-Za-z ]*\Z")
_GUID = re.compile(r"0x[0-9a-fA-F]+\Z")
_RATE = re.compile(r"\d+(?:\.\d+)?\Z")

_CA_FIELDS = {
    "CA type": "ca_type",
    "Number of ports": "number_of_ports",
    "Firmware version": "firmware_version",
    "Hardware version": "hardware_version",
    "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}
_PORT_FIELDS = {
    "State": "state",
    "Physical state": "physical_state",
    "Rate": "rate",
    "Base lid": "base_lid",
    "LMC": "lmc",
    "SM lid": "sm_lid",
    "Capability mask": "capability_mask",
    "Port GUID": "port_guid",
    "Link layer": "link_layer",
}
_INT_FIELDS = ("number_of_ports", "base_lid", "lmc", "sm_lid")
_GUID_FIELDS = ("node_guid", "system_image_guid", "port_guid", "capability_mask")
STATES = ("Active", "Down", "Initializing", "Armed", "Polling", "Disabled", "Unknown")


def _value(key, raw, line_number, line):
    if key in _INT_FIELDS:
        # isdigit() alone takes "²" and other digits int() refuses.
        if not (raw.isascii() and raw.isdigit()):
            raise ParseError(f"{key} is not a number", IBSTAT_COMMAND, line_number, line)
        return int(raw)
    if key in _GUID_FIELDS:
        if not _GUID.match(raw):
            raise ParseError(f"{key} is not a hexadecimal value", IBSTAT_COMMAND, line_number, line)
        return raw.lower()
    if key == "rate":
        if not _RATE.match(raw):
            raise ParseError("Rate is not a number of Gb/s", IBSTAT_COMMAND, line_number, line)
        rate = float(raw)
        return int(rate) if rate.is_integer() else rate
    if key == "state" and raw not in STATES:
        raise ParseError(f"unknown port state {raw!r}", IBSTAT_COMMAND, line_number, line)
    return raw


def _close_ca(ca, line_number, line):
    if ca is None:
        return
    declared = ca["number_of_ports"]
    if declared is not None and declared != len(ca["ports"]):
        raise ParseError(
            "CA {} declares {} port(s) but {} are listed".format(ca["name"], declared, len(ca["ports"])),
            IBSTAT_COMMAND,
            line_number,
            line,
        )
    for port in ca["ports"]:
        if port["state"] is None:
            raise ParseError(
                "port {} of CA {} has no State".format(port["port"], ca["name"]), IBSTAT_COMMAND, line_number, line
            )
        # ibstat from before RoCE printed no Link layer: its ports were InfiniBand.
        port["link_layer_reported"] = port["link_layer"] is not None
        if port["link_layer"] is None:
            port["link_layer"] = "InfiniBand"


def parse_ibstat(text):
    """Parse ``ibstat`` output into a list of CAs, each with its ``ports``.

    CA keys: ``name``, ``ca_type``, ``number_of_ports``, ``firmware_version``, ``hardware_version``,
    ``node_guid``, ``system_image_guid``, ``ports``. Port keys: ``port``, ``state``,
    ``physical_state``, ``rate`` (Gb/s, int unless fractional such as 2.5), ``base_lid``, ``lmc``,
    ``sm_lid``, ``capability_mask``, ``port_guid``, ``link_layer`` and ``link_layer_reported``.
    Fields an old ibstat does not print are None. Lines of unknown ``key: value`` form (error
    and warning lines of the diags, such as ``ibwarn: ...``) are ignored.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", IBSTAT_COMMAND)
    cas = []
    ca = None
    port = None
    last = (None, None)  # the last non-blank line: where a CA that does not add up ends
    for line_number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        stripped = line.strip()
        if not stripped:
            continue
        previous, last = last, (line_number, line)
        match = _CA.match(stripped)
        if match:
            _close_ca(ca, *previous)
            if any(known["name"] == match.group(1) for known in cas):
                raise ParseError(f"CA {match.group(1)} is listed twice", IBSTAT_COMMAND, line_number, line)
            ca = {"name": match.group(1), "ports": []}
            ca.update(dict.fromkeys(_CA_FIELDS.values()))
            cas.append(ca)
            port = None
            continue
        match = _PORT.match(stripped)
        if match:
            if ca is None:
                raise ParseError("a Port before any CA", IBSTAT_COMMAND, line_number, line)
            number = int(match.group(1))
            if any(known["port"] == number for known in ca["ports"]):
                raise ParseError(f"port {number} is listed twice", IBSTAT_COMMAND, line_number, line)
            port = {"port": number}
            port.update(dict.fromkeys(_PORT_FIELDS.values()))
            ca["ports"].append(port)
            continue
        # partition, not one regex of a lazy key and spaces: that backtracked quadratically on a
        # long line without a colon (32k spaces took 2 s).
        key, colon, raw = stripped.partition(":")
        key, raw = key.rstrip(), raw.strip()
        if not colon or not _KEY.match(key):
            raise ParseError("not a CA, Port or 'key: value' line", IBSTAT_COMMAND, line_number, line)
        if key in _PORT_FIELDS:
            if port is None:
                raise ParseError("a port field outside of a Port block", IBSTAT_COMMAND, line_number, line)
            port[_PORT_FIELDS[key]] = _value(_PORT_FIELDS[key], raw, line_number, line)
        elif key in _CA_FIELDS:
            if ca is None or port is not None:
                raise ParseError("a CA field outside of the CA's header", IBSTAT_COMMAND, line_number, line)
            ca[_CA_FIELDS[key]] = _value(_CA_FIELDS[key], raw, line_number, line)
    _close_ca(ca, *last)
    return cas


_IBDEV2NETDEV = re.compile(r"(\S+) port (\d+) ==> (\S+) \(([^)]*)\)\Z")


def parse_ibdev2netdev(text):
    """Parse ``ibdev2netdev``: ``[{"ca": "mlx5_0", "port": 1, "netdev": "ib0", "state": "Up"}, ...]``."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", IBDEV2NETDEV_COMMAND)
    entries = []
    for line_number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        match = _IBDEV2NETDEV.match(line.strip())
        if not match:
            raise ParseError(
                "not a '<ca> port <n> ==> <netdev> (<state>)' line", IBDEV2NETDEV_COMMAND, line_number, line
            )
        entries.append(
            {"ca": match.group(1), "port": int(match.group(2)), "netdev": match.group(3), "state": match.group(4)}
        )
    return entries


def active_ports(cas):
    """``{"InfiniBand": ["mlx5_0:1", ...], "Ethernet": [...]}``: the Active ports per link layer, in natural order."""
    result = {}
    for ca in sorted(cas, key=lambda ca: natural_key(ca["name"])):
        for port in ca["ports"]:
            if port["state"] == "Active":
                result.setdefault(port["link_layer"], []).append("{}:{}".format(ca["name"], port["port"]))
    return result


# ---------------------------------------------------------------------------------------------
# ibv_devinfo (rdma-core) and ibstatus (infiniband-diags)

IBV_DEVINFO_COMMAND = "ibv_devinfo"
IBSTATUS_COMMAND = "ibstatus"
_DEVINFO_FIELD = re.compile(r"([a-z_]+):\s*(.*)\Z")
_MTU = re.compile(r"(\d+)(?:\s*\(\d+\))?\Z")
_PORT_STATE = re.compile(r"(PORT_[A-Z_]+)(?:\s*\(\d+\))?\Z")


def _devinfo_int(value, key, number, line):
    match = _MTU.match(value)
    if not match:
        raise ParseError(f"{key} is not a number: {value!r}", IBV_DEVINFO_COMMAND, number, line)
    return int(match.group(1))


def parse_ibv_devinfo(text):
    """Parse ``ibv_devinfo``: ``[{"hca_id", "fw_ver", "board_id", "vendor_part_id" (int),
    "ports": [{"port", "state" ("PORT_ACTIVE"...), "link_layer", "active_mtu", "max_mtu"}]}]``."""
    hcas = []
    hca = port = None
    for number, line in enumerate(text_lines(text, IBV_DEVINFO_COMMAND), 1):
        stripped = line.strip()
        if not stripped or stripped == "Device ports:":
            continue
        match = _DEVINFO_FIELD.match(stripped)
        if not match:
            if stripped.startswith("No IB devices found"):
                continue
            # ibv_devinfo -v: capability flags on indented lines of their own (BAD_PKEY_CNTR,
            # "Unknown flags: 0x..."), and values without a colon ("log atomic arg sizes (mask) 0x8").
            if hca is not None and line[:1].isspace():
                continue
            raise ParseError("not a 'key: value' line", IBV_DEVINFO_COMMAND, number, line)
        key, value = match.group(1), match.group(2).strip()
        if key == "hca_id":
            if any(known["hca_id"] == value for known in hcas):
                raise ParseError(f"{value} is listed twice", IBV_DEVINFO_COMMAND, number, line)
            hca = {"hca_id": value, "fw_ver": None, "board_id": None, "vendor_part_id": None, "ports": []}
            hcas.append(hca)
            port = None
        elif hca is None:
            raise ParseError(f"{key} before any hca_id", IBV_DEVINFO_COMMAND, number, line)
        elif key == "port":
            if not value.isascii() or not value.isdigit():
                raise ParseError(f"port is not a number: {value!r}", IBV_DEVINFO_COMMAND, number, line)
            port = {"port": int(value), "state": None, "link_layer": None, "active_mtu": None, "max_mtu": None}
            hca["ports"].append(port)
        elif key in ("fw_ver", "board_id") and port is None:
            hca[key] = value
        elif key == "vendor_part_id" and port is None:
            hca[key] = _devinfo_int(value, key, number, line)
        elif port is not None and key == "state":
            state = _PORT_STATE.match(value)
            if not state:
                raise ParseError(f"unknown port state {value!r}", IBV_DEVINFO_COMMAND, number, line)
            port["state"] = state.group(1)
        elif port is not None and key in ("active_mtu", "max_mtu"):
            port[key] = _devinfo_int(value, key, number, line)
        elif port is not None and key == "link_layer":
            port[key] = value
    return hcas


_IBSTATUS_DEVICE = re.compile(r"Infiniband device '([^']+)' port (\d+) status:\Z")
_IBSTATUS_FIELD = re.compile(r"([a-z_ ]+?):\s+(.*)\Z")
_IBSTATUS_STATE = re.compile(r"\d+:\s*(\S+)\Z")
_IBSTATUS_RATE = re.compile(r"(\d+(?:\.\d+)?) Gb/sec\b")


def parse_ibstatus(text):
    """Parse ``ibstatus``: ``[{"name", "port", "state" ("ACTIVE"...), "phys_state" ("LinkUp"...),
    "rate" (Gb/s, a number), "link_layer"}]``, one per port."""
    ports = []
    current = None
    for number, line in enumerate(text_lines(text, IBSTATUS_COMMAND), 1):
        stripped = line.strip()
        if not stripped:
            continue
        match = _IBSTATUS_DEVICE.match(stripped)
        if match:
            current = {
                "name": match.group(1),
                "port": int(match.group(2)),
                "state": None,
                "phys_state": None,
                "rate": None,
                "link_layer": None,
            }
            if any(p["name"] == current["name"] and p["port"] == current["port"] for p in ports):
                raise ParseError("a port is listed twice", IBSTATUS_COMMAND, number, line)
            ports.append(current)
            continue
        match = _IBSTATUS_FIELD.match(stripped)
        if not match:
            raise ParseError("not a device header or a 'key: value' line", IBSTATUS_COMMAND, number, line)
        if current is None:
            raise ParseError("a field before any 'Infiniband device' line", IBSTATUS_COMMAND, number, line)
        key, value = match.group(1), match.group(2).strip()
        if key in ("state", "phys state"):
            state = _IBSTATUS_STATE.match(value)
            if not state:
                raise ParseError(f"{key} is not 'N: NAME': {value!r}", IBSTATUS_COMMAND, number, line)
            current["state" if key == "state" else "phys_state"] = state.group(1)
        elif key == "rate":
            rate = _IBSTATUS_RATE.match(value)
            if not rate:
                raise ParseError(f"rate is not 'N Gb/sec': {value!r}", IBSTATUS_COMMAND, number, line)
            value = float(rate.group(1))
            current["rate"] = int(value) if value.is_integer() else value
        elif key == "link_layer":
            current["link_layer"] = value
    return ports
