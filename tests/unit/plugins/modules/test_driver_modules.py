# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""driver_state run in-process against fake roots, its decision table, and the package_spec filter."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.package_spec import package_spec
from ansible_collections.gpuops.cluster.plugins.module_utils import host
from ansible_collections.gpuops.cluster.plugins.modules import driver_state
from module_harness import Node, run_module


def stanza(name, version, status="install ok installed"):
    return f"Package: {name}\nStatus: {status}\nVersion: {version}\nArchitecture: amd64\n"


# A node halfway through a 570 -> 580 upgrade, as dpkg records it: the 570 set held, some 580
# packages in, the container toolkit and a cuda-compat whose version looks like a driver's.
UPGRADING = "\n".join(
    [
        stanza("nvidia-open-570", "570.133.20-1", "hold ok installed"),
        stanza("nvidia-driver-570-open", "570.133.20-1", "hold ok installed"),
        stanza("libnvidia-compute-570", "570.133.20-1", "hold ok installed"),
        stanza("nvidia-fabricmanager-570", "570.133.20-1", "hold ok installed"),
        stanza("nvidia-driver-pinning-570", "570.133.20-1"),
        stanza("nvidia-open-580", "580.95.05-1"),
        stanza("nvidia-dkms-580-open", "580.95.05-1"),
        stanza("libnvidia-compute-580", "580.95.05-1"),
        stanza("nvidia-utils-580", "580.95.05-1"),
        stanza("nvlsm", "2025.06.5-1"),
        stanza("cuda-compat-13-0", "580.95.05-1"),
        stanza("nvidia-container-toolkit", "1.17.8-1"),
        stanza("libnvidia-container1", "1.17.8-1"),
        stanza("nvidia-utils-575", "575.57.08-1", "deinstall ok config-files"),
    ]
)
NVIDIA_MODULES = (
    "nvidia_uvm 1998848 0 - Live 0x0\nnvidia_modeset 1581056 0 - Live 0x0\n"
    "nvidia 104071168 2 nvidia_uvm,nvidia_modeset, Live 0x0\nvideo 73728 1 nvidia_modeset, Live 0x0\n"
)


def make_root(tmp_path, *, status=UPGRADING, modules="", loaded_version=None, marks=()):
    root = tmp_path / "root"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(status)
    (root / "proc").mkdir()
    (root / "proc/modules").write_text(modules)
    if loaded_version:
        (root / "sys/module/nvidia").mkdir(parents=True)
        (root / "sys/module/nvidia/version").write_text(loaded_version + "\n")
    for mark, text in marks:
        (root / mark).parent.mkdir(parents=True, exist_ok=True)
        (root / mark).write_text(text)
    return root


@pytest.mark.parametrize("check_mode", [False, True])
def test_upgrade_in_progress_names_the_old_branch_and_what_to_hold(monkeypatch, tmp_path, check_mode):
    root = make_root(tmp_path, modules=NVIDIA_MODULES, loaded_version="570.133.20")
    node = Node(monkeypatch, {}, {})
    result = run_module(driver_state.main, {"branch": "580", "root": str(root)}, check_mode=check_mode).result
    assert result["changed"] is False
    assert result["installed_version"] == "580.95.05"
    assert result["loaded_version"] == "570.133.20"
    assert result["loaded_modules"] == ["nvidia", "nvidia_modeset", "nvidia_uvm"]
    assert result["container"] is None
    assert result["action"] == "reload"
    assert result["reason"] == "driver 570.133.20 is loaded; 580.95.05 is installed"
    assert result["other_branches"] == [
        "libnvidia-compute-570",
        "nvidia-driver-570-open",
        "nvidia-driver-pinning-570",
        "nvidia-fabricmanager-570",
        "nvidia-open-570",
    ]
    # nvlsm is held with the driver; the container toolkit and cuda-compat are other roles' business.
    assert result["hold"] == [
        "libnvidia-compute-580",
        "nvidia-dkms-580-open",
        "nvidia-open-580",
        "nvidia-utils-580",
        "nvlsm",
    ]
    assert result["held"] == [
        "libnvidia-compute-570",
        "nvidia-driver-570-open",
        "nvidia-fabricmanager-570",
        "nvidia-open-570",
    ]
    assert node.calls == []


