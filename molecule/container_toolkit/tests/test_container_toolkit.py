# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container toolkit: one pinned set, the nvidia runtime in Docker (users' keys kept), containerd and
CRI-O, and the CDI specification of the GPUs the driver reports."""

from __future__ import annotations

import json
import re
import tomllib

import pytest
import yaml
from hosts import name

PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)
VERSION = {"ctk-docker": "1.18.0-1", "ctk-containerd": "1.18.0-1", "ctk-nodriver": "1.17.8-1"}
GPUS = {"ctk-docker": 4, "ctk-containerd": 8}


def only(host, *names):
    if name(host) not in names:
        pytest.skip(f"checked on {', '.join(names)}")


def test_the_four_packages_are_one_version_and_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    for package in PACKAGES:
        assert host.package(package).version == VERSION[name(host)]
        assert package in held
    assert not host.package("nvidia-docker2").is_installed


def test_the_repository_is_signed_by_its_own_keyring(host):
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources").content_string
    assert "URIs: http://gpusim-repo/libnvidia-container/stable/deb/amd64/" in source
    # The key comes from the mirror's gpgkey, ASCII armour as NVIDIA publishes it: key URL unset.
    assert "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc" in source


def test_docker_keeps_users_keys_and_runs_the_nvidia_runtime_by_default(host):
    only(host, "ctk-docker")
    conf = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert conf["iptables"] is False
    assert conf["bridge"] == "none"
    assert conf["storage-driver"] == "vfs"
    assert conf["log-driver"] == "journald"
    assert conf["live-restore"] is True
    assert conf["runtimes"] == {
        "crun": {"path": "/usr/bin/crun"},
        "nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []},
    }
    assert conf["default-runtime"] == "nvidia"
    assert conf["default-shm-size"] == "1G"
    assert conf["default-ulimits"] == {
        "nofile": {"Name": "nofile", "Soft": 65536, "Hard": 65536},
        "memlock": {"Name": "memlock", "Soft": -1, "Hard": -1},
        "stack": {"Name": "stack", "Soft": 67108864, "Hard": 67108864},
    }
    # The running daemon read it: Docker was restarted after the change.
    assert host.service("docker").is_running
    info = json.loads(host.check_output("docker info --format '{{json .}}'"))
    assert info["DefaultRuntime"] == "nvidia"
    assert info["Runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert "crun" in info["Runtimes"]
    assert info["LoggingDriver"] == "journald"


def containerd_major(host):
    return int(host.check_output("containerd --version").split()[2].split(".")[0])


def cri_table(config):
    """The CRI runtimes' plugin table of a parsed containerd configuration: version 2 has them in
    the CRI plugin, version 3 in its own (the CRI plugin of 2.x has other settings)."""
    name = "io.containerd.grpc.v1.cri" if config.get("version", 1) < 3 else "io.containerd.cri.v1.runtime"
    return config.get("plugins", {}).get(name, {})


def test_containerd_imports_the_drop_in_and_keeps_its_settings(host):
    only(host, "ctk-containerd", "ctk-nodriver")
    # Debian's containerd 1.6 reads configuration version 2; Ubuntu's 2.2 version 3.
    version = 2 if containerd_major(host) < 2 else 3
    text = host.file("/etc/containerd/config.toml").content_string
    main = [line for line in text.splitlines() if line[:1] != "#"]
    imports = 'imports = ["/etc/containerd/conf.d/*.toml"]'
    if version == 2 or name(host) == "ctk-nodriver":
        # Debian's own file with the imports line after its version line; on Ubuntu, which ships
        # none, the role's own two lines.
        assert main[:2] == [f"version = {version}", imports]
    else:
        # containerd config default's file: its literal-string imports line rewritten in place.
        assert main[0] == "version = 3" and imports in main
        assert tomllib.loads(text)["plugins"]["io.containerd.cri.v1.runtime"]["cni"]["bin_dirs"] == ["/opt/cni/bin"]
    if version == 2 and name(host) == "ctk-nodriver":
        # Debian's own settings are still there.
        assert '      bin_dir = "/usr/lib/cni"' in main
    dropin = host.file("/etc/containerd/conf.d/99-nvidia.toml")
    assert dropin.mode == 0o644
    # On ctk-containerd prepare left a version 4 drop-in, which containerd 1.6 loaded and ignored
    # and 2.2 refused to start with; the role wrote it again at the root's version.
    written = tomllib.loads(dropin.content_string)
    assert written["version"] == version
    nvidia = cri_table(written)["containerd"]["runtimes"]["nvidia"]
    # runc's cgroup driver, the distributions' default (cgroupfs), is the nvidia runtime's too.
    assert nvidia["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": False}
    # What the running containerd reads: the drop-in imported, the runtime in its CRI table.
    dump = tomllib.loads(host.check_output("containerd config dump"))
    assert dump["version"] == version
    assert {"/etc/containerd/conf.d/99-nvidia.toml", "/etc/containerd/conf.d/*.toml"} & set(dump["imports"])
    cri = cri_table(dump)
    if version == 2 and name(host) == "ctk-nodriver":
        # containerd 1.6 replaces the root's CRI table by the drop-in's: the drop-in carries Debian's
        # settings along, so containerd still runs with them.
        assert cri["cni"]["bin_dir"] == "/usr/lib/cni"
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    default = cri["containerd"].get("default_runtime_name") == "nvidia"
    assert default is (name(host) == "ctk-nodriver")
    assert host.service("containerd").is_running


def test_kubernetes_runtimeclass_names_a_handler_the_node_runs(host):
    """The kubelet passes a RuntimeClass's handler to the CRI runtime as a runtime name: the
    manifest must be a valid RuntimeClass whose handler the node's containerd or CRI-O has."""
    only(host, "ctk-containerd", "ctk-nodriver")
    manifest = yaml.safe_load(host.file("/etc/gpuops/kubernetes/runtimeclass-nvidia.yaml").content_string)
    assert (manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"]) == (
        "node.k8s.io/v1",
        "RuntimeClass",
        "nvidia",
    )
    handler = manifest["handler"]
    # The API server validates the handler as a DNS label.
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", handler)
    runtimes = []
    if host.exists("containerd"):
        dump = tomllib.loads(host.check_output("containerd config dump"))
        runtimes += list(cri_table(dump)["containerd"]["runtimes"])
    crio = host.file("/etc/crio/crio.conf.d/99-nvidia.conf")
    if crio.exists:
        runtimes += re.findall(r"^\[crio\.runtime\.runtimes\.([A-Za-z0-9_-]+)\]", crio.content_string, re.M)
    assert handler in runtimes, runtimes


