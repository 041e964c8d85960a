# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``lspci`` parser and the PCI device-ID tables that identify GPUs before any driver is in.

Device names come from the PCI ID database (https://pci-ids.ucw.cz, pciutils/pciids commit
006181e2c5); compute capabilities from https://developer.nvidia.com/cuda-gpus (compat.SOURCES['cuda_gpus']).
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError

LSPCI_COMMAND = "lspci -Dnn"

NVIDIA = "10de"
MELLANOX = "15b3"

# Chip (the codename before the bracket in the PCI name) -> (architecture, compute capability).
# Longest prefix wins.
CHIPS = (
    ("GV100", "volta", "7.0"),
    ("TU10", "turing", "7.5"),
    ("TU11", "turing", "7.5"),
    ("GA100", "ampere", "8.0"),
    ("GA10", "ampere", "8.6"),
    ("AD10", "ada", "8.9"),
    ("GH100", "hopper", "9.0"),
    ("GB100", "blackwell", "10.0"),
    ("GB102", "blackwell", "10.0"),
    ("GB110", "blackwell", "10.3"),  # B300/GB300: 10.3 per the CUDA GPU list (marked uncertain in our facts)
    ("GB20B", "blackwell", "12.1"),
    ("GB20", "blackwell", "12.0"),
)

# Datacenter GPUs, V100 to B300: device id -> (chip, model as pci.ids names it, slug).
GPUS = {
    "1db1": ("GV100GL", "Tesla V100 SXM2 16GB", "v100"),
    "1db4": ("GV100GL", "Tesla V100 PCIe 16GB", "v100"),
    "1db5": ("GV100GL", "Tesla V100 SXM2 32GB", "v100"),
    "1db6": ("GV100GL", "Tesla V100 PCIe 32GB", "v100"),
    "1db8": ("GV100GL", "Tesla V100 SXM3 32GB", "v100"),
    "1df5": ("GV100GL", "Tesla V100 SXM2 16GB", "v100"),
    "1df6": ("GV100GL", "Tesla V100S PCIe 32GB", "v100s"),
    "1eb8": ("TU104GL", "Tesla T4", "t4"),
    "20b0": ("GA100", "A100 SXM4 40GB", "a100"),
    "20b1": ("GA100", "A100 PCIe 40GB", "a100"),
    "20b2": ("GA100", "A100 SXM4 80GB", "a100"),
    "20b3": ("GA100", "A100-SXM-64GB", "a100"),
    "20b5": ("GA100", "A100 PCIe 80GB", "a100"),
    "20f1": ("GA100", "A100 PCIe 40GB", "a100"),
    "20b7": ("GA100GL", "A30 PCIe", "a30"),
    "20bd": ("GA100", "A800 SXM4 40GB", "a800"),
    "20f3": ("GA100", "A800-SXM4-80GB", "a800"),
    "20f5": ("GA100", "A800 80GB PCIe", "a800"),
    "20f6": ("GA100", "A800 40GB PCIe", "a800"),
    "2235": ("GA102GL", "A40", "a40"),
    "2236": ("GA102GL", "A10", "a10"),
    "2237": ("GA102GL", "A10G", "a10g"),
    "27b8": ("AD104GL", "L4", "l4"),
    "26b5": ("AD102GL", "L40", "l40"),
    "26b9": ("AD102GL", "L40S", "l40s"),
    "26b7": ("AD102GL", "L20", "l20"),
    "26ba": ("AD102GL", "L20", "l20"),
    "2330": ("GH100", "H100 SXM5 80GB", "h100"),
    "2331": ("GH100", "H100 PCIe", "h100"),
    "2321": ("GH100", "H100L 94GB", "h100"),
    "2336": ("GH100", "H100", "h100"),
    "2337": ("GH100", "H100 SXM5 64GB", "h100"),
    "2338": ("GH100", "H100 SXM5 96GB", "h100"),
    "2339": ("GH100", "H100 SXM5 94GB", "h100"),
    "233d": ("GH100", "H100 96GB", "h100"),
    "2322": ("GH100", "H800 PCIe", "h800"),
    "2324": ("GH100", "H800", "h800"),
    "2329": ("GH100", "H20", "h20"),
    "2335": ("GH100", "H200 SXM 141GB", "h200"),
    "233b": ("GH100", "H200 NVL", "h200"),
    "2342": ("GH100", "GH200 120GB / 480GB", "gh200"),
    "2348": ("GH100", "GH200 144G HBM3e", "gh200"),
    "2901": ("GB100", "B200", "b200"),
    "2909": ("GB100", "HGX B200 168GB", "b200"),
    "2920": ("GB100", "TS4 / B100", "b100"),
    "29bc": ("GB102", "B100", "b100"),
    "2941": ("GB100", "HGX GB200", "gb200"),
    "3182": ("GB110", "B300 SXM6 AC", "b300"),
    "31c2": ("GB110", "GB300", "gb300"),
    "31c3": ("GB110", "GB300", "gb300"),
    "2bb5": ("GB202GL", "RTX PRO 6000 Blackwell Server Edition", "rtx_pro_6000"),
}

