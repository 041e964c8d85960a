# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two GPU nodes joined with k8s_node: what the control plane holds of them (Ready, labels from
their facts, taints, the kubelet's settings it reports), what the nodes run (containerd repaired
and up, kubelet up, packages held at the release), and what must not be there (the join file, a
second join)."""

from __future__ import annotations

import json
import tomllib

import pytest
import testinfra
import yaml
from hosts import injected_faults, name

NODES = ("k8s-h100", "k8s-a100")
RELEASE = "1.36.4-1.1"
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"


def only(host, *names):
    if name(host) not in names:
        pytest.skip(f"checked on {', '.join(names)}")


def control_plane(host):
    return testinfra.get_host("ansible://k8s-cp", ansible_inventory=host.backend.ansible_inventory)


def node_object(host):
    return json.loads(control_plane(host).check_output(f"{KUBECTL} get node {name(host)} -o json"))


def test_each_gpu_node_is_ready_with_labels_from_its_facts(host):
    only(host, *NODES)
    node = node_object(host)
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.4"
    labels = node["metadata"]["labels"]
    product = {"k8s-h100": "NVIDIA-H100-80GB-HBM3", "k8s-a100": "NVIDIA-A100-SXM4-80GB"}[name(host)]
    assert labels["gpuops.cluster/gpu.product"] == product
    assert labels["gpuops.cluster/gpu.count"] == "8"
    # The host runs the driver and the toolkit: the GPU Operator keeps its own off the node.
    assert labels["nvidia.com/gpu.deploy.driver"] == "false"
    assert labels["nvidia.com/gpu.deploy.container-toolkit"] == "false"
    # The user's label; after the side effect removed it on k8s-a100, the converge gave it back.
    assert labels["example.com/team"] == "vision"
    if name(host) == "k8s-a100":
        # MIG owned by the GPU Operator's MIG manager, which applies the layout this label names.
        assert labels["nvidia.com/mig.config"] == "a100-balanced"
        assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    else:
        assert "nvidia.com/mig.config" not in labels
        assert node["spec"]["taints"] == []


def test_the_kubelet_runs_with_the_role_s_settings(host):
    """What the kubelet reports to the control plane (configz): kubeadm's patch at the join, and on
    k8s-a100 the settings the converge put back after the side effect's hand edit."""
    only(host, *NODES)
    config = json.loads(
        control_plane(host).check_output(f"{KUBECTL} get --raw /api/v1/nodes/{name(host)}/proxy/configz")
    )["kubeletconfig"]
    assert config["cgroupDriver"] == "systemd"
    assert config["containerRuntimeEndpoint"] == "unix:///run/containerd/containerd.sock"
    assert config["serializeImagePulls"] is False
    assert config["maxParallelImagePulls"] == (8 if name(host) == "k8s-a100" else 4)
    assert config["shutdownGracePeriod"] == "120s"
    if name(host) == "k8s-a100":
        assert (config["cpuManagerPolicy"], config["reservedSystemCPUs"]) == ("static", "0-1")
    else:
        assert "cpuManagerPolicy" not in config
    # The cluster's own settings (kubeadm's kubelet-config) are kept under the patch.
    assert config["clusterDomain"] == "cluster.local"
    assert host.service("kubelet").is_running and host.service("kubelet").is_enabled


def test_each_node_joined_once_and_keeps_no_join_file(host):
    only(host, *NODES)
    joins = [json.loads(line) for line in host.file("/var/log/gpusim/kubeadm.log").content_string.splitlines()]
    # Converge, the idempotence run, and the converge after the side effect: one join.
    assert [j["joined"] for j in joins] == [name(host)]
    assert joins[0]["patches"] == ["kubeletconfiguration+merge.yaml"]
    assert not host.file("/etc/kubernetes/gpuops-join.yaml").exists
    kubeconfig = host.file("/etc/kubernetes/kubelet.conf")
    assert kubeconfig.mode == 0o600
    assert yaml.safe_load(kubeconfig.content_string)["clusters"][0]["cluster"]["server"] == "http://k8s-cp:6443"


def test_join_tokens_are_deleted_after_the_join(host):
    """Each node's token was minted (the nodes joined with it) and deleted in the join's always
    block: none is left on the control plane to let another machine join."""
    only(host, "k8s-cp")
    tokens = json.loads(host.check_output(f"{KUBECTL} get --raw /gpusim/tokens"))["tokens"]
    assert tokens == {}
    assert {
        node["metadata"]["name"] for node in json.loads(host.check_output(f"{KUBECTL} get nodes -o json"))["items"]
    } >= set(NODES)


def test_packages_are_the_release_and_held(host):
    only(host, *NODES)
    for package in ("kubelet", "kubeadm"):
        assert host.package(package).version == RELEASE
    assert host.package("cri-tools").version == "1.36.0-1.1"
    held = host.check_output("apt-mark showhold").split()
    assert {"kubelet", "kubeadm"} <= set(held)
    assert not host.package("kubectl").is_installed
    source = host.file("/etc/apt/sources.list.d/kubernetes.sources").content_string
    assert "URIs: http://gpusim-repo/core:/stable:/v1.36/deb/" in source


