# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for ``nvidia-smi topo -m`` and ``nvidia-smi -q -x``.

Both take the command's text and return plain data; bad input raises :class:`ParseError`
(a ``ValueError``) naming the line. Nothing here runs a command.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError, text_lines
from ansible_collections.gpuops.cluster.plugins.module_utils.topology import rank as cell_rank

TOPO_COMMAND = "nvidia-smi topo -m"
QUERY_COMMAND = "nvidia-smi -q -x"

# Terminal colour and cursor sequences: nvidia-smi underlines the header even into a pipe (the
# H100 capture in tests/unit/fixtures/topo), and a copy through a terminal that dropped the ESC
# bytes leaves "[4m" and "[0m" behind.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\[[0-9;]*m")
# One matrix cell. Old drivers said SOC where newer ones say SYS.
_LINK = r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC"
_LINKS_RE = re.compile(rf"(?:{_LINK})+")
_LINK_RE = re.compile(_LINK)
# Columns whose names hold spaces; anything else in the header is one word.
_MULTIWORD = re.compile(r"CPU\s+Affinity|NUMA\s+Affinity|GPU\s+NUMA\s+ID")
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]*\Z")
_NIC_LEGEND = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*\Z")
_CPULIST = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*\Z")
_INT = re.compile(r"-?\d+\Z")
_MAX_CPUS = 1 << 16
# Words of the affinity columns, should a copy have broken their names apart.
_AFFINITY_WORDS = ("CPU", "NUMA", "GPU", "Affinity", "ID")


def expand_cpulist(text, command=TOPO_COMMAND, line_number=None, line=None):
    """``"0-3,8"`` -> ``[0, 1, 2, 3, 8]``; ``N/A`` -> None."""
    text = text.strip()
    if text in ("", "N/A"):
        return None
    if not _CPULIST.match(text):
        raise ParseError(f"not a CPU list: {text!r}", command, line_number, line)
    cpus = set()
    for part in text.split(","):
        low, _sep, high = part.partition("-")
        first, last = int(low), int(high or low)
        if last < first or last - first >= _MAX_CPUS or len(cpus) > _MAX_CPUS:
            raise ParseError(f"impossible CPU range {part!r}", command, line_number, line)
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def _int_or_none(text, what, line_number, line):
    text = text.strip()
    if text in ("", "N/A"):
        return None
    if not _INT.match(text):
        raise ParseError(f"{what} is not a number: {text!r}", TOPO_COMMAND, line_number, line)
    return int(text)


def _split_cells(token):
    """A matrix cell, or several cells run together (``PXBNODE``, ``SYSSYS``) as some copies show."""
    if _LINKS_RE.fullmatch(token):
        return _LINK_RE.findall(token)
    return None


def _header_columns(line, line_number):
    columns = []
    position = 0
    for match in _MULTIWORD.finditer(line):
        start = match.start()
        columns.extend(line[position:start].split())
        columns.append(" ".join(match.group(0).split()))
        position = match.end()
    columns.extend(line[position:].split())
    devices = []
    while columns and _LABEL.match(columns[0]) and columns[0] not in _AFFINITY_WORDS:
        devices.append(columns.pop(0))
    if not devices or devices[0] != "GPU0":
        raise ParseError("the matrix header does not start with GPU0", TOPO_COMMAND, line_number, line)
    if len(set(devices)) != len(devices):
        raise ParseError("a device appears twice in the matrix header", TOPO_COMMAND, line_number, line)
    return devices, columns


