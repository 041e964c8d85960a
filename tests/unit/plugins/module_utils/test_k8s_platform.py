# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control side (playbooks/k8s_gpu_platform.yml): the charts' values from the nodes' facts and
layouts, checked against each chart's values.yaml (shared/facts/data, SOURCES.md); the manifests
against the Kubernetes API types; the gates' sentences; and the play's own expressions, templated
as Ansible would with a cluster's nodes."""

from __future__ import annotations

import k8s_api
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.gpuops.cluster.plugins.filter.k8s_platform import k8s_platform
from ansible_collections.gpuops.cluster.plugins.filter.workload_tiers import workload_tiers
from ansible_collections.gpuops.cluster.plugins.module_utils import k8s
from conftest import FIXTURES, ROOT, trusted

H100, A100 = "0x2330", "0x20B2"
TIERS = [{"name": "training", "priority": 1000, "preempt": True}, {"name": "inference", "priority": 100}]


def _facts(device, count=8):
    gpu = {"name": "GPU", "pci_device_id": device, "mig_mode": "disabled"}
    return {"count": count, "gpus": [dict(gpu, index=i) for i in range(count)]}


def _nodes(owner="operator", exporter=True):
    return [
        {
            "name": "gpu-h100",
            "nvidia_gpu": _facts(H100),
            "mig_layout": {"name": "h100-inference", "gpus": [{"devices": [0, 1], "profiles": {"1g.10gb": 7}}]},
            "mig_owner": owner,
            "dcgm_exporter": exporter,
        },
        {"name": "gpu-a100", "nvidia_gpu": _facts(A100), "mig_layout": {}, "mig_owner": "host", "dcgm_exporter": True},
    ]


def _values(name):
    return yaml.safe_load((FIXTURES / "upstream" / name).read_text())


@pytest.mark.parametrize("chart", ["v26.3.3", "v26.7.0"])
def test_operator_values_exist_in_the_pinned_chart_and_the_manifests_are_valid(chart):
    found = k8s_platform(_nodes(), chart=chart, tiers=workload_tiers(TIERS)["priority_classes"])
    assert k8s.value_problems(found["values"], _values(f"gpu-operator-{chart}-values.yaml")) == []
    values = found["values"]
    assert (values["driver"]["enabled"], values["toolkit"]["enabled"], values["dcgm"]["enabled"]) == (False,) * 3
    # Two GPUs of the H100 in slices, six whole: the cluster needs the mixed strategy.
    assert values["mig"]["strategy"] == "mixed" and values["migManager"]["enabled"] is True
    assert found["expected"] == {
        "gpu-h100": {"nvidia.com/mig-1g.10gb": 14, "nvidia.com/gpu": 6},
        "gpu-a100": {"nvidia.com/gpu": 8},
    }
    kinds = [m["kind"] for m in found["manifests"]]
    assert kinds == ["Namespace", "RuntimeClass", "PriorityClass", "PriorityClass"]
    for manifest in found["manifests"]:
        assert k8s_api.problems(manifest) == [], manifest
    assert set(found["reasons"]) >= {"driver.enabled", "mig.strategy", "nfd.enabled"}


def test_the_light_variant_s_values_exist_in_the_device_plugin_chart():
    found = k8s_platform(_nodes(owner="host"), variant="light", nfd_present=True)
    values = found["values"]
    assert values == {
        "migStrategy": "mixed",
        "nvidiaDriverRoot": "/",
        "runtimeClassName": "nvidia",
        "gfd": {"enabled": True},
        "nfd": {"enabled": False},
    }
    chart = _values("nvidia-device-plugin-values.yaml")
    # nfd.enabled is the NFD dependency's condition in the chart's Chart.yaml, not a key of values.yaml.
    problems = k8s.value_problems(values, chart)
    assert problems == ["nfd.enabled is no value of the chart"]
    assert found["manifests"][1]["metadata"]["name"] == values["runtimeClassName"]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"variant": "light"}, "gpu-h100 has mig_owner: operator, but the light variant runs no GPU Operator"),
        ({"variant": "helm"}, "k8s_platform_variant is 'helm'"),
        ({"dra": True, "chart": "v26.3.3", "kubernetes_version": "v1.36.4"}, "has no DRA driver"),
        ({"dra": True, "kubernetes_version": "v1.34.1"}, "DRA needs Kubernetes 1.34.2 or later"),
    ],
)
def test_what_the_platform_cannot_serve_is_refused_by_name(kwargs, words):
    with pytest.raises(AnsibleFilterError, match=words):
        k8s_platform(_nodes(), **kwargs)


def test_dra_replaces_the_cluster_policy():
    values = k8s_platform(_nodes(), dra=True, kubernetes_version="v1.36.4")["values"]
    assert values["clusterPolicy"]["deployCR"] is False and values["gpuCluster"]["deployCR"] is True