# NVSwitch chips as the host sees them: PCI class "Bridge [0680]". 1ac1 is the first generation
# (DGX-2, HGX-2); any other NVIDIA bridge-class device is counted as an NVSwitch too.
NVSWITCHES = {
    "1ac1": "NVSwitch (first generation)",
    "1af1": "GA100 [A100 NVSwitch]",
    "22a3": "GH100 [H100 NVSwitch]",
}

# Mellanox/NVIDIA networking adapters (pci.ids, vendor 15b3).
HCAS = {
    "1011": "Connect-IB",
    "1013": "ConnectX-4",
    "1015": "ConnectX-4 Lx",
    "1017": "ConnectX-5",
    "1019": "ConnectX-5 Ex",
    "101b": "ConnectX-6",
    "101d": "ConnectX-6 Dx",
    "101f": "ConnectX-6 Lx",
    "1021": "ConnectX-7",
    "1023": "ConnectX-8",
    "a2d6": "BlueField-2 integrated ConnectX-6 Dx",
    "a2dc": "BlueField-3 integrated ConnectX-7",
}
HCA_VIRTUAL_FUNCTIONS = ("1012", "1014", "1016", "1018", "101a", "101c", "101e")
GPU_CLASSES = ("0300", "0302")  # VGA compatible controller, 3D controller
BRIDGE_CLASS = "0680"
NETWORK_CLASSES = ("0200", "0207")  # Ethernet controller, Infiniband controller

_ADDR = r"(?P<addr>(?:[0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
# lspci -nn: ADDR CLASS [cccc]: VENDOR DEVICE [vvvv:dddd] (rev rr), read in steps, each a search
# that stops at its first match: one regex of lazy groups backtracked quadratically on a line of
# many "[cccc]: " groups (4,000 took 4 s).
_NN_ADDR = re.compile(_ADDR + r"\s+")
_NN_CLASS = re.compile(r"\[([0-9a-fA-F]{4})\]:\s+")
_NN_IDS = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_NN_REV = re.compile(r"\s+\(rev ([0-9a-fA-F]{2})\)")
# lspci -n: ADDR cccc: vvvv:dddd (rev rr)
_N = re.compile(
    _ADDR + r"\s+(?P<class_id>[0-9a-fA-F]{4}):\s+(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})"
    r"(?:\s+\(rev (?P<rev>[0-9a-fA-F]{2})\))?(?P<rest>.*)\Z"
)
# lspci -mm[-n[n]]: ADDR "class" "vendor" "device" [-rXX] [-pXX] "subvendor" "subdevice"
_MM = re.compile(_ADDR + r'\s+(?P<fields>".*)\Z')
_QUOTED = re.compile(r'"([^"]*)"|(-[rp][0-9a-fA-F]+)')
_BRACKET_ID = re.compile(r"^(?P<name>.*?)\s*\[(?P<id>[0-9a-fA-F]{4})\]\Z")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}\Z")


