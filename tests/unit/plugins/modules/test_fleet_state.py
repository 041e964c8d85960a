# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet state (module_utils/fleet.py and the fleet_state module) on a real folder: nodes a run
did not reach keep their data, never-recorded ones are named, a record that cannot be used stops
the call before anything is written, and a write that breaks off leaves the old record."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import fleet
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import node_spec
from ansible_collections.gpuops.cluster.plugins.modules import fleet_state
from conftest import fixture
from hypothesis import given, settings
from hypothesis import strategies as st
from module_harness import Node, run_module

LSCPU = fixture("lscpu", "i7_2600_1socket_4c_ht_default_columns.txt")
ONE_GPU = {
    "present": True,
    "count": 1,
    "slug": "l40s",
    "gpus": [{"index": 0, "pci_bus_id": "00000000:01:00.0", "minor_number": 0, "cpu_affinity": [0, 1]}],
}
SPEC = node_spec(LSCPU, ONE_GPU, 32000, reserve_percent=5, reserve_min_mib=1024)
BIGGER = node_spec(LSCPU, ONE_GPU, 64000, reserve_percent=5, reserve_min_mib=1024)


def slurm(host, spec=None):
    return {"hostname": host, "spec": spec or SPEC}


@pytest.fixture
def node(monkeypatch):
    return Node(monkeypatch, {}, {})


def call(folder, check_mode=False, diff=False, **args):
    return run_module(fleet_state.main, dict(args, dir=str(folder)), check_mode=check_mode, diff=diff)


def test_the_real_slurm_description_is_a_valid_section():
    fleet.check_section("slurm", slurm("gpu01"), "gpu01", None)
    assert SPEC["gres"] == "gpu:l40s:1"


def test_merge_keeps_the_nodes_a_run_did_not_reach_and_names_the_rest():
    stored = {
        "gpu01": {"schema": 1, "node": "gpu01", "sections": {"slurm": {"data": slurm("gpu01"), "since": "d1"}}},
        "gpu02": {"schema": 1, "node": "gpu02", "sections": {"slurm": {"data": slurm("gpu02"), "since": "d1"}}},
        "old09": {"schema": 1, "node": "old09", "sections": {"slurm": {"data": slurm("old09"), "since": "d0"}}},
    }
    plan = fleet.merge(
        stored,
        "slurm",
        {"gpu01": slurm("gpu01"), "gpu03": slurm("gpu03")},
        ["gpu01", "gpu02", "gpu03", "gpu04"],
        today="d2",
    )
    assert plan["nodes"] == {"gpu01": slurm("gpu01"), "gpu02": slurm("gpu02"), "gpu03": slurm("gpu03")}
    assert plan["kept"] == {"gpu02": "d1"}
    assert plan["missing"] == ["gpu04"]
    assert plan["absent"] == {"old09": slurm("old09")}
    assert plan["new"] == ["gpu03"]
    # gpu01 is as recorded: not written again.
    assert list(plan["writes"]) == ["gpu03"]
    assert plan["writes"]["gpu03"]["sections"]["slurm"] == {"data": slurm("gpu03"), "since": "d2"}


def test_a_changed_node_is_written_with_its_other_sections_kept():
    scrape = {"targets": {"dcgm": "gpu01:9400"}, "labels": {"gpu_model": "l40s"}}
    stored = {
        "gpu01": {
            "schema": 1,
            "node": "gpu01",
            "sections": {"slurm": {"data": slurm("gpu01"), "since": "d1"}, "scrape": {"data": scrape, "since": "d1"}},
        }
    }
    plan = fleet.merge(stored, "slurm", {"gpu01": slurm("gpu01", BIGGER)}, ["gpu01"], today="d2")
    assert plan["new"] == []
    assert plan["changed_keys"] == {"gpu01": ["spec"]}
    assert plan["writes"]["gpu01"]["sections"] == {
        "slurm": {"data": slurm("gpu01", BIGGER), "since": "d2"},
        "scrape": {"data": scrape, "since": "d1"},
    }