def test_nfd_of_another_release_counts_the_operator_s_own_does_not():
    daemonsets = [
        {"metadata": {"name": "gpu-operator-node-feature-discovery-worker", "namespace": "gpu-operator"}},
        {"metadata": {"name": "nfd-worker", "namespace": "nfd", "labels": {"app.kubernetes.io/name": k8s.NFD_NAME}}},
        {"metadata": {"name": "kube-proxy", "namespace": "kube-system"}},
    ]
    assert k8s.foreign_nfd(daemonsets, "gpu-operator") == ["nfd/nfd-worker"]
    assert k8s.foreign_nfd(daemonsets[:1], "gpu-operator") == []


def test_the_allocatable_gate_names_the_node_the_resource_and_both_counts():
    expected = {"gpu-h100": {"nvidia.com/gpu": 6, "nvidia.com/mig-1g.10gb": 14}, "gpu-b": {"nvidia.com/gpu": 8}}
    nodes = [
        {"metadata": {"name": "gpu-h100"}, "status": {"allocatable": {"nvidia.com/gpu": "6", "cpu": "224"}}},
        {"metadata": {"name": "cpu-01"}, "status": {"allocatable": {"cpu": "64"}}},
    ]
    assert k8s.allocatable_problems(nodes, expected) == [
        "gpu-b is no node of the cluster: run the k8s_node role on it first",
        "gpu-h100 shows nvidia.com/mig-1g.10gb: none, its facts and layout say 14: check the device plugin's pod on "
        "it and its log (a GPU lost, a MIG layout not applied)",
    ]
    nodes[0]["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "14"
    nodes.append({"metadata": {"name": "gpu-b"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert k8s.allocatable_problems(nodes, expected) == []


def test_the_play_s_expressions_work_out_the_platform_and_the_gate():
    """The play's set_fact and gate, templated with a cluster's answers: the filters, their
    arguments and the NFD selection as the play writes them."""
    plays = yaml.safe_load((ROOT / "playbooks" / "k8s_gpu_platform.yml").read_text())
    control = plays[1]
    tasks = {t["name"]: t for t in control["tasks"]}
    work = tasks["Work out the values, manifests and expected GPUs, with their reasons"]
    variables = {}
    for name in control["vars_files"]:
        variables.update(yaml.safe_load((ROOT / "playbooks" / name).read_text()))
    variables.update(control["vars"])
    variables.update(work["vars"])
    variables.update(
        groups={"k8s_nodes": ["h100", "a100"]},
        hostvars={"h100": {"__platform_node": _nodes()[0]}, "a100": {"__platform_node": _nodes()[1]}},
        workload_tiers=TIERS,
        __platform_cluster={"version": {"server": {"kubernetes": {"gitVersion": "v1.36.4"}}}},
        __platform_daemonsets={
            "resources": [
                {"metadata": {"name": "node-feature-discovery-worker", "namespace": "gpu-operator"}},
                {"metadata": {"name": "node-feature-discovery-worker", "namespace": "nfd"}},
            ]
        },
    )
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    platform = templar.template(trusted(work["ansible.builtin.set_fact"]["__platform"]))
    assert platform["values"]["nfd"]["enabled"] is False  # NFD of the nfd namespace runs
    assert [m["metadata"]["name"] for m in platform["manifests"]][2:] == ["training", "inference"]
    # The bundle's registry values (mirrors.yml) go over the derived ones, the rest of each map kept.
    install = tasks["Install the chart at its pinned version with the derived values"]["kubernetes.core.helm"]
    variables.update(
        __platform=platform,
        k8s_platform_image_values={"devicePlugin": {"repository": "registry.site/nvcr.io/nvidia"}},
    )
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    assert templar.template(trusted(install["chart_ref"])) == "nvidia/gpu-operator"
    assert templar.template(trusted(install["chart_version"])) == "v26.7.0"
    installed = templar.template(trusted(install["values"]))
    assert installed["devicePlugin"]["repository"] == "registry.site/nvcr.io/nvidia"
    assert installed["migManager"] == platform["values"]["migManager"]
    gate = next(t for t in tasks["Check each node's allocatable GPUs or MIG slices against its facts"]["block"])
    nodes = [
        {"metadata": {"name": "gpu-h100"}, "status": {"allocatable": {"nvidia.com/gpu": "6"}}},
        {"metadata": {"name": "gpu-a100"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}},
    ]
    variables.update(__platform=platform, __platform_cluster_nodes={"resources": nodes})
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    assert templar.template(trusted("{{ " + gate["until"] + " }}")) is False
    nodes[0]["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "14"
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    assert templar.template(trusted("{{ " + gate["until"] + " }}")) is True
