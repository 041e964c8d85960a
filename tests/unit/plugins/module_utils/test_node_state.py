# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node state machine: what each fault owes, what observes it, the drain reason, the budget."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import health
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

PREFIX = "gpuops-health: "


@pytest.mark.parametrize(
    ("xid", "line", "action"),
    [
        (79, "", "reboot"),  # RESTART_BM
        (48, "", "reset"),  # WORKFLOW_XID_48
        (119, "", "reset"),  # RESET_GPU
        (54, "", "inspect"),  # CHECK_MECHANICALS
        (151, "", "reboot"),  # RESTART_VM
        (13, "", None),  # RESTART_APP: not in the fatal list
        (154, "154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "reboot"),
        (154, "154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "reset"),
        (154, "154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", None),
    ],
)
def test_each_xid_owes_its_catalogue_action(xid, line, action):
    assert ns.xid_action(xid, line, v.FATAL_XIDS.get(xid)) == action


@pytest.mark.parametrize(
    ("system", "action"),
    [("Memory system", "reset"), ("NVLink system", "reset"), ("PCIe system", "reboot"),
     ("Thermal system", "inspect"), ("InfoROM system", "inspect"), ("something new", "reboot")],
)  # fmt: skip
def test_each_dcgm_system_owes_its_cure(system, action):
    assert ns.dcgm_action(system) == action


def fail(check, subject):
    return v.record(check, subject, "x", "y", "fail")


def test_a_reboot_is_observed_by_a_new_boot_id_and_a_driver_reset_by_its_recovery_action():
    state = ns.advance(
        ns.new_state("b1"),
        [fail("xid", "GPU1"), fail("recovery_action", "GPU2")],
        [ns.fault("reboot", "GPU1", "Xid 79"), ns.fault("reset", "GPU2", "Reset", "driver")],
        boot_id="b1",
        now=1,
    )
    assert ns.outstanding(state) == ["reboot GPU1", "reset GPU2", "recovery_action GPU2", "xid GPU1"]
    passing = [
        v.record("xid", "all GPUs", "x", "none", "pass"),
        v.record("recovery_action", "GPU2", "None", "None", "pass"),
    ]
    state = ns.advance(state, passing, [], boot_id="b1", now=2, recovery={"GPU2": "None"})
    assert ns.outstanding(state) == ["reboot GPU1"]
    assert ns.decide(state, True, "gpuops-health: reboot GPU1", PREFIX) == ("keep", "gpuops-health: reboot GPU1")
    state = ns.advance(state, passing, [], boot_id="b2", now=3)
    assert ns.outstanding(state) == []
    assert ns.decide(state, True, "gpuops-health: reboot GPU1", PREFIX)[0] == "resume"


def test_a_check_cut_short_adds_cannot_check_which_only_a_whole_check_takes_away():
    state = ns.cannot_check(ns.new_state("b1"), "the checks took more than 40 s", now=1)
    assert ns.reason(state, PREFIX) == "gpuops-health: cannot check: the checks took more than 40 s"
    state = ns.advance(state, [], [], boot_id="b1", now=2, complete=False)
    assert ns.outstanding(state) == ["cannot_check node"]
    state = ns.advance(state, [v.record("gpu_count", "node", 8, 8, "pass")], [], boot_id="b1", now=3)
    assert ns.outstanding(state) == []


def test_the_reason_fits_slurm_s_length_and_the_state_keeps_the_whole_set():
    records = [fail("ib_ports", f"mlx5_{n}:1") for n in range(40)]
    state = ns.advance(ns.new_state("b1"), records, [], boot_id="b1", now=1)
    reason = ns.reason(state, PREFIX)
    assert len(reason) <= 200 and reason.endswith(" more") and len(state["failed"]) == 40


@pytest.mark.parametrize(
    ("nodes", "percent", "fleet", "limit"),
    [(8, 10, 1000, 8), (8, 10, 40, 4), (8, 10, 4, 1), (2, 100, 4, 2), (8, 50, 3, 1)],
)
def test_the_budget_is_the_smaller_of_its_nodes_and_its_share_and_at_least_one(nodes, percent, fleet, limit):
    assert ns.budget_limit(fleet, nodes, percent) == limit


@pytest.mark.parametrize(("nodes", "percent"), [(0, 10), (-1, 10), (8, 0), (8, 150), (True, 10), (8, "10")])
def test_a_budget_that_cannot_be_used_is_named(nodes, percent):
    problems = ns.budget_problems(nodes, percent, ("validate_health_budget_nodes", "validate_health_budget_percent"))
    assert problems and all(p.startswith("validate_health_budget_") for p in problems)


def test_only_the_collection_s_own_reasons_count_against_the_budget():
    text = "a|drain|gpuops-health: xid GPU1\nb|down*|gpuops-validate: nvlink\nc|drain|cable check\nd|idle|none\n"
    assert ns.fleet_out(text) == ({"a", "b", "c", "d"}, {"a", "b"})
    assert ns.budget(text, "d", nodes=2, percent=100)[0] is False
    assert ns.budget(text, "a", nodes=2, percent=100)[0] is True  # out already: costs nothing more


NOW = 1_800_000_000


def test_a_take_out_counts_for_the_window_after_the_node_is_back():
    fleet = "".join(f"gpu{n}|idle|none\n" for n in range(1, 21))  # 20 nodes: 10 % is 2
    comments = {
        "gpu2": ns.budget_comment("taken", NOW - 600),  # back in service, taken out 10 minutes ago
        "gpu3": ns.budget_comment("taken", NOW - 7200),  # two hours ago: outside the window
        "gpu4": "cable swap booked",  # a person's: not ours
    }
    rows = ns.comment_rows("".join(f"{n}|{c}\n" for n, c in comments.items()) + "gpu5|(null)\n")
    assert rows == {**comments, "gpu5": ""}
    allowed, why, spent = ns.budget(fleet, "gpu1", 8, 10, comments=rows, window=3600, now=NOW)
    assert allowed and spent is None and "1 of 2 nodes out by automation (1 of them back in service" in why
    out = fleet.replace("gpu6|idle|none", "gpu6|drain|gpuops-health: xid GPU1")
    allowed, why, spent = ns.budget(out, "gpu1", 8, 10, comments=rows, window=3600, now=NOW)
    assert not allowed and "gpu2, gpu6" in why and "remediate_reopen_budget=true" in why
    assert spent.startswith(ns.SPENT + "2027-01-15T08:00:00Z (gpu1 refused, 2 of 2 out")
    # Without the memory (no comments, or a window of the past), only the nodes out now count.
    assert ns.budget(out, "gpu1", 8, 10)[0] is True
    assert ns.budget(out, "gpu1", 8, 10, comments=rows, window=300, now=NOW)[0] is True


def test_the_latch_holds_until_a_person_clears_it_whatever_the_count():
    fleet = "".join(f"gpu{n}|idle|none\n" for n in range(1, 21))
    latched = {"gpu9": ns.budget_comment("spent", NOW - 86400, "gpu9 refused, 2 of 2 out")}
    allowed, why, spent = ns.budget(fleet, "gpu1", 8, 10, comments=latched, window=3600, now=NOW)
    assert not allowed and spent is None
    assert why.startswith("the blast-radius budget is latched (gpu9: gpuops: budget spent 2027-01-14T08:00:00Z")
    # A node out already may still change its reason; a person's clearing reopens it.
    out = fleet.replace("gpu1|idle|none", "gpu1|drain|gpuops-health: xid GPU1")
    assert ns.budget(out, "gpu1", 8, 10, comments=latched, window=3600, now=NOW)[0] is True
    assert ns.budget(fleet, "gpu1", 8, 10, comments={"gpu9": ""}, window=3600, now=NOW)[0] is True
    assert ns.latch(latched) == [("gpu9", latched["gpu9"])]


def test_a_person_s_comment_is_never_overwritten():
    stamp = ns.budget_comment("taken", NOW)
    assert ns.comment_update("", stamp) == stamp
    assert ns.comment_update(ns.budget_comment("spent", NOW - 60), stamp) == stamp
    assert ns.comment_update("RMA 12345 open", stamp) is None


@pytest.mark.parametrize("window", [0, -5, True, 1.5, "3600"])
def test_a_window_that_cannot_be_used_is_named(window):
    assert ns.window_problems(window, "validate_health_budget_window")[0].startswith("validate_health_budget_window is")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_the_comment_reader_takes_any_text(text):
    rows = ns.comment_rows(text)
    assert all(isinstance(c, str) for c in rows.values())
    ns.budget("a|idle|none\n", "a", 8, 10, comments=rows, window=3600, now=NOW)


SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
STORED = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(STORED)
def test_any_stored_state_loads_without_an_exception_and_stays_bounded(data):
    state, _note = ns.load(data, "b1")
    state = ns.advance(state, [fail("gpu_count", "node")], [ns.fault("reset", "GPU0", "x")], boot_id="b1", now=1)
    assert len(json.dumps(state)) < 200_000
    assert ns.decide(state, False, "", PREFIX)[0] == "drain"


def test_the_validate_role_s_readme_prints_the_state_machine_as_the_code_has_it():
    readme = (ROOT / "roles" / "validate" / "README.md").read_text()
    rows = [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in ns.TRANSITIONS]
    assert "\n".join(rows) in readme


def test_stored_entries_without_their_fields_are_dropped_not_trusted():
    """Found by make fuzz: a failed entry without its check raised a KeyError in advance()."""
    state, _note = ns.load({"schema": 1, "failed": {"x y": {"subject": "y"}}, "owed": {"r": {"subject": "GPU0"}}})
    assert state["failed"] == {} and state["owed"] == {}
    assert ns.advance(state, [fail("xid", "GPU0")], [], boot_id="b", now=1)["failed"]["xid GPU0"]["check"] == "xid"


def test_a_fault_on_one_gpu_carries_the_board_serial_and_a_whole_node_fault_none():
    gpus = [
        {"index": 0, "serial": "1561871400390", "pci_bus_id": "00000000:18:00.0"},
        {"index": 1, "serial": "N/A", "pci_bus_id": "00000000:2A:00.0"},
    ]
    faults = [
        ns.fault("reset", "GPU0", "Xid 48"),
        ns.fault("reboot", "0000:18:00", "Xid 79 on a GPU nvidia-smi no longer lists"),
        ns.fault("reset", "GPU1", "Xid 48"),  # a board without a serial: nothing to follow
        ns.fault("reboot", "node", "the health state was lost"),
    ]
    tagged = health.with_serials(faults, gpus)
    assert [f.get("serial") for f in tagged] == ["1561871400390", "1561871400390", None, None]
    # One check's faults on one GPU are one fault (as the node's repeat offender counts them).
    state = ns.advance(ns.new_state("b"), [], tagged, boot_id="b", now=NOW - 30)
    assert [e["detail"][:10] for e in ns.gpu_fault_events(state, NOW - 60)] == ["reboot 000"]
    state = ns.advance(state, [], tagged[:1], boot_id="b2", now=NOW)
    events = ns.gpu_fault_events(state, NOW - 60)
    assert [(e["serial"], e["t"]) for e in events] == [("1561871400390", NOW - 30), ("1561871400390", NOW)]
    assert ns.gpu_fault_events(state, NOW) == []  # the window is after them
    found = ns.gpu_history({"gpu1": events}, [{"index": 3, "serial": "1561871400390"}], NOW - 60, 2)
    assert found == [{"subject": "GPU3", "serial": "1561871400390", "faults": [
        {"node": "gpu1", "t": e["t"], "detail": e["detail"]} for e in events]}]  # fmt: skip
    assert ns.gpu_history({"gpu1": events}, [{"index": 3, "serial": "1561871400390"}], NOW - 60, 3) == []


@pytest.mark.parametrize("serial", ["N/A", "", None, "0", "[N/A]", "a b", "x" * 65, 7])
def test_a_serial_nvidia_smi_does_not_tell_is_none(serial):
    assert ns.known_serial(serial) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["serial", "t", "detail"]), SCALARS | st.floats()), max_size=80))