def test_a_node_added_and_removed_at_once_is_refused():
    with pytest.raises(fleet.FleetError, match=r"gpu03: recorded by this run and removed by it at once"):
        fleet.merge({}, "slurm", {"gpu03": slurm("gpu03")}, ["gpu03"], today="d", remove=["gpu03"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"gpu01: .*gpu01.json is not valid JSON .*Delete it"),
        ('{"schema": 2, "node": "gpu01", "sections": {}}', r"schema 2, written by a newer gpuops.cluster"),
        ('{"schema": 1, "node": "gpu02", "sections": {}}', r"names node 'gpu02', not 'gpu01'"),
        ('{"schema": "1", "node": "gpu01", "sections": {}}', r"has no schema number"),
        ("[]", r"is not a JSON object"),
        (
            '{"schema": 1, "node": "gpu01", "sections": {"slurm": {"data": {"hostname": "gpu01", "spec": {"cpus": 8}},'
            ' "since": "d"}}}',
            r"gpu01: the fleet state's .*gpu01.json: node description has no whole number boards",
        ),
        (
            '{"schema": 1, "node": "gpu01", "sections": {"scrape": {"data": {"targets": {"dcgm": "gpu01"}}, '
            '"since": "d"}}}',
            r"scrape target 'dcgm': 'gpu01' is not host:port",
        ),
        (
            '{"schema": 1, "node": "gpu01", "sections": {"validation": {"data": {"verdict": "pass", '
            '"date": "2026-11-26T08:00:00Z", "gpus": "eight"}, "since": "d"}}}',
            r"gpu01: .*gpu01.json: validation gpus 'eight'",
        ),
        (
            '{"schema": 1, "node": "gpu01", "sections": {"validation": {"data": {"verdict": "pass", '
            '"date": "2026-11-26T08:00:00Z", "compute_ports": ["mlx5_0"]}, "since": "d"}}}',
            r"validation compute_ports is not a list of mappings",
        ),
    ],
)
def test_a_record_that_cannot_be_used_is_named_with_the_fix(text, message):
    with pytest.raises(fleet.FleetError, match=message):
        fleet.parse_record(text, "gpu01", "/var/lib/gpuops/fleet/gpu01.json")


def test_a_section_of_a_newer_collection_is_kept_as_it_is():
    text = '{"schema": 1, "node": "gpu01", "sections": {"ports": {"data": [1], "since": "d"}}}'
    record = fleet.parse_record(text, "gpu01", "f")
    plan = fleet.merge({"gpu01": record}, "slurm", {"gpu01": slurm("gpu01")}, ["gpu01"], today="d2")
    assert plan["writes"]["gpu01"]["sections"]["ports"] == {"data": [1], "since": "d"}


@pytest.mark.parametrize("name", ["../etc", "", ".hidden", "a/b", "x" * 300, 7, "gpu01\n"])
def test_a_name_that_cannot_be_a_file_is_refused(name):
    with pytest.raises(fleet.FleetError, match="cannot name a fleet-state record"):
        fleet.check_node(name)


def test_a_trailing_newline_is_no_hostname_target_or_date():
    data = slurm("gpu01")
    with pytest.raises(fleet.FleetError, match="hostname"):
        fleet.check_section("slurm", dict(data, hostname=data["hostname"] + "\n"), "gpu01", None)
    with pytest.raises(fleet.FleetError, match="date"):
        fleet.check_section("validation", {"verdict": "pass", "date": "2026-12-04\n"}, "gpu01", None)


def test_module_records_keeps_and_is_idempotent(tmp_path, node):
    folder = tmp_path / "fleet"
    first = call(
        folder,
        section="slurm",
        records={"gpu01": slurm("gpu01"), "gpu02": slurm("gpu02")},
        inventory=["gpu01", "gpu02"],
    )
    assert not first.failed and first.result["changed"]
    assert sorted(os.listdir(folder)) == [".lock", "gpu01.json", "gpu02.json"]
    assert json.loads((folder / "gpu01.json").read_text())["sections"]["slurm"]["data"] == slurm("gpu01")
    # gpu02 is down: this run reaches gpu01 only, nothing changes, gpu02's line is kept.
    again = call(folder, section="slurm", records={"gpu01": slurm("gpu01")}, inventory=["gpu01", "gpu02"])
    assert not again.result["changed"] and again.result["written"] == []
    assert again.result["nodes"]["gpu02"] == slurm("gpu02")
    assert list(again.result["kept"]) == ["gpu02"]
    assert node.warnings == []
    # The node lines of slurm.conf come back worked out, the kept node's with this run's.
    assert again.result["files"] == fleet.files("slurm", again.result["nodes"])
    assert again.result["files"]["groups"] == [{"nodes": "gpu[01-02]", "spec": SPEC}]