@pytest.mark.parametrize(
    ("marks", "runtime"),
    [
        ((("run/systemd/container", "docker\n"),), "docker"),
        (((".dockerenv", ""),), "docker"),
        ((("run/.containerenv", ""),), "podman"),
        ((("run/systemd/container", "lxc\n"),), "lxc"),
    ],
)
def test_a_container_never_loads_or_reboots(monkeypatch, tmp_path, marks, runtime):
    root = make_root(tmp_path, marks=marks)
    Node(monkeypatch, {}, {})
    result = run_module(driver_state.main, {"branch": "580", "root": str(root)}).result
    assert result["container"] == runtime
    assert result["action"] == "none"
    assert result["reason"] == f"this node is a container ({runtime}); its kernel modules are the host's"


@pytest.mark.parametrize(
    ("modules", "loaded_version", "expected"),
    [
        ("", None, ("load", "the nvidia module is not loaded; driver 580.95.05 is installed")),
        (NVIDIA_MODULES, "580.95.05", ("none", "driver 580.95.05 is loaded")),
        (NVIDIA_MODULES, "580.65.06", ("reload", "driver 580.65.06 is loaded; 580.95.05 is installed")),
        (
            "nouveau 2428928 1 - Live 0x0\n",
            None,
            ("reboot", "nouveau is loaded and holds the GPUs; the blacklist takes effect at the next boot"),
        ),
    ],
)
def test_actions_on_a_real_machine(monkeypatch, tmp_path, modules, loaded_version, expected):
    root = make_root(tmp_path, modules=modules, loaded_version=loaded_version)
    Node(monkeypatch, {}, {})
    result = run_module(driver_state.main, {"branch": "580", "root": str(root)}).result
    assert (result["action"], result["reason"]) == expected


def test_nothing_installed_means_nothing_to_run(monkeypatch, tmp_path):
    root = make_root(tmp_path, status=stanza("bash", "5.2.15-2+b7"))
    Node(monkeypatch, {}, {})
    result = run_module(driver_state.main, {"branch": "580", "root": str(root)}).result
    assert result["installed_version"] is None
    assert result["action"] == "none" and result["hold"] == [] and result["other_branches"] == []


@pytest.mark.parametrize("branch", ["R580", "58", "580.95.05", ""])
def test_a_malformed_branch_is_refused_with_the_form_to_use(monkeypatch, tmp_path, branch):
    root = make_root(tmp_path)
    Node(monkeypatch, {}, {})
    result = run_module(driver_state.main, {"branch": branch, "root": str(root)})
    assert result.failed
    assert result.result["msg"] == f"branch is {branch!r}; give the driver branch as three digits, such as '580'."


def test_the_driver_version_is_what_most_of_the_branch_carries():
    packages = {
        "nvidia-open-580": "580.95.05-1",
        "libnvidia-compute-580": "1:580.95.05-0ubuntu1",
        "nvidia-driver-pinning-580": "580.65.06-1",
    }
    assert host.branch_driver_version(packages, "580") == "580.95.05"
    assert host.branch_driver_version(packages, "570") is None
    assert host.upstream_version("1:580.95.05-0ubuntu0.24.04.2") == "580.95.05"


@pytest.mark.parametrize(
    ("package", "family", "spec"),
    [
        ({"name": "nvidia-open-580", "version": "580.95.05-*"}, "Debian", "nvidia-open-580=580.95.05-*"),
        ({"name": "libcudnn8", "version": "8.9.7.29-1+cuda12.2"}, "Debian", "libcudnn8=8.9.7.29-1+cuda12.2"),
        ({"name": "cuda-toolkit-12-8", "version": None}, "Debian", "cuda-toolkit-12-8"),
        (
            {"name": "datacenter-gpu-manager-4-core", "version": "1:4.4.1-1"},
            "RedHat",
            "datacenter-gpu-manager-4-core-4.4.1-1",
        ),
    ],
)
def test_package_spec(package, family, spec):
    assert package_spec(package, family) == spec


@pytest.mark.parametrize("bad", ["nvidia-open", {"version": "1"}, None])
def test_package_spec_refuses_what_is_not_a_package(bad):
    with pytest.raises(AnsibleFilterError, match="package_spec takes a dict with a name and a version"):
        package_spec(bad)