def containerd_release(host):
    """(major, minor) of the installed containerd: (1, 6) on Debian 12, (1, 7) on Debian 13, (2, 2) on Ubuntu."""
    major, minor = host.check_output("containerd --version").split()[2].lstrip("v").split(".")[:2]
    return int(major), int(minor)


def containerd_config_version(host):
    """2 for containerd 1.x (Debian 12's 1.6, Debian 13's 1.7), 3 for Ubuntu 24.04's 2.2."""
    return 2 if containerd_release(host)[0] < 2 else 3


def test_containerd_was_repaired_and_runs_the_nvidia_runtime(host):
    """k8s-h100 came with a version 4 drop-in that containerd 1.6 loaded and ignored, and 2.2 refused
    to start with; the role wrote the root config and the drop-in at the installed containerd's
    version, and containerd's own dump shows the nvidia runtime on systemd cgroups."""
    only(host, *NODES)
    version = containerd_config_version(host)
    dropin = host.file("/etc/containerd/conf.d/99-nvidia.toml").content_string
    assert [line for line in dropin.splitlines() if line.startswith("version")] == [f"version = {version}"]
    dump = tomllib.loads(host.check_output("containerd config dump"))
    cri = dump["plugins"]["io.containerd.grpc.v1.cri" if version == 2 else "io.containerd.cri.v1.runtime"]
    for runtime in ("runc", "nvidia"):
        assert cri["containerd"]["runtimes"][runtime]["options"]["SystemdCgroup"] is True, runtime
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # nvidia is the default runtime on Kubernetes nodes (the GPU Operator over a host toolkit).
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert host.service("containerd").is_running


def test_kubeadm_refuses_what_real_kubeadm_refuses(host):
    """The stand-in's checks can fail: an unknown field, a token of another form, no CA hash."""
    only(host, "k8s-h100")
    base = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": "k8s-cp:6443",
                "token": "abcdef.0123456789abcdef",
                "caCertHashes": ["sha256:" + "0" * 64],
            }
        },
    }
    cases = {
        "unknown field": (
            {**base, "nodeRegistration": {"kubeletExtraArg": []}},
            'strict decoding error: unknown field "nodeRegistration.kubeletExtraArg"',
        ),
        "token": (
            {**base, "discovery": {"bootstrapToken": {**base["discovery"]["bootstrapToken"], "token": "short"}}},
            "the bootstrap token is not of the form",
        ),
        "no hash": (
            {**base, "discovery": {"bootstrapToken": {**base["discovery"]["bootstrapToken"], "caCertHashes": []}}},
            "without caCertHashes can be unsafe",
        ),
    }
    for case, (config, words) in cases.items():
        host.run(f"cat > /tmp/bad-join.yaml <<'EOF'\n{yaml.safe_dump(config)}EOF")
        result = host.run("kubeadm join --config /tmp/bad-join.yaml")
        assert result.rc != 0 and words in result.stderr, (case, result.stderr)


def test_containerd_runs_the_role_s_root_config(host):
    """The root config at the installed containerd's version (2 for 1.6, 3 for 2.2), written by the role."""
    only(host, *NODES)
    version = containerd_config_version(host)
    root = host.file("/etc/containerd/config.toml").content_string
    assert "gpuops.cluster.k8s_node" in root and f"configuration version {version}, containerd" in root
    main = [line for line in root.splitlines() if line and not line.startswith("#")]
    assert main[:2] == [f"version = {version}", 'imports = ["/etc/containerd/conf.d/*.toml"]']
    if containerd_release(host) < (1, 7):
        # containerd 1.6 has no CDI: the role leaves enable_cdi out rather than write a key 1.6 ignores.
        assert "enable_cdi" not in root
    else:
        # 1.7 and 2.2 have CDI, and containerd runs with it on (the CRI plugin's table by config version).
        assert "enable_cdi = true" in root
        dump = tomllib.loads(host.check_output("containerd config dump"))
        cri = "io.containerd.grpc.v1.cri" if version == 2 else "io.containerd.cri.v1.runtime"
        assert dump["plugins"][cri]["enable_cdi"] is True


def test_device_nodes_and_char_links_come_before_containerd_and_kubelet(host):
    only(host, *NODES)
    assert host.service("gpuops-nvidia-devices").is_enabled
    assert host.run("systemctl is-active gpuops-nvidia-devices").stdout.strip() == "active"
    before = host.check_output("systemctl show -p Before --value gpuops-nvidia-devices").split()
    assert "containerd.service" in before and "kubelet.service" in before
    # The control devices and one /dev/char link per NVIDIA character device, each to its node.
    for device in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
        assert host.check_output(f"stat -c %F /dev/{device}") == "character special file", device
    for minor in range(8):
        link = host.file(f"/dev/char/195:{minor}")
        assert link.is_symlink and link.linked_to == f"/dev/nvidia{minor}"
    rule = host.file("/etc/udev/rules.d/71-nvidia-dev-char.rules").content_string
    assert 'DEVPATH=="/bus/pci/drivers/nvidia"' in rule and "create-dev-char-symlinks --create-all" in rule