def test_a_second_writer_waits_for_the_first_and_keeps_both_sections(tmp_path, node):
    """Two runs record different sections of one node (AWX slices, two operators): the second waits for
    the folder's lock, reads the record again under it, and both sections stay."""
    folder = tmp_path / "fleet"
    assert call(folder, section="slurm", records={"gpu01": slurm("gpu01")}, inventory=["gpu01"]).result["changed"]
    holder = os.open(folder / ".lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the first writer holds the lock...
    done = {}
    second = threading.Thread(
        target=lambda: done.update(
            result=call(folder, section="validation", inventory=["gpu01"],
                        records={"gpu01": {"verdict": "pass", "date": "2026-12-04"}})
        )
    )  # fmt: skip
    second.start()
    time.sleep(1)
    assert second.is_alive()  # ...the second waits for it,
    # ...while the first writes its own section (scrape), then lets go.
    record = json.loads((folder / "gpu01.json").read_text())
    record["sections"]["scrape"] = {"data": {"targets": {"node": "gpu01:9100"}, "labels": {}}, "since": "2026-12-04"}
    (folder / "gpu01.json").write_text(json.dumps(record))
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    second.join(timeout=30)
    assert not done["result"].failed
    sections = json.loads((folder / "gpu01.json").read_text())["sections"]
    assert sorted(sections) == ["scrape", "slurm", "validation"]


def test_a_writer_that_cannot_get_the_lock_in_time_names_the_holder(tmp_path, node):
    folder = tmp_path / "fleet"
    folder.mkdir()
    holder = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT)
    os.write(holder, b"pid 4242 on awx-slice-2 since 2026-12-04T10:00:00Z\n")
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        out = call(folder, section="slurm", records={"gpu01": slurm("gpu01")}, inventory=["gpu01"], lock_timeout=1)
    finally:
        os.close(holder)
    assert out.failed and "pid 4242 on awx-slice-2" in out.result["msg"] and "fleet_lock_timeout" in out.result["msg"]
    assert not (folder / "gpu01.json").exists()
    # Check mode and a plain read take no lock.
    holder = os.open(folder / ".lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        assert not call(folder, check_mode=True, section="slurm", records={"gpu01": slurm("gpu01")},
                        inventory=["gpu01"], lock_timeout=0).failed  # fmt: skip
        assert not call(folder).failed
    finally:
        os.close(holder)


def test_module_warns_about_a_node_never_recorded(tmp_path, node):
    out = call(tmp_path, section="slurm", records={"gpu01": slurm("gpu01")}, inventory=["gpu01", "gpu09"])
    assert out.result["missing"] == ["gpu09"]
    assert node.warnings and "gpu09: not reached by this run and never recorded" in node.warnings[0]


def test_module_check_mode_writes_nothing_and_says_what_it_would(tmp_path, node):
    out = call(
        tmp_path, check_mode=True, diff=True, section="slurm", records={"gpu01": slurm("gpu01")}, inventory=["gpu01"]
    )
    assert out.result["changed"] and out.result["written"] == ["gpu01"]
    assert out.result["diff"][0]["before"] == "" and '"hostname": "gpu01"' in out.result["diff"][0]["after"]
    assert os.listdir(tmp_path) == []


def test_module_refuses_a_corrupt_record_before_writing_any(tmp_path, node):
    (tmp_path / "gpu02.json").write_text("{truncated")
    out = call(tmp_path, section="slurm", records={"gpu01": slurm("gpu01")}, inventory=["gpu01", "gpu02"])
    assert out.failed and "gpu02:" in out.result["msg"] and "gpu02.json is not valid JSON" in out.result["msg"]
    assert sorted(os.listdir(tmp_path)) == [".lock", "gpu02.json"]  # the lock alone, no record written


def test_module_removes_a_record_and_reads_every_section(tmp_path, node):
    call(
        tmp_path,
        section="slurm",
        records={"gpu01": slurm("gpu01"), "gpu02": slurm("gpu02")},
        inventory=["gpu01", "gpu02"],
    )
    out = call(tmp_path, section="slurm", inventory=["gpu01"], remove=["gpu02"])
    assert out.result["deleted"] == ["gpu02"] and sorted(os.listdir(tmp_path)) == [".lock", "gpu01.json"]
    summary = call(tmp_path)
    assert not summary.result["changed"] and list(summary.result["sections"]) == ["gpu01"]
    assert list(summary.result["sections"]["gpu01"]) == ["slurm"]


def test_module_refuses_records_without_a_section(tmp_path, node):
    out = call(tmp_path, records={"gpu01": slurm("gpu01")})
    assert out.failed and "need a section" in out.result["msg"]


