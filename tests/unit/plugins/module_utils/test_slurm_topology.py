# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's topology from the fleet state: blocks from the NVLink domains the nodes recorded, a tree
from the declared switches (slurm_topology.py, the slurm_topology filter), and the slurm role's
templates that write them (topology.conf, TopologyPlugin in slurm.conf)."""

from __future__ import annotations

import time

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.slurm_topology import slurm_topology
from ansible_collections.gpuops.cluster.plugins.module_utils import fleet
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm_topology import TopologyError, topology
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fleet_files import render, spec

# Two GB200 NVL72 racks, each cluster UUID and clique as the trays' GPUs register them (the values'
# shape: leptonai/gpud#1106), and an H100 node outside any NVLink domain.
RACK_A = {"cluster_uuid": "9c6f5af3-53bf-49b5-a436-b66766c413c3", "clique_id": 4026}
RACK_B = {"cluster_uuid": "1f2e3d4c-0000-4000-8000-00000000abcd", "clique_id": 1}
TRAY = spec("gpu:gb200:4", [{"type": "gb200", "file": f"/dev/nvidia{i}", "cores": "0-71"} for i in range(4)])
H100 = spec("gpu:h100:8", [{"type": "h100", "file": f"/dev/nvidia{i}", "cores": "0-55"} for i in range(8)])


def tray(host, domain):
    return {"hostname": host, "spec": TRAY, "nvlink_domain": dict(domain)}


def fleet_of(**nodes):
    for name, data in nodes.items():
        fleet.check_section("slurm", data, name, None)
    return fleet.files("slurm", nodes)


def test_each_nvlink_domain_is_one_block_and_a_node_outside_is_named():
    lines = fleet_of(
        **{f"a{n:02d}": tray(f"rack-a-{n:02d}", RACK_A) for n in range(1, 19)},
        **{f"b{n:02d}": tray(f"rack-b-{n:02d}", RACK_B) for n in range(1, 19)},
        h1={"hostname": "h100-1", "spec": H100},
    )
    assert [(d["name"], d["nodes"], d["count"], d["gpus"]) for d in lines["domains"]] == [
        ("nvl_1f2e3d4c_1", "rack-b-[01-18]", 18, 72),
        ("nvl_9c6f5af3_4026", "rack-a-[01-18]", 18, 72),
    ]
    decided = topology(lines)
    assert decided["plugin"] == "topology/block"
    # Equal blocks: Slurm's own base (the first block's count) holds, no BlockSizes.
    assert decided["lines"] == [
        "BlockName=nvl_1f2e3d4c_1 Nodes=rack-b-[01-18]",
        "BlockName=nvl_9c6f5af3_4026 Nodes=rack-a-[01-18]",
    ]
    assert decided["outside"] == ["h1"]
    assert "h1 outside every block" in decided["why"]


def test_blocks_of_unequal_size_name_the_smallest_as_the_base():
    """Slurm 24.11 takes the first block's node count as the base and stops at a smaller one later
    (block_record.c: "children count lower than bblock_node_cnt"): a rack with two trays out."""
    lines = fleet_of(
        **{f"a{n:02d}": tray(f"a{n:02d}", RACK_A) for n in range(1, 19)},
        **{f"b{n:02d}": tray(f"b{n:02d}", RACK_B) for n in range(1, 17)},
    )
    assert topology(lines, "block")["lines"] == [
        "BlockSizes=16,32,64,128,256",
        "BlockName=nvl_1f2e3d4c_1 Nodes=b[01-16]",
        "BlockName=nvl_9c6f5af3_4026 Nodes=a[01-18]",
    ]


def test_a_domain_over_72_gpus_is_refused_naming_its_nodes():
    lines = fleet_of(**{f"a{n:02d}": tray(f"a{n:02d}", RACK_A) for n in range(1, 20)})
    with pytest.raises(TopologyError, match=r"would hold 76 GPUs on 19 nodes \(a01, .*a19\), more than the 72"):
        topology(lines)
    # Without a topology, nothing is refused.
    assert topology(lines, "none")["plugin"] is None


SWITCHES = [
    {"name": "leaf-roce", "nodes": ["gpu01", "gpu02"]},
    {"name": "leaf-ib", "nodes": "gpu[03-04]"},
    {"name": "spine", "switches": ["leaf-roce", "leaf-ib"]},
]


def four():
    return fleet_of(**{f"gpu{n:02d}": {"hostname": f"node-{n}", "spec": H100} for n in range(1, 5)})


def test_a_declared_tree_names_host_names_and_its_switches():
    decided = topology(four(), "auto", SWITCHES)
    assert decided["plugin"] == "topology/tree"
    assert decided["lines"] == [
        "SwitchName=leaf-roce Nodes=node-[1-2]",
        "SwitchName=leaf-ib Nodes=node-[3-4]",
        "SwitchName=spine Switches=leaf-roce,leaf-ib",
    ]
    assert decided["why"] == "topology/tree: 2 leaf switches of slurm_topology_switches"
    # Names of the map that are not compute nodes (left the inventory, not joined yet) are left out,
    # with a switch that then has nothing below it; the decision says so.
    cabled = [*SWITCHES, {"name": "leaf-new", "nodes": "gpu[05-06]"}, {"name": "core", "switches": ["leaf-new"]}]
    cabled[0] = {"name": "leaf-roce", "nodes": "gpu[00-02]"}
    decided = topology(four(), "tree", cabled)
    assert decided["lines"] == [
        "SwitchName=leaf-roce Nodes=node-[1-2]",
        "SwitchName=leaf-ib Nodes=node-[3-4]",
        "SwitchName=spine Switches=leaf-roce,leaf-ib",
    ]
    assert decided["why"].endswith("; gpu00, gpu05, gpu06 of the map, not compute nodes of the cluster, left out")
    # auto with neither: none; a domain wins over the map under auto.
    assert topology(four())["plugin"] is None
    assert topology(fleet_of(t1=tray("t1", RACK_A)), "auto", [{"name": "l", "nodes": ["t1"]}])["plugin"] == (
        "topology/block"
    )


@pytest.mark.parametrize(
    ("switches", "message"),
    [
        ([{"name": "leaf", "nodes": "gpu[01-03]"}], r"gpu04 hang off no switch of the map"),
        (
            [{"name": "x", "nodes": "gpu[01-02]"}, {"name": "y", "nodes": "gpu[02-04]"}],
            r"gpu02 is on switch x and on switch y",
        ),
        ([{"name": "x", "nodes": "gpu[01-04]"}, {"name": "s", "switches": ["x", "z"]}], r"lists z below it"),
        (
            [{"name": "x", "nodes": "gpu[01-04]"}, {"name": "s", "switches": ["t"]}, {"name": "t", "switches": ["s"]}],
            r"in a loop of switches",
        ),
        ([{"name": "x", "nodes": "gpu[01-04]", "switches": ["y"]}], r"either nodes .* or switches"),
        ([{"name": "1x", "nodes": "gpu[01-04]"}], r"must start with a letter"),
        ([{"name": "x", "nodes": "gpu[01-04]"}, {"name": "x", "switches": ["x"]}], r"switch x is listed twice"),
        ([], r"slurm_topology_switches is empty"),
        ([{"name": "x", "nodes": "gpu[01-99999999]"}], r"switch x's nodes: hostlist"),
    ],
)
def test_a_switch_map_slurm_would_refuse_or_misread_is_refused_naming_the_fix(switches, message):
    with pytest.raises(TopologyError, match=message):
        topology(four(), "tree", switches)


def test_block_without_a_domain_and_an_unknown_mode_are_refused():
    with pytest.raises(TopologyError, match=r"no compute node of the cluster registered in a multi-node NVLink"):
        topology(four(), "block")
    with pytest.raises(AnsibleFilterError, match=r"slurm_topology is 'mesh'; it is one of auto, none, block, tree"):
        slurm_topology(four(), "mesh")
    with pytest.raises(AnsibleFilterError, match=r"expected the slurm section's files"):
        slurm_topology({"groups": []})


def test_a_recorded_domain_that_is_not_a_uuid_and_a_clique_is_refused():
    with pytest.raises(fleet.FleetError, match=r"nvlink_domain .* is not a cluster UUID and a clique number"):
        fleet.check_section("slurm", tray("t1", {"cluster_uuid": "N/A", "clique_id": 1}), "t1", None)
    with pytest.raises(fleet.FleetError, match=r"nvlink_domain"):
        fleet.check_section("slurm", tray("t1", dict(RACK_A, clique_id="1")), "t1", None)


def slurm_files(lines, decided, **extra):
    variables = {
        "ansible_managed": "test",
        "inventory_hostname": "ctl",
        "groups": {"all": ["ctl", *lines["hostnames"]], "slurm_controller": ["ctl"],
                   "slurm_compute": sorted(lines["hostnames"]), "slurm_dbd": [], "slurm_login": []},
        "hostvars": {"ctl": {"ansible_facts": {"hostname": "ctl"}}},
        "ansible_facts": {"hostname": "ctl"},
        "__slurm_lines": lines,
        "__slurm_topology": decided,
        "__slurm_configless_hosts": [],
        "__slurm_configless_any": False,
        "__slurm_sliced_partitions": {},
        "__slurm_tiers": {"slurm_conf": {}},
        "__slurm_dbd_host": "",
        "__slurm_job_gpu_metrics": False,
        "slurm_partitions": [{"name": "gpu", "group": "slurm_compute", "default": True}],
        **extra,
    }  # fmt: skip
    return render("slurm/slurm.conf.j2", **variables), render("slurm/topology.conf.j2", **variables)


def test_the_templates_write_the_plugin_and_the_lines_and_no_plugin_without_a_topology():
    lines = fleet_of(t1=tray("t1", RACK_A), t2=tray("t2", RACK_A), h1={"hostname": "h1", "spec": H100})
    slurm_conf, topology_conf = slurm_files(lines, topology(lines))
    assert "TopologyPlugin=topology/block" in slurm_conf.splitlines()
    body = [line for line in topology_conf.splitlines() if not line.startswith("#")]
    assert body == ["BlockName=nvl_9c6f5af3_4026 Nodes=t[1-2]"]
    slurm_conf = slurm_files(lines, topology(lines, "none"))[0]
    assert "TopologyPlugin" not in slurm_conf


NAMES = st.sampled_from(["gpu01", "gpu02", "gpu03", "gpu04", "gpu05", "leaf", "s1", "s2", "1x", "", "gpu[01-04]"])
SWITCH = st.fixed_dictionaries(
    {"name": NAMES},
    optional={
        "nodes": st.one_of(NAMES, st.lists(NAMES, max_size=4), st.integers(), st.none(), st.lists(st.integers())),
        "switches": st.one_of(
            NAMES, st.lists(NAMES, max_size=3), st.none(), st.integers(), st.dictionaries(NAMES, NAMES)
        ),
    },
)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.lists(SWITCH, max_size=6),
        st.lists(st.one_of(SWITCH, st.text(max_size=5), st.none()), max_size=6),
        st.none(),
        st.text(),
    )
)
def test_any_switch_map_is_a_tree_or_a_topology_error(switches):
    try:
        decided = topology(four(), "tree", switches)
    except TopologyError as err:
        assert str(err).startswith("slurm_topology")
        return
    assert decided["plugin"] == "topology/tree"
    assert all(line.startswith("SwitchName=") for line in decided["lines"])


def test_a_deep_chain_of_switches_is_read_in_linear_time():
    """20,000 switches in a chain above one leaf: each walk up stops at a switch already walked."""
    chain = [{"name": "leaf", "nodes": "gpu[01-04]"}]
    chain += [{"name": f"s{n}", "switches": [chain[-1]["name"] if n == 0 else f"s{n - 1}"]} for n in range(20_000)]
    chain[1]["switches"] = ["leaf"]
    began = time.process_time()
    decided = topology(four(), "tree", chain)
    assert len(decided["lines"]) == 20_001
    assert time.process_time() - began < 5


PLUGINS = {"files": [{"path": f"/usr/lib/x86_64-linux-gnu/slurm-wlm/{name}"}
                     for name in ("topology_block.so", "switch_nvidia_imex.so")]}  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "found", "setting", "switch"),
    [
        ("auto", PLUGINS, "auto", "switch/nvidia_imex"),
        # A Slurm without the plugin (before 24.05), or no NVLink block (the plugins are not looked for).
        ("auto", {"files": PLUGINS["files"][:1]}, "auto", None),
        ("none", {}, "auto", None),
        ("auto", PLUGINS, "none", None),
        ("auto", PLUGINS, "switch/nvidia_imex", "switch/nvidia_imex"),
    ],
)
def test_each_job_gets_its_imex_channel_where_the_cluster_has_nvlink_blocks_and_slurm_the_plugin(
    mode, found, setting, switch
):
    lines = fleet_of(t1=tray("t1", RACK_A), t2=tray("t2", RACK_A))
    slurm_conf = slurm_files(lines, topology(lines, mode), __slurm_domain_plugins=found, slurm_switch_type=setting)[0]
    written = [line.split("=", 1)[1] for line in slurm_conf.splitlines() if line.startswith("SwitchType=")]
    assert written == ([switch] if switch else [])


def ib_node(host, *leaves):
    """A node whose InfiniBand ports read these leaf switches (the slurm role's discovery)."""
    found = [{"guid": f"{n:016x}", "description": f"MF0;{name}:MQM9790/U1"} for n, name in leaves]
    return {"hostname": host, "spec": H100, "ib_leaves": found}


def test_discovered_leaves_join_the_declared_switches_one_leaf_per_group_and_a_switch_above():
    """gpu01-02 on leaf su1 (both rails of a unit), gpu03 on su2, roce01 declared: Slurm's tree."""
    lines = fleet_of(
        gpu01=ib_node("gpu01", (1, "su1-r0"), (2, "su1-r1")),
        gpu02=ib_node("gpu02", (1, "su1-r0"), (2, "su1-r1")),
        gpu03=ib_node("gpu03", (3, "su2-r0")),
        roce01={"hostname": "roce01", "spec": H100},
    )
    assert lines["ib_leaves"]["gpu03"] == {"0000000000000003": "MF0;su2-r0:MQM9790/U1"}
    declared = [{"name": "leaf-roce", "nodes": ["roce01"]}]
    shape = topology(lines, "auto", declared, discover=True)
    assert shape["plugin"] == "topology/tree"
    assert shape["lines"] == [
        "SwitchName=leaf-roce Nodes=roce01",
        "SwitchName=su1-r0 Nodes=gpu[01-02]",
        "SwitchName=su2-r0 Nodes=gpu03",
        "SwitchName=ib_fabric0 Switches=su1-r0,su2-r0",
    ]
    assert "InfiniBand leaves the nodes read" in shape["why"]
    # Without discovery the recorded leaves are not used: the nodes hang off no declared switch.
    with pytest.raises(TopologyError, match=r"gpu01, gpu02, gpu03 hang off no switch"):
        topology(lines, "auto", declared)
    # A node both declared and discovered sits on two leaves: refused as a declared map would be.
    with pytest.raises(TopologyError, match=r"gpu03"):
        topology(lines, "tree", [*declared, {"name": "leaf-x", "nodes": ["gpu03"]}], discover=True)


def test_a_recorded_leaf_that_is_not_a_guid_and_a_description_is_refused():
    bad = ib_node("gpu01", (1, "su1"))
    bad["ib_leaves"][0]["guid"] = "0x1"
    with pytest.raises(fleet.FleetError, match=r"ib_leaves .* is not a list of leaf switches"):
        fleet.check_section("slurm", bad, "gpu01", None)