def test_crio_drop_in_when_asked_for(host):
    dropin = host.file("/etc/crio/crio.conf.d/99-nvidia.conf")
    if name(host) != "ctk-nodriver":
        assert not dropin.exists
        return
    text = dropin.content_string
    assert '[crio.runtime]\ndefault_runtime = "nvidia"\n' in text
    assert (
        '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\nruntime_type = "oci"\n'
        in text
    )


def test_cdi_spec_lists_every_gpu_of_the_driver(host):
    if name(host) == "ctk-nodriver":
        # No driver: nvidia-ctk cannot list the GPUs, and the role says so instead of writing a spec.
        assert not host.file("/etc/cdi/nvidia.yaml").exists
        assert not host.file("/var/run/cdi/nvidia.yaml").exists
        return
    # Toolkit 1.18 has the refresh units: the spec lives where they write it, and they are on.
    spec = host.file("/var/run/cdi/nvidia.yaml")
    assert spec.mode == 0o644
    assert "kind: nvidia.com/gpu" in spec.content_string
    assert "libcuda.so.580.95.05" in spec.content_string
    assert not host.file("/etc/cdi/nvidia.yaml").exists
    devices = host.check_output("nvidia-ctk cdi list").splitlines()
    assert "nvidia.com/gpu=all" in devices
    assert sorted(d for d in devices if d[len("nvidia.com/gpu=") :].isdigit()) == sorted(
        f"nvidia.com/gpu={i}" for i in range(GPUS[name(host)])
    )
    uuids = host.check_output("nvidia-smi --query-gpu=uuid --format=csv,noheader").split()
    assert {f"nvidia.com/gpu={u}" for u in uuids} <= set(devices)
    assert host.service("nvidia-cdi-refresh.path").is_enabled
    assert host.service("nvidia-cdi-refresh.path").is_running


def test_no_refresh_units_before_toolkit_1_18(host):
    only(host, "ctk-nodriver")
    assert not host.file("/lib/systemd/system/nvidia-cdi-refresh.path").exists
