# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes GPU node's registration: its labels (from the facts, the host's components, the
MIG owner, the user) and what a kubelet refuses of them, taints, kubelet settings, and kubeadm's
JoinConfiguration from the control plane's join command, checked field by field against the
kubeadm.k8s.io/v1beta4 table the stand-in kubeadm reads strictly."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.k8s_join_config import k8s_join_config
from ansible_collections.gpuops.cluster.plugins.filter.k8s_node_plan import k8s_node_plan
from ansible_collections.gpuops.cluster.plugins.module_utils import k8s
from conftest import ROOT, load_script
from hypothesis import given, settings
from hypothesis import strategies as st

HASH = "sha256:" + "a" * 64
JOIN = f"kubeadm join k8s-cp:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash {HASH} "
H100 = {"present": True, "count": 8, "product": "NVIDIA H100 80GB HBM3", "driver_version": "580.95.05"}


def _standin():
    """The stand-in kubeadm's strict reader (tests/gpusim/repo/kube.py); yaml is all it imports
    beyond the standard library."""
    return load_script(ROOT / "tests" / "gpusim" / "repo" / "kube.py", "gpusim_kube")


def test_labels_come_from_the_facts_the_host_and_the_user_last():
    labels, reasons = k8s.node_labels(
        H100,
        {"driver": True, "container-toolkit": True, "dcgm": True, "dcgm-exporter": False},
        {"nvidia.com/mig.config": "h100-inference"},
        {"example.com/team": "vision", "gpuops.cluster/gpu.count": "8"},
    )
    assert labels == {
        "gpuops.cluster/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "gpuops.cluster/gpu.count": "8",
        "nvidia.com/gpu.deploy.driver": "false",
        "nvidia.com/gpu.deploy.container-toolkit": "false",
        "nvidia.com/gpu.deploy.dcgm": "false",
        "nvidia.com/mig.config": "h100-inference",
        "example.com/team": "vision",
    }
    assert reasons["gpuops.cluster/gpu.count"] == "k8s_node_labels"
    assert "dcgm" in reasons["nvidia.com/gpu.deploy.dcgm"]
    # Every label the role makes is one a kubelet registers with.
    assert k8s.label_problems(labels) == []


@pytest.mark.parametrize(
    ("labels", "words"),
    [
        ({"node-role.kubernetes.io/gpu": ""}, "may not set on itself"),
        ({"kubernetes.io/role": "gpu"}, "may not set on itself"),
        ({"foo.k8s.io/x": "1"}, "may not set on itself"),
        ({"example.com/a b": "x"}, "label key 'example.com/a b'"),
        ({"Example.com/a": "x"}, "label key"),
        ({"example.com/a": "-x"}, "the value '-x'"),
        ({"example.com/a": "x" * 64}, "which Kubernetes refuses"),
    ],
)
def test_labels_a_kubelet_refuses_are_named(labels, words):
    problems = k8s.label_problems(labels)
    assert len(problems) == 1 and words in problems[0]["message"], problems
    assert problems[0]["variable"] == "k8s_node_labels"


@pytest.mark.parametrize(
    "labels",
    [
        {"node.kubernetes.io/instance-type": "dgx-h100"},
        {"topology.kubernetes.io/zone": "hall-a"},
        {"gpu.kubelet.kubernetes.io/x": "1"},
        {"example.com/empty": ""},
    ],
)
def test_labels_a_kubelet_may_set_pass(labels):
    assert k8s.label_problems(labels) == []


def test_taints_need_a_known_effect_and_a_valid_key():
    assert k8s.taint_problems([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]) == []
    problems = k8s.taint_problems([{"key": "nvidia.com/gpu", "effect": "NoRun"}, {"key": "a b", "effect": "NoExecute"}])
    assert [p["message"] for p in problems] == [
        "k8s_node_taints[0] has the effect 'NoRun'",
        "k8s_node_taints[1]: k8s_node_taints has the label key 'a b', which Kubernetes refuses",
    ]
    assert "is 'gpu'" in k8s.taint_problems(["gpu"])[0]["message"]


