# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run lease: parallel runs (AWX slices, two operators) take the steps from the plan of a
cluster-wide file to its record one after the other; a dead run's lease ends by itself."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import time

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import fleet_lock
from ansible_collections.gpuops.cluster.plugins.modules import fleet_lease
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from module_harness import Node, run_module


@pytest.fixture
def node(monkeypatch):
    return Node(monkeypatch, {}, {})


def call(folder, check_mode=False, **args):
    return run_module(fleet_lease.main, dict(args, dir=str(folder)), check_mode=check_mode)


def test_a_lease_is_held_renewed_and_released_without_a_change(tmp_path, node):
    folder = tmp_path / "fleet"
    out = call(folder, id="run-a", holder="2 host(s) gpu01, gpu02")
    assert not out.failed and out.result["held"] and not out.result["changed"] and out.result["taken_over"] is None
    lease = json.loads((folder / ".lease").read_text())
    assert lease["id"] == "run-a" and lease["holder"] == "2 host(s) gpu01, gpu02"
    assert lease["expires"] >= time.time() + 1790
    # The same run again (its next batch) renews its own lease at once, keeping its start.
    again = call(folder, id="run-a", ttl=60)
    assert again.result["held"] and again.result["waited"] == 0
    renewed = json.loads((folder / ".lease").read_text())
    assert renewed["since"] == lease["since"] and renewed["expires"] <= time.time() + 61
    # Another run's release leaves it alone; its own ends it.
    assert call(folder, id="run-b", state="released").result["released"] is False
    assert (folder / ".lease").exists()
    assert call(folder, id="run-a", state="released").result["released"] is True
    assert not (folder / ".lease").exists()
    assert call(tmp_path / "never", id="run-a", state="released").result["released"] is False


def test_a_hold_without_a_name_names_its_lease_and_a_release_without_one_ends_nothing(tmp_path, node):
    folder = tmp_path / "fleet"
    held = call(folder)
    assert held.result["held"] and held.result["id"].startswith("run-") and len(held.result["id"]) == 20
    assert json.loads((folder / ".lease").read_text())["id"] == held.result["id"]
    assert call(folder, state="released").result == {"changed": False, "id": None, "held": False, "released": False}
    assert call(folder, id=held.result["id"], state="released").result["released"] is True


def test_a_second_run_waits_for_the_first_and_fails_naming_it_past_its_wait(tmp_path, node):
    folder = tmp_path / "fleet"
    assert call(folder, id="run-a", holder="3 host(s) fleet-ctl, fleet-a, AWX job 812").result["held"]
    started = time.monotonic()
    out = call(folder, id="run-b", timeout=1)
    assert out.failed and time.monotonic() - started < 10
    msg = out.result["msg"]
    assert "run run-a (3 host(s) fleet-ctl, fleet-a, AWX job 812)" in msg and "fleet_lease_timeout" in msg
    assert ".lease on the fleet host" in msg
    assert json.loads((folder / ".lease").read_text())["id"] == "run-a"  # untouched


def _slice(folder, name, queue):
    """A slice's critical section: hold the lease, read the shared file, write it back with its name."""
    fleet_lock.acquire(folder, name, holder=name, ttl=60, timeout=60, lock_timeout=10, poll=0.05)
    start = time.monotonic()
    path = os.path.join(folder, "slurm.conf")
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split()
    time.sleep(0.3)  # the plan, the packages, the restart: other slices run meanwhile
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join([*lines, name]))
    queue.put((start, time.monotonic(), name))
    fleet_lock.release(folder, name, lock_timeout=10)