def parse_topo(text):
    """Parse ``nvidia-smi topo -m`` (or ``--matrix``/``-mp``) output.

    Returns ``{"gpus": [...], "nics": [...], "links": {a: {b: cell}}, "cpu_affinity": {gpu: [int]|None},
    "numa_affinity": {gpu: int|None}, "gpu_numa_id": {gpu: int|None}}``. NICs shown as ``NIC<n>``
    are resolved to their kernel names through the ``NIC Legend``.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", TOPO_COMMAND)
    lines = _ANSI.sub("", text).replace("\r", "").split("\n")
    header_at = None
    for number, line in enumerate(lines, 1):
        words = line.split()
        # The header starts with GPU0 and goes on with column names; GPU0's row goes on with a cell.
        if words[:1] == ["GPU0"] and (len(words) == 1 or _split_cells(words[1]) is None):
            header_at = number
            break
    if header_at is None:
        first = next(((n, line) for n, line in enumerate(lines, 1) if line.strip()), (None, None))
        raise ParseError("no matrix header (a line of column names starting with GPU0)", TOPO_COMMAND, *first)
    devices, extra = _header_columns(lines[header_at - 1], header_at)
    width = len(devices)

    links = {}
    affinity_tokens = {}
    number = header_at
    last_row = header_at
    for number in range(header_at + 1, len(lines) + 1):
        line = lines[number - 1]
        words = line.split()
        if not words or words[0].rstrip(":") in ("Legend", "NIC"):
            break
        label = words[0]
        if label not in devices:
            raise ParseError(f"row {label!r} is not a column of the matrix", TOPO_COMMAND, number, line)
        if label in links:
            raise ParseError(f"row {label!r} appears twice", TOPO_COMMAND, number, line)
        cells = []
        rest = words[1:]
        while rest and len(cells) < width:
            split = _split_cells(rest[0])
            if split is None:
                break
            cells.extend(split)
            rest = rest[1:]
        if len(cells) != width:
            raise ParseError(
                f"row {label} has {len(cells)} cells where the header has {width} devices",
                TOPO_COMMAND,
                number,
                line,
            )
        if cells[devices.index(label)] != "X":
            raise ParseError(f"row {label} does not have X on the diagonal", TOPO_COMMAND, number, line)
        if rest and not label.startswith("GPU"):
            raise ParseError(f"unexpected text after the cells of {label}", TOPO_COMMAND, number, line)
        links[label] = {dev: ("SYS" if cell == "SOC" else cell) for dev, cell in zip(devices, cells) if dev != label}
        affinity_tokens[label] = (rest, number, line)
        last_row = number

    missing = [dev for dev in devices if dev not in links]
    if missing:
        raise ParseError(
            "no matrix row for {} (the matrix ends here)".format(", ".join(missing)),
            TOPO_COMMAND,
            last_row,
            lines[last_row - 1],
        )

    legend = {}
    first = number - 1
    for line in lines[first:]:
        match = _NIC_LEGEND.match(line)
        if match:
            legend[match.group(1)] = match.group(2)

    def name(dev):
        return legend.get(dev, dev)

    unnamed = [dev for dev in devices if re.match(r"NIC\d+\Z", dev) and dev not in legend]
    if unnamed:
        raise ParseError(
            "the NIC Legend is missing or cut off: no kernel name for {} (run nvidia-smi topo -m again and keep "
            "its whole output)".format(", ".join(unnamed)),
            TOPO_COMMAND,
            header_at,
            lines[header_at - 1],
        )

    gpus = [dev for dev in devices if re.match(r"GPU\d+\Z", dev)]
    nics = [name(dev) for dev in devices if dev not in gpus]
    if len(set(nics)) != len(nics):
        raise ParseError("two NICs resolve to the same name in the NIC Legend", TOPO_COMMAND)

    cpu_affinity, numa_affinity, gpu_numa_id = {}, {}, {}
    for gpu in gpus:
        rest, number, line = affinity_tokens[gpu]
        values = dict(zip(extra, rest))
        if len(rest) > len(extra):
            raise ParseError("more affinity values than affinity columns", TOPO_COMMAND, number, line)
        cpu_affinity[gpu] = expand_cpulist(values.get("CPU Affinity", ""), TOPO_COMMAND, number, line)
        numa_affinity[gpu] = _int_or_none(values.get("NUMA Affinity", ""), "NUMA Affinity", number, line)
        gpu_numa_id[gpu] = _int_or_none(values.get("GPU NUMA ID", ""), "GPU NUMA ID", number, line)

    return {
        "gpus": gpus,
        "nics": nics,
        "links": {name(dev): {name(other): cell for other, cell in row.items()} for dev, row in links.items()},
        "cpu_affinity": cpu_affinity,
        "numa_affinity": numa_affinity,
        "gpu_numa_id": gpu_numa_id,
    }


def nearest_nics(topology, gpu):
    """The NICs at the smallest topology distance from ``gpu`` (a label such as ``GPU0``), and that distance."""
    row = topology["links"].get(gpu, {})
    cells = [(cell_rank(row[nic]), nic) for nic in topology["nics"] if nic in row]
    if not cells:
        return [], None
    best = min(rank for rank, _nic in cells)
    names = [nic for rank, nic in cells if rank == best]
    return names, row[names[0]]


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q -x

_NA = ("", "N/A", "Not Found", "Unknown Error", "[N/A]", "Requested functionality has been deprecated")


def _text(node, path):
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = " ".join(found.text.split())
    return None if value in _NA else value


def _quantity(node, path, unit):
    """The integer of an element such as ``81920 MiB`` or ``-2 C``; None where N/A or not that unit."""
    match = re.match(r"(-?\d+)\s*" + unit + r"\Z", _text(node, path) or "")
    return int(match.group(1)) if match else None


def _mib(node, path):
    return _quantity(node, path, "MiB")


def _celsius(node, path):
    return _quantity(node, path, "C")


def _temperature(gpu):
    """A GPU's temperature and where it slows down, in one of the two forms nvidia-smi prints.

    Drivers before the T.Limit form (and GPUs before Hopper) give absolute thresholds:
    ``<gpu_temp_slow_threshold>89 C``. Hopper and later on recent drivers give the margin to the
    GPU's T.Limit instead (``<gpu_temp_tlimit>53 C``: 53 degrees below it) and the thresholds as
    margins (``<gpu_temp_slow_tlimit_threshold>-2 C``: slowing down at 2 degrees past T.Limit), with
    no absolute slowdown temperature at all (the H100 and H200 captures of 580 drivers).
    """
    return {
        "current_c": _celsius(gpu, "temperature/gpu_temp"),
        "slowdown_c": _celsius(gpu, "temperature/gpu_temp_slow_threshold"),
        "shutdown_c": _celsius(gpu, "temperature/gpu_temp_max_threshold"),
        "tlimit_margin_c": _celsius(gpu, "temperature/gpu_temp_tlimit"),
        "slowdown_tlimit_c": _celsius(gpu, "temperature/gpu_temp_slow_tlimit_threshold"),
        "shutdown_tlimit_c": _celsius(gpu, "temperature/gpu_temp_max_tlimit_threshold"),
    }


def _number(value):
    if value is None:
        return None
    match = re.match(r"(\d+)x?\Z", value)
    return int(match.group(1)) if match else None


def _device_id(value):
    # <pci_device_id> is the device id then NVIDIA's vendor id: 233010DE. Anything else (some
    # published captures are anonymised to 000000DE) is treated as unknown.
    if value and re.match(r"[0-9A-Fa-f]{4}10[Dd][Ee]\Z", value) and value[:4] != "0000":
        return value[:4].lower()
    return None


def _mode(value):
    return value.lower() if value else None


def _yes(node, path):
    value = _text(node, path)
    if value is None:
        return None
    return value.lower() == "yes"


def _ecc(element):
    """Pending row remaps and page retirements, and the volatile uncorrectable ECC count."""
    volatile = element.find("ecc_errors/volatile")
    uncorrectable = None
    if volatile is not None:
        for child in volatile.iter():
            if "uncorrectable" in child.tag or child.tag == "double_bit":
                count = _number(_text(child, ".")) if len(child) == 0 else _number(_text(child, "total"))
                if count is not None:
                    uncorrectable = (uncorrectable or 0) + count
    return {
        "remapped_rows_pending": _yes(element, "remapped_rows/remapped_row_pending"),
        "remapped_rows_failure": _yes(element, "remapped_rows/remapped_row_failure"),
        "retired_pages_pending": _yes(element, "retired_pages/pending_retirement"),
        "volatile_uncorrectable": uncorrectable,
    }


def parse_query_xml(text):
    """Parse ``nvidia-smi -q -x``: ``{"driver_version", "cuda_version", "gpus": [...]}``.

    Each GPU has ``index`` (document order, which is nvidia-smi's enumeration order), ``uuid``,
    ``name``, ``pci_bus_id``, ``pci_device_id`` (the 4 hex digits of the device), ``minor_number``,
    ``memory_total_mib``, ``mig_mode`` and ``mig_mode_pending`` (``enabled``/``disabled``/None
    where the GPU has no MIG), ``mig_devices``,
    ``virtualization_mode``, ``architecture`` (as the driver prints it, or None on old drivers),
    ``persistence_mode``, ``vbios_version``, ``serial``, ``module_id``, ``pcie``, ``performance_state``,
    ``recovery_action`` (the driver's ``gpu_recovery_action``: ``None``, ``Reset``, ``Reboot``... or None
    where the driver prints none), ``ecc`` (``remapped_rows_pending``, ``remapped_rows_failure``,
    ``retired_pages_pending``: bools or None where N/A; ``volatile_uncorrectable``: the volatile
    uncorrectable count, or None)
    ``fabric``: the GPU's NVLink fabric registration (``state``, ``status``, ``health_summary``,
    ``clique_id`` as an int and ``cluster_uuid``, each None where N/A or where the driver prints no
    ``<fabric>``), and ``temperature`` in degrees
    Celsius, each None where not printed: ``current_c``; the absolute ``slowdown_c`` and ``shutdown_c``
    (older drivers and GPUs), or ``tlimit_margin_c`` with the margins ``slowdown_tlimit_c`` and
    ``shutdown_tlimit_c`` (Hopper and later on recent drivers; see :func:`_temperature`).
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", QUERY_COMMAND)
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start < 0:
        first = text.strip().split("\n", 1)[0] if text.strip() else ""
        raise ParseError("no XML document in the output", QUERY_COMMAND, 1 if first else None, first or None)
    # Anything before the document (driver warnings) is skipped; line numbers stay those of the input.
    skipped_lines = text.count("\n", 0, start)
    body = text[start:]
    # The DOCTYPE names a DTD file nvidia-smi does not ship; the parser must not look for it.
    body = re.sub(r"<!DOCTYPE[^>\[]*(\[[^\]]*\])?\s*>", "", body, count=1)
    try:
        # Bytes the command printed that were not UTF-8 arrive as surrogates; a lone one that no
        # encoding takes back becomes U+FFFD, and the XML parser judges the rest.
        root = ET.fromstring(body.encode("utf-8", "replace"))
    except ET.ParseError as exc:
        line_number = exc.position[0] + skipped_lines if getattr(exc, "position", None) else None
        all_lines = text.split("\n")
        line = all_lines[line_number - 1] if line_number and line_number <= len(all_lines) else None
        raise ParseError(f"malformed XML ({exc})", QUERY_COMMAND, line_number, line) from None
    except LookupError as exc:  # an XML declaration naming an encoding Python does not know
        raise ParseError(f"malformed XML declaration ({exc})", QUERY_COMMAND, skipped_lines + 1) from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"the document is <{root.tag}>, not <nvidia_smi_log>", QUERY_COMMAND)

    gpus = []
    for element in root.findall("gpu"):
        bus_id = element.get("id") or _text(element, "pci/pci_bus_id")
        if not bus_id:
            raise ParseError("a <gpu> element has no PCI bus id", QUERY_COMMAND)
        device_id = _text(element, "pci/pci_device_id")
        mig_devices = element.find("mig_devices")
        gpus.append(
            {
                "index": len(gpus),
                "uuid": _text(element, "uuid"),
                "name": _text(element, "product_name"),
                "brand": _text(element, "product_brand"),
                "architecture": _text(element, "product_architecture"),
                "pci_bus_id": bus_id,
                "pci_device_id": _device_id(device_id),
                "minor_number": _number(_text(element, "minor_number")),
                "memory_total_mib": _mib(element, "fb_memory_usage/total"),
                "mig_mode": _mode(_text(element, "mig_mode/current_mig")),
                "mig_mode_pending": _mode(_text(element, "mig_mode/pending_mig")),
                "mig_devices": len(mig_devices.findall("mig_device")) if mig_devices is not None else 0,
                "virtualization_mode": _text(element, "gpu_virtualization_mode/virtualization_mode"),
                "persistence_mode": _mode(_text(element, "persistence_mode")),
                "vbios_version": _text(element, "vbios_version"),
                "serial": _text(element, "serial"),
                "module_id": _number(_text(element, "platformInfo/module_id") or _text(element, "gpu_module_id")),
                "performance_state": _text(element, "performance_state"),
                # The driver's recovery action (driver 550 and later; NVML's nvmlGpuRecoveryAction_t
                # as nvidia-smi names it: None, Reset, Reboot, Drain P2P, Drain and Reset), None where absent.
                "recovery_action": _text(element, "gpu_recovery_action"),
                "ecc": _ecc(element),
                "temperature": _temperature(element),
                "fabric": {
                    "state": _text(element, "fabric/state"),
                    "status": _text(element, "fabric/status"),
                    "health_summary": _text(element, "fabric/health/summary"),
                    # The NVLink domain the GPU registered in (multi-node NVLink, GB200 NVL72): its
                    # clique in the cluster, as NVML's nvmlGpuFabricInfo cliqueId and clusterUuid.
                    "clique_id": _number(_text(element, "fabric/cliqueId")),
                    "cluster_uuid": _text(element, "fabric/clusterUuid"),
                },
                "pcie": {
                    "max_gen": _number(_text(element, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
                    "current_gen": _number(_text(element, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
                    "max_width": _number(_text(element, "pci/pci_gpu_link_info/link_widths/max_link_width")),
                    "current_width": _number(_text(element, "pci/pci_gpu_link_info/link_widths/current_link_width")),
                },
            }
        )
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _number(_text(root, "attached_gpus")),
        "gpus": gpus,
    }


# ---------------------------------------------------------------------------------------------
# nvidia-smi nvlink -s

NVLINK_COMMAND = "nvidia-smi nvlink -s"
_NVLINK_GPU = re.compile(r"GPU (\d+): (.*?) \(UUID: ([^)]*)\)\Z")
_NVLINK_LINK = re.compile(r"Link (\d+): (.*)\Z")
# A GPU whose links are all down (bridges absent or down, a fabric fault) prints this instead of
# its Link lines (leptonai/gpud#1085: "NVML: Unable to retrieve NVLink information as all links
# are inActive").
_NVLINK_ALL_INACTIVE = re.compile(r"NVML: Unable to retrieve NVLink information as all links are inactive\Z", re.I)
_NVLINK_SPEED = re.compile(r"(\d+(?:\.\d+)?) GB/s\Z")


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s``: ``{gpu_index: {"name", "uuid", "links": [GB/s or None]}}``.

    Links are in link order; an ``<inactive>`` link is None. A GPU without NVLink prints no
    links (an empty list); a machine without NVLink prints nothing at all (an empty dict). A GPU
    whose links are all inactive prints NVML's message instead of its links: ``"all_inactive":
    True`` with no links.
    """
    gpus = {}
    current = None
    for number, line in enumerate(text_lines(text, NVLINK_COMMAND), 1):
        stripped = line.strip()
        if not stripped:
            continue
        match = _NVLINK_GPU.match(stripped)
        if match:
            index = int(match.group(1))
            if index in gpus:
                raise ParseError(f"GPU {index} is listed twice", NVLINK_COMMAND, number, line)
            current = gpus[index] = {"name": match.group(2), "uuid": match.group(3), "links": []}
            continue
        if _NVLINK_ALL_INACTIVE.match(stripped):
            if current is None or current["links"]:
                raise ParseError("an all-links-inactive message that follows no GPU line", NVLINK_COMMAND, number, line)
            current["all_inactive"] = True
            continue
        match = _NVLINK_LINK.match(stripped)
        if not match:
            raise ParseError("not a 'GPU n: ...' or 'Link n: ...' line", NVLINK_COMMAND, number, line)
        if current is None:
            raise ParseError("a link before any GPU", NVLINK_COMMAND, number, line)
        link, value = int(match.group(1)), match.group(2).strip()
        if link != len(current["links"]):
            raise ParseError(
                "link {} follows link {}".format(link, len(current["links"]) - 1), NVLINK_COMMAND, number, line
            )
        if value.lower() == "<inactive>":
            current["links"].append(None)
            continue
        speed = _NVLINK_SPEED.match(value)
        if not speed:
            raise ParseError(f"link speed {value!r} is neither 'N GB/s' nor <inactive>", NVLINK_COMMAND, number, line)
        current["links"].append(float(speed.group(1)))
    return gpus


# ---------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv

QUERY_CSV_COMMAND = "nvidia-smi --query-gpu=... --format=csv"
_CSV_UNIT = re.compile(r"\s*\[[^\]]*\]\Z")
_CSV_NA = ("N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]", "")
_CSV_NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)(?: ?(?:%|MiB|MHz|W|C|GB/s|KB/s|x))?\Z")


def _csv_value(cell):
    value = cell.strip()
    if value in _CSV_NA:
        return None
    match = _CSV_NUMBER.match(value)
    if match:
        number = match.group(1)
        return float(number) if "." in number else int(number)
    return value


def parse_query_csv(text, fields=None):
    """Parse ``nvidia-smi --query-gpu=... --format=csv``: one dict per GPU row.

    Keys are the header's field names without their unit (``memory.total [MiB]`` ->
    ``memory.total``); values have their unit taken off and are numbers where they are numbers;
    ``N/A``, ``[N/A]`` and ``[Not Supported]`` are None. Output without a header
    (``--format=csv,noheader``) needs ``fields``, the list the command was given.
    """
    rows = []
    header = list(fields) if fields else None
    for number, line in enumerate(text_lines(text, QUERY_CSV_COMMAND), 1):
        if not line.strip():
            continue
        cells = line.split(",")
        if header is None:
            header = [_CSV_UNIT.sub("", cell.strip()) for cell in cells]
            if not all(header) or len(set(header)) != len(header):
                raise ParseError("the header has an empty or repeated field name", QUERY_CSV_COMMAND, number, line)
            continue
        if fields and not rows and [_CSV_UNIT.sub("", c.strip()) for c in cells] == header:
            continue  # the header line of a run that printed one after all
        if len(cells) != len(header):
            raise ParseError(
                f"{len(cells)} values where the header has {len(header)} fields",
                QUERY_CSV_COMMAND,
                number,
                line,
            )
        rows.append({name: _csv_value(cell) for name, cell in zip(header, cells)})
    return rows


# --- nvidia-smi --query-compute-apps: the processes that hold a GPU ------------------------------
COMPUTE_APPS_FIELDS = ("pid", "gpu_uuid", "used_memory", "process_name")
COMPUTE_APPS_COMMAND = "nvidia-smi --query-compute-apps=" + ",".join(COMPUTE_APPS_FIELDS) + " --format=csv,noheader"
_NO_PROCESSES = re.compile(r"^\s*No running (compute )?processes found\s*$", re.IGNORECASE)


def parse_compute_apps(text):
    """Parse :data:`COMPUTE_APPS_COMMAND`'s output: one dict per process and GPU.

    The process name comes last and keeps any comma it has (a path may). ``used_memory`` is MiB, or
    None where the driver cannot tell (``[N/A]``, ``[Insufficient Permissions]``).
    """
    out = []
    for number, line in enumerate(text_lines(text, COMPUTE_APPS_COMMAND), 1):
        if not line.strip() or _NO_PROCESSES.match(line):
            continue
        cells = [cell.strip() for cell in line.split(",", len(COMPUTE_APPS_FIELDS) - 1)]
        pid = cells[0]
        if len(cells) != len(COMPUTE_APPS_FIELDS) or not (pid.isascii() and pid.isdigit()):
            raise ParseError("expected pid, gpu_uuid, used_memory, process_name", COMPUTE_APPS_COMMAND, number, line)
        memory = cells[2].split()[0] if cells[2] else ""
        out.append(
            {
                "pid": int(pid),
                "gpu_uuid": cells[1],
                "used_memory": int(memory) if memory.isascii() and memory.isdigit() else None,
                "process_name": cells[3],
            }
        )
    return out


# --- nvidia-smi mig -lgip / -lgi / -lgipp: MIG profiles, GPU instances, placements ---------------
MIG_PROFILES_COMMAND = "nvidia-smi mig -lgip"
MIG_INSTANCES_COMMAND = "nvidia-smi mig -lgi"
MIG_PLACEMENTS_COMMAND = "nvidia-smi mig -lgipp"
MIG_COMPUTE_COMMAND = "nvidia-smi mig -lci"
# The whole answer when there is nothing to list: no MIG-capable or MIG-enabled GPU, no instance.
MIG_NOTHING = re.compile(
    r"No (MIG-enabled devices|MIG-capable devices|GPU instances|compute instances) found\b.*", re.IGNORECASE
)
# A table row: "|   0  MIG 1g.10gb+me      20     1/1        9.75       No     16     1     0   |".
_MIG_PROFILE_ROW = re.compile(r"(\d+) +MIG +(\S+) +(\d+) +(\d+)/(\d+) +(\d+(?:\.\d+)?) ")
_MIG_INSTANCE_ROW = re.compile(r"(\d+) +MIG +(\S+) +(\d+) +(\d+) +(\d+):(\d+)")
# "|   0      3       MIG 1c.2g.10gb       0         1          1:1     |"; older drivers print no
# Placement column.
_MIG_COMPUTE_ROW = re.compile(r"(\d+) +(\d+) +MIG +(\S+) +(\d+) +(\d+)(?: +(\d+):(\d+))?")
_MIG_PLACEMENT_LINE = re.compile(r"GPU +(\d+) +Profile ID +(\d+) +Placements? *: *\{([0-9,]*)\}:(\d+)")


def _mig_rows(text, command):
    """(number, row) for each table row that starts with a GPU index; [] for "nothing found"."""
    rows = []
    for number, line in enumerate(text_lines(text, command), 1):
        body = line.strip()
        if not body or MIG_NOTHING.fullmatch(body):
            continue
        if body.startswith("+") or body.startswith("|="):
            continue
        if not body.startswith("|"):
            raise ParseError("expected a table row, a border or 'No ... found'", command, number, line)
        cell = body.strip("|").strip()
        if not (cell[:1].isascii() and cell[:1].isdigit()):
            continue  # a title or a column header
        if all(part.isascii() and part.isdigit() for part in cell.split()):
            continue  # a row's second line (CE, JPEG, OFA)
        rows.append((number, line, cell))
    return rows


def parse_mig_profiles(text):
    """Parse ``nvidia-smi mig -lgip``: one dict per GPU instance profile and GPU.

    ``{"gpu", "name" ("1g.10gb", "+me" kept), "id", "free", "total", "memory_gib"}``; the second
    line of each row (CE, JPEG, OFA) is not kept. ``[]`` when no GPU can do MIG.
    """
    out = []
    for number, line, cell in _mig_rows(text, MIG_PROFILES_COMMAND):
        match = _MIG_PROFILE_ROW.match(cell + " ")
        if not match:
            raise ParseError("expected GPU, MIG name, ID, free/total and GiB", MIG_PROFILES_COMMAND, number, line)
        gpu, name, profile_id, free, total, memory = match.groups()
        out.append(
            {
                "gpu": int(gpu),
                "name": name,
                "id": int(profile_id),
                "free": int(free),
                "total": int(total),
                "memory_gib": float(memory),
            }
        )
    return out


def parse_mig_instances(text):
    """Parse ``nvidia-smi mig -lgi``: one dict per GPU instance.

    ``{"gpu", "name", "profile_id", "instance_id", "placement": {"start", "size"}}``; ``[]`` for
    "No GPU instances found" and for "No MIG-enabled devices found".
    """
    out = []
    for number, line, cell in _mig_rows(text, MIG_INSTANCES_COMMAND):
        match = _MIG_INSTANCE_ROW.match(cell)
        if not match:
            raise ParseError(
                "expected GPU, MIG name, profile ID, instance ID and start:size", MIG_INSTANCES_COMMAND, number, line
            )
        gpu, name, profile_id, instance_id, start, size = match.groups()
        out.append(
            {
                "gpu": int(gpu),
                "name": name,
                "profile_id": int(profile_id),
                "instance_id": int(instance_id),
                "placement": {"start": int(start), "size": int(size)},
            }
        )
    return out


def parse_mig_placements(text):
    """Parse ``nvidia-smi mig -lgipp``: ``{"gpu", "profile_id", "starts": [...], "size"}`` per line.

    Each start is a memory slice where an instance of the profile can begin, and ``size`` the
    slices it takes; the slice budget and the legal layouts of a GPU follow from them.
    """
    out = []
    for number, line in enumerate(text_lines(text, MIG_PLACEMENTS_COMMAND), 1):
        body = line.strip()
        if not body or MIG_NOTHING.fullmatch(body):
            continue
        match = _MIG_PLACEMENT_LINE.fullmatch(body)
        if not match:
            expected = "expected 'GPU N Profile ID P Placements: (starts in braces):size'"
            raise ParseError(expected, MIG_PLACEMENTS_COMMAND, number, line)
        gpu, profile_id, starts, size = match.groups()
        out.append(
            {
                "gpu": int(gpu),
                "profile_id": int(profile_id),
                "starts": [int(s) for s in starts.split(",") if s],
                "size": int(size),
            }
        )
    return out


def parse_mig_compute_instances(text):
    """Parse ``nvidia-smi mig -lci``: one dict per compute instance.

    ``{"gpu", "gpu_instance_id", "name" ("1c.2g.10gb" where it takes part of its GPU instance),
    "profile_id", "instance_id", "placement": {"start", "size"} or None}`` (drivers before R470
    print no Placement column); ``[]`` when there are none, or no MIG-enabled GPU.
    """
    out = []
    for number, line, cell in _mig_rows(text, MIG_COMPUTE_COMMAND):
        match = _MIG_COMPUTE_ROW.fullmatch(cell)
        if not match:
            raise ParseError(
                "expected GPU, GPU instance ID, MIG name, profile ID, instance ID and an optional start:size",
                MIG_COMPUTE_COMMAND,
                number,
                line,
            )
        gpu, gi, name, profile_id, instance_id, start, size = match.groups()
        out.append(
            {
                "gpu": int(gpu),
                "gpu_instance_id": int(gi),
                "name": name,
                "profile_id": int(profile_id),
                "instance_id": int(instance_id),
                "placement": {"start": int(start), "size": int(size)} if start is not None else None,
            }
        )
    return out
