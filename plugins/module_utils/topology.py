# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one cell of the ``nvidia-smi topo -m`` matrix means, read in one place.

A cell names the path between two devices. The legend nvidia-smi prints under the matrix:

    X     the device itself
    NV#   a bonded set of # NVLinks
    PIX   at most a single PCIe bridge
    PXB   multiple PCIe bridges, without the PCIe host bridge
    PHB   a PCIe host bridge (typically the CPU)
    NODE  PCIe and the interconnect between host bridges within a NUMA node
    SYS   PCIe and the SMP interconnect between NUMA nodes (older drivers print SOC)

Every consumer goes through these functions: the facts (nearest NICs, NVLink peers), Slurm's
gres.conf ``Links=``, NCCL's ``NCCL_NET_GDR_LEVEL``. Also the natural sort of device names
(``mlx5_2`` before ``mlx5_10``) that all of them order by.
"""

from __future__ import annotations

import re

# Nearest first. NV# sits between the device itself and any PCIe path.
LINK_ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
# The PCIe and SMP distances, nearest first (the cells a GPU-to-NIC path can have without NVLink).
PCIE_DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")
# NCCL_NET_GDR_LEVEL for a GPU-to-NIC distance. NCCL has no NODE level: a path across the host
# bridges of one NUMA node is its PHB.
GDR_LEVEL = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
_DIGITS = re.compile(r"(\d+)")


def normalize(cell):
    """The cell as the current legend spells it: stripped, upper-case, ``SOC`` read as ``SYS``."""
    value = str(cell or "").strip().upper()
    return "SYS" if value == "SOC" else value


def nvlinks(cell):
    """How many NVLinks a cell bonds: n for ``NV<n>``, else 0."""
    value = normalize(cell)
    if value.startswith("NV") and value[2:].isdigit():
        return int(value[2:])
    return 0


def is_self(cell):
    return normalize(cell) == "X"


def rank(cell):
    """Sort key of a cell: lower is closer (``X`` < ``NV#`` (more links closer) < ``PIX`` < ... < ``SYS``).

    A cell the legend does not know sorts after ``SYS``.
    """
    value = normalize(cell)
    links = nvlinks(value)
    if links:
        return (1, -links)
    if value in LINK_ORDER:
        return (LINK_ORDER.index(value), 0)
    return (len(LINK_ORDER), 0)


def link_count(cell):
    """Slurm's ``Links=`` weight of a cell: the device itself -1, NV<n> n, any other path 0."""
    return -1 if is_self(cell) else nvlinks(cell)


def pcie_distance(cell):
    """The PCIe/SMP distance of a cell (``PIX`` ... ``SYS``), or None for ``X``, ``NV#`` and unknown cells."""
    value = normalize(cell)
    return value if value in PCIE_DISTANCES else None


def natural_key(name):
    """Sort key that puts ``mlx5_2`` before ``mlx5_10`` and ``GPU2`` before ``GPU10``."""
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(str(name))]
