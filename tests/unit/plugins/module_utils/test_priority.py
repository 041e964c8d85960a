# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Workload tiers: the Slurm QOS and the Kubernetes PriorityClasses agree on who preempts whom;
bad tiers are refused with the variable and the fix."""

from __future__ import annotations

import k8s_api
import pytest
from ansible_collections.gpuops.cluster.plugins.filter.workload_tiers import workload_tiers
from ansible_collections.gpuops.cluster.plugins.module_utils import priority
from hypothesis import given, settings
from hypothesis import strategies as st

TIERS = [
    {"name": "inference", "priority": 100, "grace_time": 60},
    {"name": "training", "priority": 1000, "preempt": True},
    {"name": "experiments", "priority": 10},
]


def test_slurm_qos_highest_first_and_preempting_every_lower_tier():
    assert priority.slurm_qos(TIERS) == [
        {
            "name": "training",
            "priority": 1000,
            "preempt": ["experiments", "inference", "normal"],
            "preempt_mode": "cluster",
            "grace_time": 0,
        },
        {"name": "inference", "priority": 100, "preempt": [], "preempt_mode": "cluster", "grace_time": 60},
        {"name": "experiments", "priority": 10, "preempt": [], "preempt_mode": "cluster", "grace_time": 0},
    ]


def test_slurm_conf_preempts_by_qos_and_requeues():
    conf = priority.slurm_conf(TIERS)
    assert {name: value for name, (value, _why) in conf.items()} == {
        "PriorityType": "priority/multifactor",
        "PriorityWeightQOS": "100000",
        "PreemptType": "preempt/qos",
        "PreemptMode": "REQUEUE",
    }
    assert all(reason for _value, reason in conf.values())


def test_no_preempting_tier_means_no_preemption():
    conf = priority.slurm_conf([{"name": "training", "priority": 10}])
    assert "PreemptType" not in conf
    assert priority.slurm_conf([]) == {}


def test_priority_classes_match_the_slurm_tiers():
    classes = priority.priority_classes(TIERS)
    assert [(c["metadata"]["name"], c["value"], c["preemptionPolicy"]) for c in classes] == [
        ("training", 1000, "PreemptLowerPriority"),
        ("inference", 100, "Never"),
        ("experiments", 10, "Never"),
    ]
    assert "preempts inference, experiments, pods of no class" in classes[0]["description"]
    assert "terminationGracePeriodSeconds: 60" in classes[1]["description"]


def test_priority_classes_are_valid_kubernetes_objects():
    for manifest in priority.priority_classes(TIERS):
        assert k8s_api.problems(manifest) == []


def test_the_api_check_can_fail():
    bad = priority.priority_classes(TIERS)[0]
    bad["values"] = bad.pop("value")
    bad["metadata"]["labels"]["tier"] = 1
    found = k8s_api.problems(bad)
    assert "values: Extra inputs are not permitted" in found
    assert "metadata.labels.tier: Input should be a valid string" in found


def test_each_class_has_the_fields_the_api_requires():
    # scheduling.k8s.io/v1 PriorityClass: metadata.name and value are required.
    for manifest in priority.priority_classes(TIERS):
        assert manifest["metadata"]["name"] and isinstance(manifest["value"], int)


@pytest.mark.parametrize(
    ("tiers", "expected"),
    [
        ("training", "must be a list of tiers"),
        ([{"name": "Training", "priority": 1}], "workload_tiers[0].name must be lowercase"),
        ([{"name": "normal", "priority": 1}], "Slurm's default QOS"),
        ([{"name": "a", "priority": 1}, {"name": "a", "priority": 2}], "workload_tiers[1].name a is already"),
        ([{"name": "a", "priority": 0}], "workload_tiers[0].priority must be a whole number from 1"),
        ([{"name": "a", "priority": 2_000_000_000}], "1,000,000,000"),
        ([{"name": "a", "priority": True}], "priority must be a whole number"),
        ([{"name": "a", "priority": 1, "preempt": "yes"}], "preempt must be true or false"),
        ([{"name": "a", "priority": 1, "grace_time": -1}], "grace_time must be the seconds"),
        ([{"name": "a", "priority": 1, "qos": "x"}], "unknown keys qos"),
        ([{"name": "a", "priority": 5}, {"name": "b", "priority": 5}], "give each tier its own"),
    ],
)
def test_bad_tiers_are_refused_naming_the_variable(tiers, expected):
    found = workload_tiers(tiers)
    assert any(expected in p for p in found["problems"]), found["problems"]
    assert found["slurm_qos"] == [] and found["priority_classes"] == []


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    )
)
def test_any_input_gives_problems_or_plans_never_a_traceback(value):
    result = workload_tiers(value)
    assert all(isinstance(p, str) for p in result["problems"])
    if not result["problems"] and value:
        assert len(result["priority_classes"]) == len(value)
