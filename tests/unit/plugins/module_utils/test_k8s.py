# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes decisions: supported minors, containerd's configuration version, and the GPU
Operator's values over the host stack, checked against the chart's own values.yaml at each pinned
version (shared/facts/data) and the manifests against the Kubernetes API types."""

from __future__ import annotations

import json

import k8s_api
import pytest
import yaml
from ansible_collections.gpuops.cluster.plugins.filter.mig_kubernetes import mig_kubernetes
from ansible_collections.gpuops.cluster.plugins.module_utils import k8s
from conftest import FIXTURES

H100 = "0x2330"


def chart_values(chart):
    return yaml.safe_load((FIXTURES / "upstream" / f"gpu-operator-{chart}-values.yaml").read_text())


def _facts(count):
    gpu = {"name": "NVIDIA H100 80GB HBM3", "pci_device_id": H100, "mig_mode": "disabled"}
    return {"gpus": [dict(gpu, index=i) for i in range(count)]}


def _mig(owner="host", layout=None):
    layout = layout or {"name": "h100-inference", "gpus": [{"devices": "all", "profiles": {"1g.10gb": 7}}]}
    return mig_kubernetes(
        [
            {"name": "gpu01", "mig_layout": layout, "mig_owner": owner, "nvidia_gpu": _facts(8)},
            {"name": "gpu02", "mig_layout": {}, "mig_owner": "host", "nvidia_gpu": _facts(8)},
        ]
    )


@pytest.mark.parametrize(
    ("version", "severity", "text"),
    [
        ("1.36.4", None, None),
        ("1.35.6", None, None),
        ("1.37.2", "warning", "not yet on the GPU Operator's list"),
        ("1.34.9", "error", "end of life on 2026-10-27"),
        ("1.38.0", "error", "not in the collection's table"),
        ("1.36", "error", "not an exact Kubernetes release"),
    ],
)
def test_kubernetes_versions_against_the_table(version, severity, text):
    found = k8s.version_problems(version, today="2026-11-25")
    if severity is None:
        assert found == []
    else:
        (problem,) = found
        assert problem["severity"] == severity and text in problem["message"]
        assert problem["variable"] == "k8s_node_kubernetes_version" and problem["fix"]


@pytest.mark.parametrize(
    ("version", "config"),
    [("1.6.20~ds1-1+b1", 2), ("1.7.30", 2), ("2.0.5", 3), ("v2.2.1", 3), ("2.3.1", 4), ("2.4.0", 4)],
)
def test_containerd_config_version_follows_the_installed_containerd(version, config):
    assert k8s.containerd_config_version(version)[0] == config


def test_an_unreadable_containerd_version_is_named():
    with pytest.raises(ValueError, match="cannot read a containerd version from 'containerd'"):
        k8s.containerd_config_version("containerd")


@pytest.mark.parametrize("chart", list(k8s.CHARTS))
@pytest.mark.parametrize("owner", ["host", "operator"])
@pytest.mark.parametrize("exporter", [True, False])
def test_values_exist_in_the_chart_at_its_pinned_version(chart, owner, exporter):
    values, reasons = k8s.gpu_operator_values(
        chart, mig=_mig(owner), nfd_present=False, host_dcgm_exporter=exporter, kubernetes_version="1.36.4"
    )
    assert k8s.value_problems(values, chart_values(chart)) == []
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
    assert values["cdi"]["enabled"] is True
    # One MIG owner: the operator's MIG manager only where a node gives MIG to it.
    assert values["migManager"]["enabled"] is (owner == "operator")
    assert all(reason for reason in reasons.values())


def test_the_operator_s_mig_configmap_holds_the_layouts_it_owns():
    values, _reasons = k8s.gpu_operator_values(
        "v26.7.0", mig=_mig("operator"), nfd_present=True, host_dcgm_exporter=True, kubernetes_version="1.36.4"
    )
    config = json.loads(values["migManager"]["config"]["data"]["config.yaml"])
    assert config["mig-configs"]["h100-inference"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    ]
    assert values["nfd"]["enabled"] is False
    assert values["mig"]["strategy"] == "single"


def test_a_mixed_node_makes_the_operator_mixed():
    layout = {"name": "h100-mixed", "gpus": [{"devices": [0], "profiles": {"3g.40gb": 2}}]}
    values, reasons = k8s.gpu_operator_values(
        "v26.3.3", mig=_mig("host", layout), nfd_present=False, host_dcgm_exporter=True, kubernetes_version="1.36.4"
    )
    assert values["mig"]["strategy"] == "mixed"
    assert reasons["mig.strategy"].startswith("gpu01: MIG profiles 3g.40gb and 7 GPU(s) without MIG")


def test_the_value_check_can_fail():
    found = k8s.value_problems({"driver": {"enable": False, "enabled": "no"}}, chart_values("v26.7.0"))
    assert found == ["driver.enable is no value of the chart", "driver.enabled is str here and bool in the chart"]


def test_dra_needs_the_newer_chart_and_kubernetes():
    values, _reasons = k8s.gpu_operator_values(
        "v26.7.0", mig=_mig(), nfd_present=False, host_dcgm_exporter=True, kubernetes_version="1.36.4", dra=True
    )
    assert values["gpuCluster"]["deployCR"] is True and values["clusterPolicy"]["deployCR"] is False
    assert k8s.value_problems(values, chart_values("v26.7.0")) == []
    with pytest.raises(ValueError, match=r"chart v26\.3\.3 has no DRA driver"):
        k8s.gpu_operator_values(
            "v26.3.3", mig=_mig(), nfd_present=False, host_dcgm_exporter=True, kubernetes_version="1.36.4", dra=True
        )
    with pytest.raises(ValueError, match=r"DRA needs Kubernetes 1\.34\.2 or later"):
        k8s.gpu_operator_values(
            "v26.7.0", mig=_mig(), nfd_present=False, host_dcgm_exporter=True, kubernetes_version="1.34.1", dra=True
        )


def test_platform_manifests_are_valid_kubernetes_objects():
    manifests = k8s.platform_manifests()
    assert [m["kind"] for m in manifests] == ["Namespace", "RuntimeClass"]
    for manifest in manifests:
        assert k8s_api.problems(manifest) == []
    assert manifests[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert manifests[1]["handler"] == "nvidia"


DEBIAN_12 = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
DOCKER_2_3 = "containerd containerd.io v2.3.1 5a0b7a3e1e9"


def test_containerd_plan_of_debian_12():
    plan = k8s.containerd_plan(DEBIAN_12, 'version = 2\nimports = []\n[plugins."io.containerd.grpc.v1.cri"]\n')
    assert (plan["version"], plan["root_version"], plan["dropin_version"]) == (2, 2, 2)
    assert plan["cri_plugin"] == "io.containerd.grpc.v1.cri"
    # enable_cdi came with containerd 1.7: Debian 12's 1.6 has no CDI.
    assert plan["cdi"] is False and plan["problems"] == []


def test_a_drop_in_takes_the_root_config_s_version():
    # containerd 2.3 writes version 4; a root config still at version 2 takes a version 2 drop-in
    # (containerd refuses a drop-in of a higher version than its root: NVIDIA/aicr#1688).
    plan = k8s.containerd_plan(DOCKER_2_3, "version = 2\n")
    assert (plan["version"], plan["dropin_version"], plan["cri_plugin"]) == (4, 2, "io.containerd.grpc.v1.cri")
    fresh = k8s.containerd_plan(DOCKER_2_3, None)
    assert (fresh["dropin_version"], fresh["cri_plugin"], fresh["cdi"]) == (4, "io.containerd.cri.v1.runtime", True)


@pytest.mark.parametrize(
    ("root", "text"),
    [
        ("imports = []\n", "has no version line"),
        ("version = 3\n", "is configuration version 3, which the installed containerd cannot read"),
        ("version = 7\n", "is configuration version 7"),
    ],
)
def test_a_root_config_containerd_cannot_use_is_named_not_overwritten(root, text):
    (problem,) = k8s.containerd_plan(DEBIAN_12, root)["problems"]
    assert text in problem and "/etc/containerd/config.toml" in problem
    assert "version = 2" in problem or "for version 2" in problem


def _tomllib():
    import tomllib  # noqa: PLC0415 (Python 3.11 and later, as the controller)

    return tomllib


def test_the_nvidia_drop_in_carries_debian_s_cri_table_along():
    root = (FIXTURES / "containerd" / "debian12-config.toml").read_text()
    plan = k8s.containerd_plan(DEBIAN_12, root)
    text, systemd = k8s.nvidia_dropin(root, plan)
    dropin = _tomllib().loads(text)
    assert dropin["version"] == 2 and systemd is False
    cri = dropin["plugins"]["io.containerd.grpc.v1.cri"]
    # containerd 1.6 replaces the root's CRI table by this one: Debian's CNI folders must be in it.
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": False}
    assert "default_runtime_name" not in cri["containerd"]


def test_the_nvidia_runtime_takes_runc_s_cgroup_driver_and_can_be_the_default():
    root = (
        'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = true\n'
        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n'
    )
    plan = k8s.containerd_plan("containerd containerd.io 2.2.1 abc", root)
    text, systemd = k8s.nvidia_dropin(root, plan, default_runtime=True)
    cri = _tomllib().loads(text)["plugins"]["io.containerd.cri.v1.runtime"]
    assert systemd is True and cri["enable_cdi"] is True
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
    assert text.startswith("version = 3\n")


@pytest.mark.parametrize(
    ("root", "words"),
    [
        ("version = 2\n[plugins\n", "no valid TOML"),
        ('version = 2\n[[plugins."io.containerd.grpc.v1.cri".x]]\n  a = 1\n', "does not write back"),
    ],
)
def test_a_root_config_the_drop_in_cannot_carry_is_named(root, words):
    with pytest.raises(ValueError, match=words):
        k8s.nvidia_dropin(root, k8s.containerd_plan(DEBIAN_12, "version = 2\n"))


def test_the_root_version_is_the_top_level_key_not_a_line_in_a_table():
    """Edit of Debian's config: no top-level version, but a 'version = 2' line inside a table
    (a plugin's own setting). containerd reads the file as version 1: the line is not the root's."""
    root = 'imports = []\n[plugins."io.containerd.grpc.v1.cri"]\nversion = 2\n'
    (problem,) = k8s.containerd_plan(DEBIAN_12, root)["problems"]
    assert "has no version line" in problem
    assert "no valid TOML" in k8s.containerd_plan(DEBIAN_12, "version = 2\n[plugins\n")["problems"][0]
    assert "not a whole number" in k8s.containerd_plan(DEBIAN_12, 'version = "2"\n')["problems"][0]


def test_a_character_outside_the_bmp_in_the_cri_table_is_written_as_valid_toml():
    root = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.local/p\U0001f600use:3.9"\n'
        '  x_del = "a\\u007Fb\\u0001c \\"q\\" \\\\ d"\n'
    )
    plan = k8s.containerd_plan(DEBIAN_12, root)
    text, _systemd = k8s.nvidia_dropin(root, plan)
    cri = _tomllib().loads(text)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry.local/p\U0001f600use:3.9"
    assert cri["x_del"] == 'a\x7fb\x01c "q" \\ d'


@pytest.mark.parametrize(
    ("ttl", "words"),
    [
        ("15m", None),
        ("1h", None),
        ("900s", None),
        ("0", "never expires"),
        ("0s", "never expires"),
        ("24h", "longer than an hour"),
        ("1h1s", "longer than an hour"),
        ("soon", "not a duration kubeadm reads"),
        ("", "not a duration kubeadm reads"),
    ],
)
def test_a_join_token_lives_an_hour_at_most_and_never_forever(ttl, words):
    problems = k8s.token_ttl_problems(ttl)
    if words is None:
        assert problems == []
    else:
        (problem,) = problems
        assert (
            problem["severity"] == "error"
            and words in problem["message"]
            and "k8s_node_token_ttl" in problem["message"]
        )


def test_labels_or_taints_of_the_wrong_type_are_named_not_a_traceback():
    plan = k8s.node_plan({}, host_components={}, mig_labels={}, labels=True, taints="NoSchedule", kubelet={})
    assert [p["variable"] for p in plan["problems"]] == ["k8s_node_labels", "k8s_node_taints"]
    assert "k8s_node_labels is True, not a mapping" in plan["problems"][0]["text"]


UBUNTU_2404 = "containerd github.com/containerd/containerd/v2 2.2.1"
GLOB = "/etc/containerd/conf.d/*.toml"


def test_containerd_2_2_s_default_config_is_read_as_it_is_written():
    """Ubuntu 24.04's containerd 2.2.1 ships no root config; `containerd config default`, what an
    operator writes there, is version 3 and already imports the drop-in folder, in TOML's literal
    (single-quoted) strings."""
    root = (FIXTURES / "containerd" / "ubuntu2404-config-default.toml").read_text()
    plan = k8s.containerd_plan(UBUNTU_2404, root, dropin_glob=GLOB)
    assert (plan["version"], plan["root_version"], plan["dropin_version"]) == (3, 3, 3)
    assert plan["cri_plugin"] == "io.containerd.cri.v1.runtime"
    assert plan["problems"] == []
    assert plan["imports"] == [GLOB]
    assert plan["imports_line"] == f'imports = ["{GLOB}"]'
    text, systemd = k8s.nvidia_dropin(root, plan)
    cri = _tomllib().loads(text)["plugins"]["io.containerd.cri.v1.runtime"]
    assert text.startswith("version = 3\n") and systemd is False
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # runc's table of the default is carried along unchanged.
    root_cri = _tomllib().loads(root)["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["containerd"]["runtimes"]["runc"] == root_cri["containerd"]["runtimes"]["runc"]


@pytest.mark.parametrize(
    ("imports", "line"),
    [
        # A literal string of the user's is kept (it was dropped when only "..." strings were read).
        ("imports = ['/etc/site.toml']", f'imports = ["/etc/site.toml", "{GLOB}"]'),
        (f'imports = ["{GLOB}", "/etc/b.toml"]  # ours', f'imports = ["{GLOB}", "/etc/b.toml"]'),
        ("imports = ['/etc/conf.d/[0-9]*.toml']", f'imports = ["/etc/conf.d/[0-9]*.toml", "{GLOB}"]'),
        ("imports = []", f'imports = ["{GLOB}"]'),
        ("", f'imports = ["{GLOB}"]'),
    ],
)
def test_the_imports_line_keeps_the_root_s_imports_and_adds_the_drop_ins(imports, line):
    plan = k8s.containerd_plan(UBUNTU_2404, f"version = 3\n{imports}\n[plugins]\n", dropin_glob=GLOB)
    assert plan["problems"] == []
    assert plan["imports_line"] == line
    assert _tomllib().loads(line)["imports"][-1] in (GLOB, "/etc/b.toml")


@pytest.mark.parametrize(
    ("imports", "words"),
    [
        (f'imports = [\n  "/etc/a.toml",\n  "{GLOB}",\n]', "over several lines. Put it on one line"),
        ('imports = "/etc/a.toml"', "not a list of paths"),
    ],
)
def test_an_imports_list_the_role_cannot_edit_is_a_problem(imports, words):
    (problem,) = k8s.containerd_plan(UBUNTU_2404, f"version = 3\n{imports}\n", dropin_glob=GLOB)["problems"]
    assert words in problem and "/etc/containerd/config.toml" in problem


def test_without_a_root_config_the_imports_line_is_the_drop_ins_alone():
    assert k8s.containerd_plan(UBUNTU_2404, None, dropin_glob=GLOB)["imports_line"] == f'imports = ["{GLOB}"]'
