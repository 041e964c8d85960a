# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IMEX: the domain as nvidia-imex-ctl -N -j reports it (a real capture of Canonical's 580.196.07
and the states of its protocol), and the node list from the trays' NVLink registration."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.fleet import FleetError, check_section, files
from ansible_collections.gpuops.cluster.plugins.module_utils.imex import (
    CONNECTION_STATES,
    NODE_STATES,
    ImexError,
    check_records,
    domain_problems,
    domains,
    node_list,
    parse_domain_status,
    parse_node_list,
)
from conftest import fixture
from hypothesis import given, settings
from hypothesis import strategies as st

DOWN = fixture("imex", "ctl_N_j_two_nodes_no_daemon_580.196.07_device_capture.json")


def test_a_domain_whose_daemons_are_not_up_is_down_node_by_node():
    read = parse_domain_status(DOWN)
    assert read["status"] == "DOWN"
    assert [(n["index"], n["host"], n["status"]) for n in read["nodes"]] == [
        (0, "127.0.0.1", "UNAVAILABLE"),
        (1, "127.0.0.2", "UNAVAILABLE"),
    ]
    assert read["nodes"][0]["connections"] == {0: "INVALID", 1: "INVALID"}
    assert read["problems"] == [
        "the IMEX domain is DOWN",
        "node #0 (127.0.0.1) is UNAVAILABLE",
        "node #0 (127.0.0.1) has no connection to #0 INVALID, #1 INVALID",
        "node #1 (127.0.0.2) is UNAVAILABLE",
        "node #1 (127.0.0.2) has no connection to #0 INVALID, #1 INVALID",
    ]


def ready(count=2, **changes):
    """The capture's shape with every daemon ready and connected (the protocol's READY, CONNECTED, UP)."""
    data = json.loads(DOWN)
    data["status"] = "UP"
    hosts = [f"10.0.0.{i + 1}" for i in range(count)]
    data["nodes"] = {
        str(i): {
            "status": "READY",
            "host": hosts[i],
            "connections": {str(j): {"host": hosts[j], "status": "CONNECTED", "changed": False} for j in range(count)},
            "changed": False,
            "version": "580.196.07",
            "hostName": f"tray{i + 1}",
        }
        for i in range(count)
    }
    for path, value in changes.items():
        node, peer = path.partition("_")[::2]
        if peer:
            data["nodes"][node]["connections"][peer]["status"] = value
        else:
            data["nodes"][node]["status"] = value
    return json.dumps(data)


def test_a_ready_domain_has_no_problem_and_one_lost_peer_is_named():
    assert parse_domain_status(ready())["problems"] == []
    assert parse_domain_status(ready(**{"1": "WAITING_FOR_PEERS", "1_0": "NEVER_CONNECTED"}))["problems"] == [
        "node #1 (10.0.0.2) is WAITING_FOR_PEERS",
        "node #1 (10.0.0.2) has no connection to #0 NEVER_CONNECTED",
    ]
    assert parse_domain_status(ready(count=18))["nodes"][17]["hostname"] == "tray18"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Query Status failed.", r"nvidia-imex-ctl -N -j: not JSON"),
        ('{"nodes": {}, "status": "SIDEWAYS"}', r"the domain: state 'SIDEWAYS' is none of UP, DEGRADED, DOWN"),
        ('{"status": "UP"}', r"the domain has no nodes of the expected kind"),
        ('{"status": "UP", "nodes": {"x": {}}}', r"node id 'x' is not a number"),
        ('{"status": "UP", "nodes": {"0": {"status": "READY", "host": "a"}}}', r"node #0 has no connections"),
        ("[]", r"the domain has no status"),
    ],
)
def test_another_shape_is_a_clear_error_naming_the_command(text, message):
    with pytest.raises(ParseError, match=message):
        parse_domain_status(text)


LEAVES = st.sampled_from(["UP", "READY", "CONNECTED", "0", "1", "x", *NODE_STATES])
KEYS = st.sampled_from(["0", "1", "status", "nodes", "host", "connections", "x"])
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSONISH)
def test_any_json_is_read_or_refused_with_a_parse_error(value):
    try:
        read = parse_domain_status(json.dumps(value))
    except ParseError as err:
        assert str(err).startswith("nvidia-imex-ctl -N -j: ")
        return
    assert all(state in CONNECTION_STATES for node in read["nodes"] for state in node["connections"].values())


RACK = {"cluster_uuid": "5d1c0a9e-7f3b-4c2d-9e8f-1a2b3c4d5e6f", "clique_id": 32766}


def tray(address, domain="rack", gpus=4):
    domain = RACK if domain == "rack" else domain
    return {"address": address, "nvlink_domain": dict(domain) if domain else None, "gpus": gpus}


