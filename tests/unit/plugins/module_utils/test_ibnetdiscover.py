# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The InfiniBand fabric from ibnetdiscover: rdma-core's documented example, fabrics printed in the
format of rdma-core's ibnetdiscover.c (a two-level fat tree, a rail-optimised unit, two fabrics),
and Slurm's tree made of them, checked by the same rules as a declared switch map."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.ibnetdiscover import (
    parse_ibnetdiscover,
    switch_map,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm_topology import topology
from conftest import fixture
from hypothesis import given, settings
from hypothesis import strategies as st

MAN = fixture("ibnetdiscover", "rdma_core_man_example.txt")


def test_the_documented_example_reads_node_by_node():
    fabric = parse_ibnetdiscover(MAN)
    switches = {guid: node["description"] for guid, node in fabric.items() if node["kind"] == "switch"}
    assert switches == {"005442ba00003080": "ISR9024 Voltaire", "0008f10400410015": "SW-6IB4 Voltaire"}
    assert sorted(guid for guid, node in fabric.items() if node["kind"] == "ca") == [
        "0008f10403960558",
        "0008f10403960984",
        "0008f10403961354",
        "005442b100004900",
    ]
    # A CA with two ports on one switch; each link read from both ends alike.
    assert fabric["0008f10403960558"]["links"] == {2: ("005442ba00003080", 8), 1: ("005442ba00003080", 12)}
    assert fabric["005442ba00003080"]["links"][10] == ("0008f10400410015", 1)
    assert fabric["0008f10400410015"]["ports"] == 8


def guid(kind, number):
    return f"{kind:02x}{number:014x}"


def printed(switches, cas):
    """A fabric as rdma-core's ibnetdiscover.c prints it: ``switches`` {name: (description, {port:
    (peer, peer port)})}, ``cas`` {name: (description, {port: (switch, switch port)})}."""
    ids = {name: guid(0xEC, n) for n, name in enumerate(switches, 1)}
    ids.update({name: guid(0x50, n) for n, name in enumerate(cas, 1)})
    lines = ["#", "# Topology file: generated on Sat Dec  5 12:00:00 2026", "#", "# Initiated from node x port x"]
    for name, (description, links) in switches.items():
        lines += ["", "vendid=0x2c9", "devid=0xd2f2", f"sysimgguid=0x{ids[name]}"]
        lines += [f"switchguid=0x{ids[name]}({ids[name]})"]
        lines.append(f'Switch\t64 "S-{ids[name]}"\t\t# "{description}" enhanced port 0 lid 1 lmc 0')
        for port, (peer, peer_port) in sorted(links.items()):
            kind = "S" if peer in switches else "H"
            tail = f"({ids[peer]}) " if kind == "H" else ""
            peer_description = (switches.get(peer) or cas.get(peer))[0]
            lines.append(f'[{port}]\t"{kind}-{ids[peer]}"[{peer_port}]{tail}\t\t# "{peer_description}" lid 2 4xNDR')
    for name, (description, links) in cas.items():
        lines += ["", "vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{ids[name]}", f"caguid=0x{ids[name]}"]
        lines.append(f'Ca\t1 "H-{ids[name]}"\t\t# "{description}"')
        for port, (peer, peer_port) in sorted(links.items()):
            where = f'"S-{ids[peer]}"[{peer_port}]'
            lines.append(f'[{port}]({ids[name]}) \t{where}\t\t# lid 2 lmc 0 "{switches[peer][0]}" lid 1 4xNDR')
    return "\n".join(lines) + "\n"


def fat_tree(leaves, spines=2, per_leaf=2, managed=True):
    """Two levels: each leaf with ``per_leaf`` hosts (one adapter each) and a link to every spine."""
    switches, cas, host = {}, {}, 0
    for s in range(spines):
        switches[f"spine{s}"] = (f"MF0;spine{s:02d}:MQM9790/U1" if managed else "Quantum-2 Mellanox", {})
    for leaf in range(leaves):
        links = {}
        for h in range(per_leaf):
            host += 1
            cas[f"gpu{host:02d}_0"] = (f"gpu{host:02d} mlx5_0", {1: (f"leaf{leaf}", h + 1)})
            links[h + 1] = (f"gpu{host:02d}_0", 1)
        for s in range(spines):
            links[33 + s] = (f"spine{s}", leaf + 1)
            switches[f"spine{s}"][1][leaf + 1] = (f"leaf{leaf}", 33 + s)
        switches[f"leaf{leaf}"] = (f"MF0;leaf{leaf:02d}:MQM9790/U1" if managed else "Quantum-2 Mellanox", links)
    return switches, cas


HOSTS = {f"gpu{n:02d}": f"gpu{n:02d}.cluster.example" for n in range(1, 5)}