def test_parallel_slices_take_their_turn_and_the_last_file_holds_every_one(tmp_path):
    """Three processes at once, as three AWX slices: without the lease each would write the file it read
    before the others wrote, and the last one would lose two; with it, every slice's line is kept."""
    folder = str(tmp_path)
    (tmp_path / "slurm.conf").write_text("")
    queue = multiprocessing.get_context("fork").Queue()
    slices = [
        multiprocessing.get_context("fork").Process(target=_slice, args=(folder, f"slice-{n}", queue))
        for n in (1, 2, 3)
    ]
    for proc in slices:
        proc.start()
    for proc in slices:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert sorted((tmp_path / "slurm.conf").read_text().split()) == ["slice-1", "slice-2", "slice-3"]
    turns = sorted(queue.get(timeout=5) for proc in slices)
    assert sorted(name for start, end, name in turns) == ["slice-1", "slice-2", "slice-3"]
    # One after the other: each turn starts after the one before it ended.
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(turns))
    assert not (tmp_path / ".lease").exists()


def test_a_dead_runs_lease_is_taken_over_at_its_expiry_naming_it(tmp_path, node):
    folder = tmp_path / "fleet"
    folder.mkdir()
    dead = {"id": "run-dead", "holder": "1 host(s) fleet-ctl", "since": "2026-12-05T01:00:00Z", "expires": 0}
    (folder / ".lease").write_text(json.dumps(dead))
    out = call(folder, id="run-new", timeout=0)
    assert out.result["held"] and "run run-dead (1 host(s) fleet-ctl)" in out.result["taken_over"]
    assert node.warnings and "took over an expired fleet lease" in node.warnings[0]
    # A lease that ends during the wait: the wait ends with it, not at the timeout.
    (folder / ".lease").write_text(json.dumps(dict(dead, expires=int(time.time()) + 2)))
    started = time.monotonic()
    assert call(folder, id="run-later", timeout=600).result["held"]
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"id": "run a"}, "lease id 'run a'"),
        ({"id": "r" * 65}, "1 to 64 letters"),
        ({"id": "run-a", "ttl": 0}, "fleet_lease_ttl is 0: a lease lasts"),
        ({"id": "run-a", "timeout": -1}, "fleet_lease_timeout is -1"),
    ],
)
def test_bad_input_is_named_before_anything_is_written(tmp_path, node, args, message):
    out = call(tmp_path / "fleet", **args)
    assert out.failed and message in out.result["msg"]
    assert not (tmp_path / "fleet").exists()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"id": "x"}',
        '{"id": "x", "holder": "", "since": "", "expires": true}',
        '{"id": "x", "holder": "", "since": "", "expires": NaN}',
        '{"id": "x", "holder": "", "since": "", "expires": 1e300}',
        '{"id": "x", "holder": "", "since": "", "expires": -1}',
        "\xff",
    ],
)
def test_a_lease_file_this_collection_did_not_write_is_refused_with_the_fix(tmp_path, node, text):
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / ".lease").write_text(text, encoding="latin-1")
    out = call(folder, id="run-a")
    assert out.failed and ".lease" in out.result["msg"] and "delete it" in out.result["msg"]


def test_check_mode_holds_nothing_and_a_file_in_the_folders_place_is_named(tmp_path, node):
    out = call(tmp_path / "fleet", check_mode=True, id="run-a")
    assert not out.failed and out.result["held"] is False and not (tmp_path / "fleet").exists()
    (tmp_path / "file").write_text("")
    out = call(tmp_path / "file", id="run-a")
    assert out.failed and "is not a folder" in out.result["msg"] and "fleet_dir" in out.result["msg"]


LEASES = st.one_of(
    st.text(max_size=300),
    st.fixed_dictionaries(
        {},
        optional={
            key: st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
            for key in ("id", "holder", "since", "expires")
        },
    ).map(json.dumps),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=LEASES)
def test_any_lease_file_is_read_or_refused_with_a_lock_error(tmp_path, text):
    (tmp_path / ".lease").write_text(text, encoding="utf-8")
    try:
        lease = fleet_lock.read_lease(str(tmp_path))
    except fleet_lock.LockError as err:
        assert "delete it" in str(err)
        return
    assert fleet_lock.describe(lease).startswith(f"run {lease['id']}")