def test_the_node_list_is_every_trays_address_in_inventory_order():
    members = {f"t{n:02d}": tray(f"10.1.0.{n}") for n in (3, 1, 2)}
    assert node_list(members) == ["10.1.0.1", "10.1.0.2", "10.1.0.3"]
    assert node_list({"t1": tray("fd00::1")}) == ["fd00::1"]


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({}, r"no tray to list"),
        (
            {"t1": tray("10.0.0.1"), "t2": tray("10.0.0.2", dict(RACK, clique_id=7))},
            r"would mix NVLink domains .*clique 7: t2",
        ),
        ({"t1": tray("10.0.0.1", None)}, r"t1 registered in no NVLink domain"),
        ({"t1": tray("tray1.example")}, r"t1's IMEX address 'tray1.example' is not an IP address"),
        ({"t1": tray("10.0.0.1"), "t2": tray("10.0.0.1")}, r"t2 and t1 share the IMEX address 10.0.0.1"),
        ({f"t{n:02d}": tray(f"10.0.0.{n}") for n in range(1, 20)}, r"would hold 76 GPUs, more than the 72"),
    ],
)  # fmt: skip
def test_a_list_that_would_split_or_mix_a_domain_is_refused_naming_the_trays(members, message):
    with pytest.raises(ImexError, match=message):
        node_list(members)


def test_each_domain_of_the_fleet_state_gets_its_own_list():
    other = dict(RACK, clique_id=7)
    records = {"b2": tray("10.2.0.2", other), "a1": tray("10.1.0.1"), "b1": tray("10.2.0.1", other)}
    records["a2"] = tray("10.1.0.2")
    uuid = RACK["cluster_uuid"]
    assert domains(records) == [
        {"cluster_uuid": uuid, "clique_id": 7, "members": ["b1", "b2"], "nodes": ["10.2.0.1", "10.2.0.2"]},
        {"cluster_uuid": uuid, "clique_id": 32766, "members": ["a1", "a2"], "nodes": ["10.1.0.1", "10.1.0.2"]},
    ]
    assert files("imex", records)["domains"] == domains(records)


def test_the_fleet_state_refuses_a_bad_imex_record_and_a_domain_over_72_gpus():
    check_section("imex", tray("10.1.0.1"), "t1", None)
    for bad, message in (
        (tray("tray1.example"), "imex address 'tray1.example' is not an IP address"),
        (tray("10.1.0.1", None), "imex nvlink_domain None is not a cluster UUID"),
        (tray("10.1.0.1", gpus=0), "imex gpus 0"),
        (tray("10.1.0.1\n"), "is not an IP address"),
    ):
        with pytest.raises(FleetError, match=message):
            check_section("imex", bad, "t1", None)
    with pytest.raises(FleetError, match=r"the fleet state's IMEX domains: .* would hold 76 GPUs"):
        files("imex", {f"t{n:02d}": tray(f"10.0.0.{n}") for n in range(1, 20)})


def test_the_daemon_must_run_the_trays_own_list():
    status = parse_domain_status(ready())
    assert domain_problems(status, ["10.0.0.1", "10.0.0.2"]) == []
    assert domain_problems(status, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) == [
        "the daemon's nodes are 10.0.0.1, 10.0.0.2 but nodes_config.cfg lists 10.0.0.1, 10.0.0.2, 10.0.0.3: restart "
        "nvidia-imex on every tray of the domain so that each reads the same list"
    ]


def test_a_node_list_is_addresses_one_per_line():
    assert parse_node_list("# rack 1\n10.0.0.1\n\n  fd00::2  \n") == ["10.0.0.1", "fd00::2"]
    with pytest.raises(ParseError, match=r"nodes_config.cfg: line 2 'tray2' is not an IP address"):
        parse_node_list("10.0.0.1\ntray2\n")


def test_the_validation_record_passes_a_ready_domain_and_names_what_is_not():
    nodes = "10.0.0.1\n10.0.0.2\n"
    (passed,) = check_records(nodes, ready())
    assert (passed["check"], passed["verdict"], passed["measured"]) == ("imex", "pass", "UP, 2/2 nodes READY")
    (lost,) = check_records(nodes, ready(**{"1": "UNAVAILABLE", "0_1": "DISCONNECTED"}))
    assert lost["verdict"] == "fail"
    assert "node #0 (10.0.0.1) has no connection to #1 DISCONNECTED" in lost["reason"]
    assert "node #1 (10.0.0.2) is UNAVAILABLE" in lost["reason"]
    (down,) = check_records("10.0.0.1\n", DOWN)
    assert down["verdict"] == "fail" and down["reason"].startswith("the daemon's nodes are 127.0.0.1, 127.0.0.2")
    (unread,) = check_records(nodes, None, "`nvidia-imex-ctl -N -j` exited 1: Query Status failed.")
    assert unread["verdict"] == "fail" and "Query Status failed." in unread["reason"]
    (garbled,) = check_records(nodes, "Connectivity Table Legend:")
    assert garbled["verdict"] == "fail" and garbled["reason"].startswith("could not read `nvidia-imex-ctl -N -j`")
    (bad_list,) = check_records("tray1\n", ready())
    assert bad_list["verdict"] == "fail" and "line 1 'tray1'" in bad_list["reason"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_the_validation_record_never_raises_on_any_list_or_output(nodes, output):
    (record,) = check_records(nodes, output)
    assert record["verdict"] in ("pass", "fail") and record["check"] == "imex"