def test_the_fault_merge_takes_any_stored_shape_and_keeps_its_bound(events):
    merged = ns.merge_gpu_faults(events, -1e18)
    assert len(merged) <= ns.GPU_FAULTS_KEPT
    assert all(isinstance(e["serial"], str) and isinstance(e["t"], float) for e in merged)


def test_each_repair_is_timed_with_the_strongest_action_its_faults_owed():
    state = ns.new_state("b1")
    state["history"] = [
        {"t": 100.0, "event": "fault", "detail": "reset GPU1: Xid 48"},
        {"t": 160.0, "event": "fault", "detail": "reboot GPU1: the reset failed"},
        {"t": 700.0, "event": "resume", "detail": "x"},
        {"t": 800.0, "event": "failed", "detail": "ecc GPU0"},
        {"t": 830.0, "event": "resume", "detail": "x"},
    ]
    assert ns.timing(state)["last_repair_s"] == 30 and ns.timing(state)["last_repair_class"] == "check"
    state["history"] = state["history"][:3]
    assert (ns.timing(state)["last_repair_s"], ns.timing(state)["last_repair_class"]) == (600, "reboot")


def test_the_reason_names_an_evidence_bundle_only_by_its_stamp_and_stays_within_its_limit():
    state = ns.advance(ns.new_state("b1"), [], [ns.fault("reboot", "GPU0", "Xid 79")], boot_id="b1", now=10.0)
    named = ns.with_event(state, 11.0, "evidence", "/var/lib/gpuops/evidence/20261205T031500Z-gpu07.json")
    assert ns.reason(named, "gpuops-health: ") == "gpuops-health: reboot GPU0 (evidence 20261205T031500Z)"
    # A detail of another shape (a state file written by hand) names nothing, and never lengthens the reason.
    odd = ns.with_event(state, 11.0, "evidence", "x" * 300)
    assert ns.reason(odd, "gpuops-health: ") == "gpuops-health: reboot GPU0"
    many = ns.advance(
        named, [], [ns.fault("reset", f"GPU{n}", "Xid 48 " * 10) for n in range(40)], boot_id="b1", now=12.0
    )
    assert len(ns.reason(many, "gpuops-health: ")) <= 200 and ns.reason(many, "gpuops-health: ").endswith(
        " more (evidence 20261205T031500Z)"
    )
    # A resume ends the episode: the next drain names its own bundle or none.
    resumed = ns.with_event(named, 13.0, "resume", "")
    assert ns.evidence_id(resumed) is None