# --- busy: what runs on the node before a branch change ----------------------------------------
SMI = "/usr/bin/nvidia-smi"
APPS = (SMI, "--query-compute-apps=pid,gpu_uuid,used_memory,process_name", "--format=csv,noheader")
SQUEUE = ("/usr/bin/squeue", "--noheader", "--nodelist=gpu01", "--format=%i")
SINFO = ("/usr/bin/sinfo", "--noheader", "--Node", "--nodes=gpu01", "--format=%T")
SLURM_BINS = {"squeue": "/usr/bin/squeue", "sinfo": "/usr/bin/sinfo"}


def busy(monkeypatch, tmp_path, binaries, outputs, modules=NVIDIA_MODULES):
    root = make_root(tmp_path, modules=modules, loaded_version="570.133.20" if modules else None)
    node = Node(monkeypatch, binaries, outputs)
    args = {"branch": "580", "root": str(root), "busy": True, "slurm_node": "gpu01"}
    return run_module(driver_state.main, args), node


def test_busy_lists_gpu_processes_and_slurm_jobs(monkeypatch, tmp_path):
    apps = "4242, GPU-5c3a1f0e-0000-0000-0000-000000000001, 70144 MiB, /opt/venv/bin/python3, -u, train.py\n"
    exited, _node = busy(
        monkeypatch,
        tmp_path,
        {"nvidia-smi": SMI, **SLURM_BINS},
        {APPS: (0, apps, ""), SQUEUE: (0, "1207\n1208\n", ""), SINFO: (0, "mixed\n", "")},
    )
    work = exited.result["work"]
    assert work["gpu_processes"] == [
        {
            "pid": 4242,
            "gpu_uuid": "GPU-5c3a1f0e-0000-0000-0000-000000000001",
            "used_memory": 70144,
            "process_name": "/opt/venv/bin/python3, -u, train.py",
        }
    ]
    assert work["slurm_jobs"] == ["1207", "1208"]
    assert (work["slurm_state"], work["drained"]) == ("mixed", False)


@pytest.mark.parametrize(
    ("jobs", "state", "drained"),
    [("", "drained\n", True), ("", "drained*\n", True), ("77\n", "draining\n", False), ("", "idle\n", False)],
)
def test_only_a_drained_node_without_jobs_counts_as_drained(monkeypatch, tmp_path, jobs, state, drained):
    exited, _node = busy(monkeypatch, tmp_path, SLURM_BINS, {SQUEUE: (0, jobs, ""), SINFO: (0, state, "")})
    assert exited.result["work"]["drained"] is drained


def test_without_driver_or_slurm_there_is_nothing_to_ask(monkeypatch, tmp_path):
    exited, node = busy(monkeypatch, tmp_path, {"nvidia-smi": SMI}, {}, modules="")
    assert exited.result["work"] == {"gpu_processes": [], "slurm_jobs": [], "slurm_state": None, "drained": False}
    assert node.calls == []


def test_slurm_that_cannot_answer_is_a_warning(monkeypatch, tmp_path):
    exited, node = busy(
        monkeypatch,
        tmp_path,
        SLURM_BINS,
        {SQUEUE: (1, "", "slurm_load_jobs error: Unable to contact slurm controller"), SINFO: (1, "", "down")},
    )
    assert not exited.failed
    assert exited.result["work"]["slurm_state"] is None
    assert any("Unable to contact slurm controller" in w for w in node.warnings)


def test_a_driver_that_does_not_answer_fails_before_any_change(monkeypatch, tmp_path):
    exited, _node = busy(monkeypatch, tmp_path, {"nvidia-smi": SMI}, {APPS: (9, "", "NVIDIA-SMI has failed")})
    assert exited.failed
    assert "nvidia-smi --query-compute-apps" in exited.result["msg"]
    assert "NVIDIA-SMI has failed" in exited.result["msg"]


def test_busy_is_off_by_default(monkeypatch, tmp_path):
    root = make_root(tmp_path, modules=NVIDIA_MODULES, loaded_version="570.133.20")
    node = Node(monkeypatch, {"nvidia-smi": SMI, **SLURM_BINS}, {})
    assert run_module(driver_state.main, {"branch": "580", "root": str(root)}).result["work"] is None
    assert node.calls == []
