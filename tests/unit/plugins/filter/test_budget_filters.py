# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The blast-radius budget's filters: blast_budget (a playbook's drain, the rolling upgrade's) and
budget_comments (remediate.yml's reopening), over sinfo's real output shapes."""

from __future__ import annotations

import time

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.blast_budget import blast_budget
from ansible_collections.gpuops.cluster.plugins.filter.budget_comments import budget_comments
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns

FLEET = "".join(f"gpu{n}|idle|none\n" for n in range(1, 11))  # ten nodes: 10 % is one


def test_a_batch_counts_its_earlier_nodes_and_a_recent_take_out_counts():
    empty = "".join(f"gpu{n}|(null)\n" for n in range(1, 11))
    assert blast_budget(FLEET, empty, "gpu1", 8, 10)["allowed"]
    refused = blast_budget(FLEET, empty, "gpu2", 8, 10, 3600, ["gpu1", "gpu2"])
    assert not refused["allowed"] and "(gpu1)" in refused["why"]
    assert blast_budget(FLEET, empty, "gpu2", 8, 20, 3600, ["gpu1", "gpu2"])["allowed"]
    recent = empty.replace("gpu5|(null)", "gpu5|" + ns.budget_comment("taken", time.time() - 120))
    said = blast_budget(FLEET, recent, "gpu1", "8", "10", "3600")  # -e gives text
    assert not said["allowed"] and "taken out within the last 3600 s (gpu5)" in said["why"]


def test_a_latched_budget_refuses_and_says_how_a_person_reopens_it():
    latched = "gpu7|gpuops: budget spent 2026-12-04T10:00:00Z (gpu7 refused, 1 of 1 out)\n"
    said = blast_budget(FLEET, latched, "gpu1", 8, 100)
    assert not said["allowed"] and "remediate_reopen_budget=true" in said["why"]
    # A node out by automation already costs nothing more, latch or not.
    out = FLEET.replace("gpu1|idle|none", "gpu1|drain|gpuops driver upgrade to 580.95.05")
    assert blast_budget(out, latched, "gpu1", 8, 100)["allowed"]


def test_nodes_taken_out_together_each_count_and_cost_nothing_only_when_all_are_out():
    empty = "".join(f"gpu{n}|(null)\n" for n in range(1, 11))
    fleet = "".join(f"gpu{n}|idle|none\n" for n in range(1, 41))  # forty nodes: 10 % is four
    out = fleet.replace("gpu9|idle|none", "gpu9|drain|gpuops-health: xid GPU1")
    assert blast_budget(out, empty, ["gpu1", "gpu2", "gpu3"], 8, 10)["allowed"]  # gpu9 and three: four
    refused = blast_budget(out, empty, ["gpu1", "gpu2", "gpu3", "gpu4"], 8, 10)
    assert not refused["allowed"] and "4 nodes of 40" in refused["why"] and "gpu9" in refused["why"]
    # The first leaving node out already (a run that drained them and stopped) is no way round it.
    again = out.replace("gpu1|idle|none", "gpu1|drain|gpuops: leaving the cluster")
    assert not blast_budget(again, empty, ["gpu1", "gpu2", "gpu3", "gpu4"], 8, 10)["allowed"]
    every = again.replace("gpu2|idle|none", "gpu2|drng|gpuops: leaving the cluster")
    assert blast_budget(every, empty, ["gpu1", "gpu2"], 8, 10)["allowed"]
    with pytest.raises(AnsibleFilterError, match="a list of one node or more"):
        blast_budget(fleet, empty, [], 8, 10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 10, 3600), "validate_health_budget_nodes is 0"),
        ((8, 101, 3600), "validate_health_budget_percent is 101:"),
        ((8, 10, 0), "validate_health_budget_window is 0"),
    ],
)
def test_a_budget_that_cannot_be_used_is_named(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        blast_budget(FLEET, "", "gpu1", *args)


def test_budget_comments_lists_only_the_collection_s_own():
    text = (
        "gpu10|gpuops: taken out 2026-12-04T09:00:00Z\n"
        "gpu2|gpuops: budget spent 2026-12-04T10:00:00Z (gpu2 refused, 1 of 1 out)\n"
        "gpu3|RMA 4711 open\ngpu4|(null)\n"
    )
    assert list(budget_comments(text)) == ["gpu2", "gpu10"]
    assert budget_comments(text, latch=True) == {
        "gpu2": "gpuops: budget spent 2026-12-04T10:00:00Z (gpu2 refused, 1 of 1 out)"
    }
    with pytest.raises(AnsibleFilterError, match="budget_comments takes the text of sinfo"):
        budget_comments(None)