def test_a_fat_tree_gives_a_slurm_leaf_per_leaf_switch_and_one_switch_above_them():
    fabric = parse_ibnetdiscover(printed(*fat_tree(leaves=2)))
    assert switch_map(fabric, HOSTS) == {
        "switches": [
            {"name": "leaf00", "nodes": ["gpu01", "gpu02"]},
            {"name": "leaf01", "nodes": ["gpu03", "gpu04"]},
            {"name": "ib_fabric0", "switches": ["leaf00", "leaf01"]},
        ],
        "unplaced": [],
    }
    # Unmanaged switches (no host name in their description) are named by their GUID.
    fabric = parse_ibnetdiscover(printed(*fat_tree(leaves=2, managed=False)))
    names = [entry["name"] for entry in switch_map(fabric, HOSTS)["switches"]]
    assert names == ["ib_ec00000000000003", "ib_ec00000000000004", "ib_fabric0"]


def test_slurm_takes_the_discovered_tree_as_it_takes_a_declared_one():
    fabric = parse_ibnetdiscover(printed(*fat_tree(leaves=2)))
    found = switch_map(fabric, HOSTS)
    hostnames = {node: name.split(".")[0] for node, name in HOSTS.items()}
    shape = topology({"domains": [], "hostnames": hostnames}, "tree", found["switches"])
    assert shape["plugin"] == "topology/tree"
    assert shape["lines"] == [
        "SwitchName=leaf00 Nodes=gpu[01-02]",
        "SwitchName=leaf01 Nodes=gpu[03-04]",
        "SwitchName=ib_fabric0 Switches=leaf00,leaf01",
    ]


def test_a_rail_optimised_unit_is_one_slurm_leaf_and_a_node_off_the_fabric_is_named():
    """Each node's two adapters on two rail leaves, which its neighbours share: one group."""
    switches = {"rail0": ("MF0;su1-rail0:Q/U1", {}), "rail1": ("MF0;su1-rail1:Q/U1", {})}
    cas = {}
    for n in (1, 2):
        for rail in (0, 1):
            cas[f"gpu{n:02d}_{rail}"] = (f"gpu{n:02d} mlx5_{rail}", {1: (f"rail{rail}", n)})
            switches[f"rail{rail}"][1][n] = (f"gpu{n:02d}_{rail}", 1)
    found = switch_map(parse_ibnetdiscover(printed(switches, cas)), HOSTS)
    assert found == {"switches": [{"name": "su1-rail0", "nodes": ["gpu01", "gpu02"]}], "unplaced": ["gpu03", "gpu04"]}


def test_two_fabrics_that_do_not_connect_get_no_switch_between_them():
    first, first_cas = fat_tree(leaves=2)
    second = {f"b{name}": (description.replace("MF0;", "MF0;b"), {}) for name, (description, _l) in first.items()}
    second_cas = {}
    for name, (description, links) in first_cas.items():
        (switch, port) = links[1]
        host = description.split()[0].replace("gpu", "cpu")
        second_cas[f"b{name}"] = (f"{host} mlx5_0", {1: (f"b{switch}", port)})
        second[f"b{switch}"][1][port] = (f"b{name}", 1)
    for name, (_description, links) in first.items():
        for port, (peer, peer_port) in links.items():
            if peer in first:
                second[f"b{name}"][1][port] = (f"b{peer}", peer_port)
    hosts = dict(HOSTS, **{f"cpu{n:02d}": f"cpu{n:02d}" for n in range(1, 5)})
    found = switch_map(parse_ibnetdiscover(printed({**first, **second}, {**first_cas, **second_cas})), hosts)
    tops = [entry for entry in found["switches"] if "switches" in entry]
    assert [sorted(top["switches"]) for top in tops] == [["bleaf00", "bleaf01"], ["leaf00", "leaf01"]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"no Switch, Ca or Rt record"),
        ("ibwarn: [1234] mad_rpc_open_port: can't open UMAD port ((null):0)\n", r"line 1: not a line"),
        ('Switch\t36 "X-00"\t\t# "x"\n', r"line 1: a node header that does not read"),
        ('[1]\t"S-00"[1]\n', r"line 1: a port line that does not read"),
    ],
)
def test_output_of_another_shape_is_a_clear_error_naming_the_line(text, message):
    with pytest.raises(ParseError, match=message):
        parse_ibnetdiscover(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('[]()"#SHCawitch 0123456789abcdef-=\n\t')), max_size=400))
def test_any_text_is_read_or_refused_with_a_parse_error(text):
    try:
        fabric = parse_ibnetdiscover(text)
    except ParseError:
        return
    switch_map(fabric, HOSTS)