def test_kernel_settings_are_written_for_the_next_boot(host):
    only(host, *NODES)
    assert host.file("/etc/modules-load.d/60-gpuops-kubernetes.conf").content_string.split("\n")[-3:-1] == [
        "overlay",
        "br_netfilter",
    ]
    assert "net.ipv4.ip_forward = 1" in host.file("/etc/sysctl.d/60-gpuops-kubernetes.conf").content_string


def test_the_rollout_cordoned_drained_and_uncordoned_the_h100_node(host):
    """The side effect's rolling driver upgrade: the node annotated with why, cordoned and drained
    (its pods listed for eviction), the driver upgraded, then uncordoned and the annotation gone;
    the A100 node was not touched by it."""
    only(host, "k8s-cp")
    events = json.loads(host.check_output(f"{KUBECTL} get --raw /gpusim/events"))["events"]
    h100 = [e for e in events if e["node"] == "k8s-h100"]
    steps = []
    for event in h100:
        patch = event.get("patch", {})
        if "evicted" in event:
            steps.append("drain")
        elif "unschedulable" in patch.get("spec", {}):
            steps.append("cordon" if patch["spec"]["unschedulable"] else "uncordon")
        else:
            steps.append(json.dumps(patch.get("metadata", {}).get("annotations"), sort_keys=True))
    reason = json.dumps({"gpuops.cluster/driver-upgrade": "gpuops driver upgrade to 580.95.05"})
    assert steps == [reason, "cordon", "drain", "uncordon", json.dumps({"gpuops.cluster/driver-upgrade": None})]
    assert not [e for e in events if e["node"] == "k8s-a100" and "annotations" in json.dumps(e)]
    node = json.loads(host.check_output(f"{KUBECTL} get node k8s-h100 -o json"))
    assert node["spec"]["unschedulable"] is False
    assert "gpuops.cluster/driver-upgrade" not in node["metadata"]["annotations"]


def test_the_h100_node_runs_the_new_driver(host):
    only(host, "k8s-h100")
    assert (
        host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()
        == ["580.95.05"] * 8
    )


def _seconds(duration):
    """A Go duration of node-problem-detector's configuration in seconds (the forms it is written in here)."""
    units = {"s": 1, "m": 60, "h": 3600}
    assert duration[-1] in units and duration[:-1].isdigit(), duration
    return int(duration[:-1]) * units[duration[-1]]


def test_node_problem_detector_s_plugin_runs_the_health_check_and_reports_a_lost_gpu(host):
    """The custom plugin monitor the role writes passes node-problem-detector's own Validate rules
    (pkg/custompluginmonitor/types/config.go: plugin "custom", no rule timeout above the global one,
    the rule's path on the node, a default for each permanent rule's condition), and its command, run
    as node-problem-detector runs it, answers OK on the healthy node and NonOK (exit 1) with the failed
    check within node-problem-detector's 80 characters once a GPU is lost; OK again when it is back.
    On the A100 node, two HCAs without link are a problem from the start.
    node-problem-detector itself does not run here (no image registry)."""
    only(host, *NODES)
    config = json.loads(
        host.file("/etc/node-problem-detector.d/custom-plugin-monitor/gpuops-health.json").content_string
    )
    assert config["plugin"] == "custom" and config["source"] == "gpuops-health"
    (rule,) = config["rules"]
    assert _seconds(rule["timeout"]) <= _seconds(config["pluginConfig"]["timeout"])
    assert _seconds(config["pluginConfig"]["invoke_interval"]) == 300
    assert host.file(rule["path"]).is_file and host.file(rule["path"]).mode & 0o111
    assert rule["type"] == "permanent" and rule["condition"] in {c["type"] for c in config["conditions"]}
    command = " ".join([rule["path"], *rule["args"]])
    limit = config["pluginConfig"]["max_output_length"]
    if name(host) == "k8s-a100":
        # The HGX A100 profile has two of its eight InfiniBand HCAs without link (mlx5_2 Initializing,
        # mlx5_6 Down): a problem from the start, named in the condition's message.
        found = host.run(command)
        assert found.rc == 1 and found.stdout.strip() == "gpuops-health: ib_ports mlx5_2:1, ib_ports mlx5_6:1"
        assert len(found.stdout.strip()) <= limit
        return
    healthy = host.run(command)
    assert (healthy.rc, healthy.stdout.strip()) == (0, "gpuops-health: ok"), healthy.stderr
    with injected_faults(host, {"lost_gpus": {"count": 1}}):
        lost = host.run(command)
    assert lost.rc == 1, lost.stdout + lost.stderr
    message = lost.stdout.strip()
    assert message.startswith("gpuops-health: gpu_count node") and len(message) <= limit
    assert host.run(command).rc == 0