def test_a_write_that_breaks_off_leaves_the_old_record(tmp_path, node, monkeypatch):
    call(tmp_path, section="slurm", records={"gpu01": slurm("gpu01")}, inventory=["gpu01"])
    before = (tmp_path / "gpu01.json").read_text()

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fleet_state.os, "replace", broken)
    out = call(tmp_path, section="slurm", records={"gpu01": slurm("gpu01", BIGGER)}, inventory=["gpu01"])
    assert out.failed and "No space left on device" in out.result["msg"]
    assert (tmp_path / "gpu01.json").read_text() == before
    assert sorted(os.listdir(tmp_path)) == [".lock", "gpu01.json"]  # no temporary file left


def test_hostile_nesting_is_refused_not_a_traceback():
    with pytest.raises(fleet.FleetError, match="not valid JSON"):
        fleet.parse_record("[" * 100000, "gpu01", "f")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_read_or_refused_with_a_fleet_error(text):
    try:
        fleet.parse_record(text, "gpu01", "f")
    except fleet.FleetError as err:
        assert "gpu01" in str(err)


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
)
def test_any_json_section_is_checked_without_a_traceback(data):
    for section in fleet.SECTIONS:
        text = json.dumps({"schema": 1, "node": "gpu01", "sections": {section: {"data": data, "since": "d"}}})
        try:
            fleet.parse_record(text, "gpu01", "f")
        except fleet.FleetError:
            pass


def test_a_gpu_of_another_model_is_a_hardware_change():
    """Back from repair with another GPU model, same count: the record's hardware differs, which the
    slurm role drains the node for (its expression is tested in test_slurm_fleet_expressions.py)."""
    before = dict(slurm("gpu01"), hardware={"gpus": 1, "product": "NVIDIA L40S"})
    after = dict(slurm("gpu01"), hardware={"gpus": 1, "product": "NVIDIA L40"})
    stored = {"gpu01": {"schema": 1, "node": "gpu01", "sections": {"slurm": {"data": before, "since": "d1"}}}}
    plan = fleet.merge(stored, "slurm", {"gpu01": after}, ["gpu01"], today="d2")
    assert plan["changed_keys"] == {"gpu01": ["hardware"]}


def test_a_slice_keeps_the_nodes_of_the_other_slices_and_takes_none_as_leaving(tmp_path, node):
    """An AWX job slice's inventory holds its own hosts: a run over everything recorded gpu01 to gpu03,
    the slice of gpu03 reaches it alone. Without slice, gpu01 and gpu02 would be absent (leaving)."""
    folder = tmp_path / "fleet"
    everything = {name: slurm(name) for name in ("gpu01", "gpu02", "gpu03")}
    assert call(folder, section="slurm", records=everything, inventory=list(everything)).result["changed"]
    plain = call(folder, section="slurm", records={"gpu03": slurm("gpu03")}, inventory=["gpu03"])
    assert sorted(plain.result["absent"]) == ["gpu01", "gpu02"]
    sliced = call(folder, section="slurm", records={"gpu03": slurm("gpu03", BIGGER)}, inventory=["gpu03"], slice=True)
    assert not sliced.failed and sliced.result["absent"] == {}
    assert sorted(sliced.result["kept"]) == ["gpu01", "gpu02"] and sliced.result["written"] == ["gpu03"]
    assert sliced.result["files"]["hostnames"] == {"gpu01": "gpu01", "gpu02": "gpu02", "gpu03": "gpu03"}
    # A node the slice removes (left the cluster, named by a run over everything) is not kept back.
    gone = call(folder, section="slurm", inventory=["gpu03"], remove=["gpu02"], slice=True)
    assert sorted(gone.result["nodes"]) == ["gpu01", "gpu03"] and gone.result["deleted"] == ["gpu02"]


def test_a_configless_mark_or_partitions_of_another_shape_are_refused():
    fleet.check_section("slurm", dict(slurm("gpu01"), configless=True, partitions=["gpu", "l40s"]), "gpu01", None)
    with pytest.raises(fleet.FleetError, match="configless 'yes' is not true or false"):
        fleet.check_section("slurm", dict(slurm("gpu01"), configless="yes"), "gpu01", None)
    for bad in ("gpu", [""], [3], {"gpu": True}):
        with pytest.raises(fleet.FleetError, match="is not a list of partition names"):
            fleet.check_section("slurm", dict(slurm("gpu01"), partitions=bad), "gpu01", None)
