# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reading of a topo -m cell that the facts, Slurm's Links= and NCCL's GDR level share."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import topology


@pytest.mark.parametrize(
    ("cell", "links", "count", "distance"),
    [
        ("X", 0, -1, None),
        ("NV18", 18, 18, None),
        (" nv4 ", 4, 4, None),
        ("PIX", 0, 0, "PIX"),
        ("PXB", 0, 0, "PXB"),
        ("PHB", 0, 0, "PHB"),
        ("NODE", 0, 0, "NODE"),
        ("SYS", 0, 0, "SYS"),
        ("SOC", 0, 0, "SYS"),
        ("NVx", 0, 0, None),
        ("", 0, 0, None),
        (None, 0, 0, None),
    ],
)
def test_each_reading_of_a_cell(cell, links, count, distance):
    assert topology.nvlinks(cell) == links
    assert topology.link_count(cell) == count
    assert topology.pcie_distance(cell) == distance


def test_rank_orders_the_legend_nearest_first():
    cells = ["SYS", "NODE", "PHB", "PXB", "PIX", "NV1", "NV18", "X"]
    assert sorted(cells, key=topology.rank) == ["X", "NV18", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS"]
    assert topology.rank("SOC") == topology.rank("SYS")
    assert topology.rank("???") > topology.rank("SYS")


def test_every_distance_has_an_nccl_level_and_node_is_phb():
    assert set(topology.GDR_LEVEL) == set(topology.PCIE_DISTANCES)
    assert topology.GDR_LEVEL["NODE"] == "PHB"


def test_natural_key():
    names = ["mlx5_10", "mlx5_2", "mlx5_0", "GPU10", "GPU2"]
    assert sorted(names, key=topology.natural_key) == ["GPU2", "GPU10", "mlx5_0", "mlx5_2", "mlx5_10"]