def normalize_bus_id(bus_id):
    """``00000000:1E:00.0`` (nvidia-smi) and ``1e:00.0`` (lspci) -> ``0000:1e:00.0``."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3:
        return bus_id.strip().lower()
    domain = parts[0].lstrip("0").rjust(4, "0")
    return f"{domain}:{parts[1]}:{parts[2]}"


def _split_name(desc):
    # "NVIDIA Corporation GH100 [H100 SXM5 80GB]" -> vendor "NVIDIA Corporation", device "GH100 [...]"
    for vendor in ("NVIDIA Corporation", "Mellanox Technologies"):
        if desc.startswith(vendor + " "):
            return vendor, desc.removeprefix(vendor + " ")
    return None, desc


def _mm_device(match, line_number, line):
    tokens = _QUOTED.findall(match.group("fields"))
    quoted = [q for q, flag in tokens if not flag]
    flags = [flag for q, flag in tokens if flag]
    if len(quoted) < 3:
        raise ParseError("fewer than 3 quoted fields in an lspci -mm line", LSPCI_COMMAND, line_number, line)
    values = []
    for field in quoted[:3]:
        bracket = _BRACKET_ID.match(field)
        if bracket:
            values.append((bracket.group("name"), bracket.group("id").lower()))
        elif _HEX4.match(field):
            values.append((None, field.lower()))
        else:
            raise ParseError("lspci -mm needs -n or -nn for numeric ids", LSPCI_COMMAND, line_number, line)
    rev = next((flag[2:] for flag in flags if flag.startswith("-r")), None)
    return {
        "pci_bus_id": normalize_bus_id(match.group("addr")),
        "class_id": values[0][1],
        "class_name": values[0][0],
        "vendor_id": values[1][1],
        "vendor_name": values[1][0],
        "device_id": values[2][1],
        "device_name": values[2][0],
        "revision": rev,
    }


def _nn_device(line):
    """An ``lspci -nn`` line as a device, or None when it is not one; linear in the line's length."""
    addr = _NN_ADDR.match(line)
    if not addr:
        return None
    klass = _NN_CLASS.search(line, addr.end())
    if not klass:
        return None
    ids = _NN_IDS.search(line, klass.end())
    if not ids:
        return None
    rev = _NN_REV.match(line, ids.end())
    name_start, name_end, class_start, class_end = klass.end(), ids.start(), addr.end(), klass.start()
    vendor_name, device_name = _split_name(line[name_start:name_end].strip())
    return {
        "pci_bus_id": normalize_bus_id(addr.group("addr")),
        "class_id": klass.group(1).lower(),
        "class_name": line[class_start:class_end].strip() or None,
        "vendor_id": ids.group(1).lower(),
        "vendor_name": vendor_name,
        "device_id": ids.group(2).lower(),
        "device_name": device_name or None,
        "revision": rev.group(1) if rev else None,
    }


