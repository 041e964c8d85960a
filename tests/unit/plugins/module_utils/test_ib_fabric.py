# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The InfiniBand fabric from what the nodes read of their ports: smpquery's answers (as gpusim's
stand-in prints them, in libibmad's format) and Slurm's tree made of the leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.ib_fabric import (
    neighbour,
    parse_smpquery,
    tree_from_leaves,
)
from conftest import GPUSIM
from hypothesis import given, settings
from hypothesis import strategies as st


def managed(n, name):
    return {f"{n:016x}": f"MF0;{name}:MQM9790/U1"}


def test_nodes_that_share_a_leaf_are_one_slurm_leaf_and_the_groups_get_a_switch_above():
    # gpu01 and gpu02: both rails of one unit; gpu03 on a unit of its own.
    leaves = {
        "gpu01": {**managed(1, "su1-r0"), **managed(2, "su1-r1")},
        "gpu02": {**managed(2, "su1-r1"), **managed(1, "su1-r0")},
        "gpu03": managed(3, "su2-r0"),
    }
    assert tree_from_leaves(leaves) == [
        {"name": "su1-r0", "nodes": ["gpu01", "gpu02"]},
        {"name": "su2-r0", "nodes": ["gpu03"]},
        {"name": "ib_fabric0", "switches": ["su1-r0", "su2-r0"]},
    ]
    # One group needs no switch above it; a switch without a managed name is named by its GUID.
    assert tree_from_leaves({"gpu01": {"00000000000000ab": "Quantum-2 Mellanox"}}) == [
        {"name": "ib_00000000000000ab", "nodes": ["gpu01"]}
    ]
    assert tree_from_leaves({}) == []


def smpquery(tmp_path, *argv, ca="mlx5_0"):
    """What gpusim's smpquery prints for the dgx-h100 profile's node on leaf-ib, run for real."""
    (tmp_path / "leaf.json").write_text(json.dumps({"name": "leaf-ib", "model": "MQM9790"}))
    env = dict(os.environ, GPUSIM_PROFILE_DIR=str(GPUSIM / "profiles" / "dgx-h100"))
    env["GPUSIM_IB_LEAF"] = str(tmp_path / "leaf.json")
    command = [sys.executable, str(GPUSIM / "bin" / "smpquery"), "-C", ca, "-P", "1", "-D", *argv, "0,1"]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def test_a_ports_neighbour_reads_as_its_switch(tmp_path):
    info, desc = smpquery(tmp_path, "nodeinfo"), smpquery(tmp_path, "nodedesc")
    assert info.returncode == 0 and desc.returncode == 0
    found = neighbour(info.stdout, desc.stdout)
    assert found["kind"] == "switch" and found["description"] == "MF0;leaf-ib:MQM9790/U1"
    assert len(found["guid"]) == 16 and parse_smpquery(info.stdout)["NodeType"] == "Switch"
    # An Ethernet port has no InfiniBand neighbour: the query fails as the real one does.
    failed = smpquery(tmp_path, "nodeinfo", ca="mlx5_1")
    assert failed.returncode == 255 and "node info query failed" in failed.stderr


@pytest.mark.parametrize(
    ("info", "desc", "message"),
    [
        ("", "Node Description:...x", r"no Key:....value line"),
        ("NodeType:....Switch\nGuid:....0x12\nnot a field\n", "Node Description:...x", r"line 3: not a Key"),
        ("NodeType:....Hub\nGuid:....0x12\n", "Node Description:...x", r"no NodeType of Switch"),
        ("NodeType:....Switch\nGuid:....12\n", "Node Description:...x", r"and Guid"),
        ("NodeType:....Switch\nGuid:....0x12\n", "Name:....x", r"no Node Description line"),
    ],
)
def test_answers_of_another_shape_are_a_clear_error(info, desc, message):
    with pytest.raises(ParseError, match=message):
        neighbour(info, desc)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("NodeTypGuiSwtch:.0x12aAbf #\n")), max_size=300))
def test_any_text_is_read_or_refused_with_a_parse_error(text):
    try:
        neighbour(text, "Node Description:....MF0;leaf01:Q/U1")
    except ParseError:
        pass