def test_kubelet_settings_and_their_refusals():
    patch, reasons, problems = k8s.kubelet_settings()
    assert patch == {
        "cgroupDriver": "systemd",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "serializeImagePulls": False,
        "maxParallelImagePulls": 4,
        "shutdownGracePeriod": "120s",
        "shutdownGracePeriodCriticalPods": "30s",
    }
    assert problems == [] and set(reasons) == set(patch)
    patch, _reasons, problems = k8s.kubelet_settings(
        max_parallel_image_pulls="1", cpu_manager_policy="static", topology_manager_policy="single-numa-node"
    )
    assert patch["serializeImagePulls"] is True and "maxParallelImagePulls" not in patch
    assert patch["topologyManagerPolicy"] == "single-numa-node"
    assert [p["variable"] for p in problems] == ["k8s_node_reserved_system_cpus"]
    _patch, _reasons, problems = k8s.kubelet_settings(cpu_manager_policy="dynamic", topology_manager_policy="numa")
    assert [p["variable"] for p in problems] == ["k8s_node_cpu_manager_policy", "k8s_node_topology_manager_policy"]


def test_the_node_plan_gathers_every_problem_with_its_sentence():
    plan = k8s_node_plan(
        H100,
        {"driver": True},
        labels={"node-role.kubernetes.io/worker": ""},
        taints=[{"key": "x", "effect": "Never"}],
        kubelet={"cpu_manager_policy": "static"},
    )
    assert [p["variable"] for p in plan["problems"]] == [
        "k8s_node_labels",
        "k8s_node_taints",
        "k8s_node_reserved_system_cpus",
    ]
    assert all(p["text"].endswith(".") and ": " in p["text"] for p in plan["problems"])


def test_the_join_command_is_read_and_never_echoed():
    assert k8s.parse_join_command(JOIN) == {
        "endpoint": "k8s-cp:6443",
        "token": "abcdef.0123456789abcdef",
        "ca_cert_hashes": [HASH],
    }
    for text in ("", "error: the server has asked for the client to provide credentials", "kubeadm join"):
        with pytest.raises(ValueError, match="not 'kubeadm join'"):
            k8s.parse_join_command(text)
    with pytest.raises(ValueError, match="form") as caught:
        k8s.parse_join_command(JOIN.replace("abcdef.0123456789abcdef", "ABCDEF.0123456789abcdef"))
    assert "0123456789abcdef" not in str(caught.value)
    with pytest.raises(ValueError, match="not pinned"):
        k8s.parse_join_command("kubeadm join k8s-cp:6443 --token abcdef.0123456789abcdef")


def test_the_join_configuration_passes_the_strict_v1beta4_reading():
    config = k8s_join_config(
        JOIN,
        node_name="gpu-01",
        labels={"b.example.com/x": "1", "a.example.com/y": "2"},
        taints=[{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}],
        patches_dir="/etc/kubernetes/gpuops-patches",
    )
    assert config["apiVersion"] == "kubeadm.k8s.io/v1beta4" and config["kind"] == "JoinConfiguration"
    registration = config["nodeRegistration"]
    assert registration["kubeletExtraArgs"] == [{"name": "node-labels", "value": "a.example.com/y=2,b.example.com/x=1"}]
    assert registration["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert config["discovery"]["bootstrapToken"]["caCertHashes"] == [HASH]
    standin = _standin()
    errors = []
    standin.strict(config, standin.JOIN_FIELDS, "", errors)
    assert errors == []
    # The reading can fail: v1beta3's map of kubelet flags is no list of {name, value} in v1beta4.
    old = dict(config, nodeRegistration=dict(registration, kubeletExtraArgs={"node-labels": "a=b"}))
    standin.strict(old, standin.JOIN_FIELDS, "", errors)
    assert errors and "nodeRegistration.kubeletExtraArgs" in errors[0]
    with pytest.raises(AnsibleFilterError, match="not 'kubeadm join'"):
        k8s_join_config("", node_name="x", labels={}, taints=[], patches_dir="/p")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_the_join_command_reader_never_raises_anything_but_its_error(text):
    try:
        k8s.parse_join_command(text)
    except ValueError as exc:
        assert "kubeadm" in str(exc)


def test_hostile_join_commands_and_labels_are_refused():
    # bench/facts.py prints their times ("hostile input"); here, that each gets its answer.
    with pytest.raises(ValueError, match="form"):
        k8s.parse_join_command("kubeadm join x " + "--token " * 200_000)
    assert k8s.label_problems({"a" * 100_000: "b" * 100_000})[0]["variable"] == "k8s_node_labels"