def parse_lspci(text):
    """Parse ``lspci -Dnn`` (also ``-nn``, ``-Dn`` and ``-Dnnmm``): one dict per device.

    Keys: ``pci_bus_id`` (``0000:53:00.0``), ``class_id``, ``class_name``, ``vendor_id``,
    ``vendor_name``, ``device_id``, ``device_name`` and ``revision``; names are None where the
    format has none.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", LSPCI_COMMAND)
    devices = []
    seen = set()
    for line_number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("pcilib:", "lspci:")):
            continue
        device = _nn_device(stripped)
        if device is None:
            match = _N.match(stripped)
            if match:
                device = {
                    "pci_bus_id": normalize_bus_id(match.group("addr")),
                    "class_id": match.group("class_id").lower(),
                    "class_name": None,
                    "vendor_id": match.group("vendor").lower(),
                    "vendor_name": None,
                    "device_id": match.group("device").lower(),
                    "device_name": None,
                    "revision": match.group("rev"),
                }
            else:
                match = _MM.match(stripped)
                if not match:
                    raise ParseError("not an lspci -nn device line", LSPCI_COMMAND, line_number, line)
                device = _mm_device(match, line_number, line)
        if device["pci_bus_id"] in seen:
            raise ParseError("PCI address listed twice", LSPCI_COMMAND, line_number, line)
        seen.add(device["pci_bus_id"])
        devices.append(device)
    return devices


def chip_info(name):
    """``"GH100 [H100 SXM5 80GB]"`` -> ``("hopper", "9.0")``, or ``(None, None)``."""
    if not name:
        return None, None
    chip = name.split()[0]
    for prefix, architecture, capability in sorted(CHIPS, key=lambda row: -len(row[0])):
        if chip.startswith(prefix):
            return architecture, capability
    return None, None


def slugify(name):
    """A GPU name -> a short lowercase model name usable as a Slurm GRES type."""
    if not name:
        return None
    inner = re.search(r"\[([^\]]+)\]", name)
    text = inner.group(1) if inner else name
    text = re.sub(r"\b(NVIDIA|Tesla|GeForce|Corporation)\b", " ", text)
    words = re.findall(r"[A-Za-z0-9]+", text.lower())
    return "_".join(words[:3]) or None


def identify_gpu(device_id, name=None):
    """What the tables know of a GPU: ``{"model", "slug", "architecture", "compute_capability", "known"}``."""
    row = GPUS.get((device_id or "").lower())
    if row:
        chip, model, slug = row
        architecture, capability = chip_info(chip)
        return {
            "model": model,
            "slug": slug,
            "architecture": architecture,
            "compute_capability": capability,
            "known": True,
        }
    architecture, capability = chip_info(name)
    return {
        "model": name,
        "slug": slugify(name),
        "architecture": architecture,
        "compute_capability": capability,
        "known": False,
    }


def classify(devices):
    """Split parsed lspci devices into ``gpus``, ``nvswitches`` and ``hcas`` (Mellanox network functions)."""
    gpus, nvswitches, hcas = [], [], []
    for device in devices:
        if device["vendor_id"] == NVIDIA and device["class_id"] in GPU_CLASSES:
            gpus.append(dict(device, **identify_gpu(device["device_id"], device["device_name"])))
        elif device["vendor_id"] == NVIDIA and device["class_id"] == BRIDGE_CLASS:
            nvswitches.append(device)
        elif device["vendor_id"] == MELLANOX and device["class_id"] in NETWORK_CLASSES:
            named_vf = "Virtual Function" in (device["device_name"] or "")
            virtual_function = device["device_id"] in HCA_VIRTUAL_FUNCTIONS or named_vf
            model = HCAS.get(device["device_id"]) or device["device_name"]
            hcas.append(dict(device, model=model, virtual_function=virtual_function))
    return {"gpus": gpus, "nvswitches": nvswitches, "hcas": hcas}


LSPCI_VERBOSE_COMMAND = "lspci -D -vvv"

# lspci -vvv: a device starts at the line's first column with its address; its details are indented.
_V_HEAD = re.compile(r"(?P<addr>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<desc>\S.*)\Z")
_V_BUS = re.compile(
    r"Bus:\s+primary=(?P<primary>[0-9a-fA-F]{2}),\s+secondary=(?P<secondary>[0-9a-fA-F]{2}),"
    r"\s+subordinate=(?P<subordinate>[0-9a-fA-F]{2})\b"
)
_V_FLAG = re.compile(r"(?P<name>[A-Za-z]+)(?P<value>[+-])")
# The ACS control bits lspci names (pciutils ls-ecaps.c, PCIe base specification 7.7.11.3).
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


def _acs_flags(value, line_number, line):
    flags = {}
    for word in value.split():
        match = _V_FLAG.fullmatch(word)
        if not match or match.group("name") not in ACS_BITS:
            raise ParseError(
                f"ACSCtl lists {word!r}, not one of {', '.join(ACS_BITS)} with + or -",
                LSPCI_VERBOSE_COMMAND,
                line_number,
                line,
            )
        flags[match.group("name")] = match.group("value") == "+"
    if not flags:
        raise ParseError("ACSCtl lists no control bit", LSPCI_VERBOSE_COMMAND, line_number, line)
    return flags


def parse_lspci_verbose(text):
    """Parse ``lspci -vvv`` (with or without ``-D`` and ``-nn``): what the ACS check needs of each device.

    One dict per device, in the order printed: ``pci_bus_id`` (``0000:17:01.0``), ``description``
    (the rest of its first line), ``bridge`` (``{"primary", "secondary", "subordinate"}`` as
    integers, from a bridge's ``Bus:`` line; None for an endpoint), ``acs`` (the ``ACSCtl:`` bits as
    ``{"ReqRedir": True, ...}``; None where the device has no ACS capability) and
    ``capabilities_read`` (False where lspci printed ``<access denied>``: not run as root).
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", LSPCI_VERBOSE_COMMAND)
    devices = []
    seen = set()
    device = None
    for line_number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        if not line[0].isspace():
            if line.startswith(("pcilib:", "lspci:")):
                continue
            head = _V_HEAD.match(line)
            if not head:
                raise ParseError("not an lspci -vvv device line", LSPCI_VERBOSE_COMMAND, line_number, line)
            bus_id = normalize_bus_id(head.group("addr"))
            if bus_id in seen:
                raise ParseError("PCI address listed twice", LSPCI_VERBOSE_COMMAND, line_number, line)
            seen.add(bus_id)
            device = {
                "pci_bus_id": bus_id,
                "description": head.group("desc"),
                "bridge": None,
                "acs": None,
                "capabilities_read": True,
            }
            devices.append(device)
            continue
        if device is None:
            raise ParseError("a detail line before any device", LSPCI_VERBOSE_COMMAND, line_number, line)
        stripped = line.strip()
        if stripped.startswith("Bus:"):
            bus = _V_BUS.match(stripped)
            if not bus:
                raise ParseError(
                    "a bridge's Bus: line without primary, secondary and subordinate",
                    LSPCI_VERBOSE_COMMAND,
                    line_number,
                    line,
                )
            device["bridge"] = {key: int(bus.group(key), 16) for key in ("primary", "secondary", "subordinate")}
        elif stripped.startswith("ACSCtl:"):
            device["acs"] = _acs_flags(stripped.removeprefix("ACSCtl:"), line_number, line)
        elif stripped == "Capabilities: <access denied>":
            device["capabilities_read"] = False
    return devices


def pci_ancestors(devices, bus_id):
    """The bridges above ``bus_id`` (as ``parse_lspci_verbose`` gives them), the nearest first.

    A bridge is above a device when the device's bus lies in the bridge's secondary..subordinate
    range, in the same PCI domain."""
    domain, _sep, rest = (normalize_bus_id(bus_id) or "").partition(":")
    try:
        bus = int(rest.split(":")[0], 16)
    except ValueError:
        return []

    def is_above(device):
        bridge = device["bridge"]
        if not bridge or device["pci_bus_id"] == normalize_bus_id(bus_id):
            return False
        return device["pci_bus_id"].split(":")[0] == domain and bridge["secondary"] <= bus <= bridge["subordinate"]

    above = [d for d in devices if is_above(d)]
    # The nearest bridge has the narrowest range.
    return sorted(above, key=lambda d: d["bridge"]["subordinate"] - d["bridge"]["secondary"])
