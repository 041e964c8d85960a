# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stacks from NVIDIA's tables, valid and invalid, against the gpusim profiles' hardware."""

from __future__ import annotations

import copy
import itertools

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import compat
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import GPUS, identify_gpu
from ansible_collections.gpuops.cluster.plugins.module_utils.stack import (
    check_stack,
    errors,
    format_decisions,
    format_problems,
)
from conftest import profile_facts

TODAY = "2026-11-21"
BASE = {
    "nvidia_driver_branch": "580",
    "nvidia_driver_kernel_module": "auto",
    "cuda_versions": ["12.8"],
    "cuda_forward_compat": True,
    "cuda_minor_version_compat": False,
    "cudnn_version": "9.10.2.21",
    "nccl_version": "2.26.5",
    "ofed_flavour": "doca",
    "ofed_gpudirect": "auto",
    "dcgm_major": 4,
    "kernel": "6.1.0-28-amd64",
    "distribution": "Debian",
    "distribution_major_version": "12",
    "cpu_architecture": "x86_64",
}


def synthetic(*models, nvswitches=0, hcas=()):
    """Facts for GPUs of the tables that no profile has: (count, slug, name, capability)."""
    gpus = []
    for count, slug, name, capability in models:
        gpus += [{"name": name, "slug": slug, "compute_capability": capability} for _i in range(count)]
    return {
        "present": bool(gpus),
        "gpus": gpus,
        "nvswitch_count": nvswitches,
        "hca_pci": [{"model": model} for model in hcas],
    }


H100, B200, V100, L40S = (profile_facts(n) for n in ("dgx-h100", "hgx-b200", "dgx1-v100", "pcie-l40s"))
GH200 = synthetic((1, "gh200", "NVIDIA GH200 480GB", "9.0"))
B300 = synthetic((8, "b300", "NVIDIA B300 SXM6 AC", "10.3"), nvswitches=2)
RTX4090 = synthetic((2, "geforce_rtx_4090", "NVIDIA GeForce RTX 4090", "8.9"))
MIXED = synthetic((2, "v100", "Tesla V100 PCIe 32GB", "7.0"), (2, "b200", "NVIDIA B200", "10.0"))
CX8 = synthetic((8, "h100", "NVIDIA H100 80GB HBM3", "9.0"), hcas=("ConnectX-8",))
NONE = {"present": False, "gpus": [], "nvswitch_count": 0, "hca_pci": []}


def run(hardware, **changes):
    stack = dict(BASE, **changes)
    return check_stack(stack, copy.deepcopy(hardware), today=TODAY)


def found(problems, severity, variable, text):
    return any(p["severity"] == severity and p["variable"] == variable and text in p["message"] for p in problems)


# (id, hardware, changes, expected problems as (severity, variable, text in the message))
INVALID = [
    (
        "tutorial-cuda13-cudnn10",
        H100,
        {"cuda_versions": ["13.0"], "cudnn_version": "10.0"},
        [
            ("error", "cudnn_version", "there is no cuDNN 10.0"),
        ],
    ),
    ("tutorial-nccl-3.12", H100, {"nccl_version": "3.12"}, [("error", "nccl_version", "there is no NCCL 3.12")]),
    (
        "tutorial-driver555-cuda12.8",
        H100,
        {"nvidia_driver_branch": "555"},
        [
            ("error", "cuda_versions", "CUDA 12.8 needs driver 570.26 or newer; 555 is older"),
            ("warning", "nvidia_driver_branch", "not in NVIDIA's datacenter driver lifecycle table"),
        ],
    ),
    (
        "tutorial-all-at-once",
        H100,
        {
            "nvidia_driver_branch": "555",
            "cuda_versions": ["13.0"],
            "cudnn_version": "10.0",
            "nccl_version": "3.12",
        },
        [
            ("error", "cuda_versions", "forward compatibility (cuda-compat) is supported on datacenter LTSB"),
            ("error", "cudnn_version", "there is no cuDNN 10.0"),
            ("error", "nccl_version", "there is no NCCL 3.12"),
        ],
    ),
    (
        "cuda13-on-v100",
        V100,
        {"nvidia_driver_kernel_module": "proprietary", "cuda_versions": ["13.0"], "cudnn_version": ""},
        [
            ("error", "cuda_versions", "CUDA 13.0 removed Volta"),
            ("error", "nccl_version", "NCCL builds for CUDA 13 drop targets older than sm_75"),
        ],
    ),
    (
        "proprietary-on-b200",
        B200,
        {"nvidia_driver_kernel_module": "proprietary"},
        [
            ("error", "nvidia_driver_kernel_module", "requires the open kernel modules"),
        ],
    ),
    (
        "proprietary-on-gh200",
        GH200,
        {"nvidia_driver_kernel_module": "proprietary"},
        [
            ("error", "nvidia_driver_kernel_module", "GH200 480GB (compute capability 9.0) requires the open kernel"),
        ],
    ),
    (
        "open-on-v100",
        V100,
        {"nvidia_driver_kernel_module": "open"},
        [
            ("error", "nvidia_driver_kernel_module", "open kernel modules do not support NVIDIA Tesla V100"),
        ],
    ),
    (
        "open-modules-before-r515",
        H100,
        {
            "nvidia_driver_branch": "510",
            "nvidia_driver_kernel_module": "open",
            "cuda_versions": ["11.6"],
            "cudnn_version": "",
            "nccl_version": "",
        },
        [
            ("error", "nvidia_driver_kernel_module", "open kernel modules exist from R515"),
            ("error", "nvidia_driver_branch", "needs driver 520.61.05 or newer"),
            ("error", "cuda_versions", "CUDA 11.6 cannot build for NVIDIA H100"),
        ],
    ),
    (
        "mixed-volta-blackwell",
        MIXED,
        {},
        [
            ("error", "nvidia_driver_kernel_module", "mixes GPUs that need the open kernel modules"),
        ],
    ),
    (
        "fabricmanager-other-version",
        H100,
        {"nvidia_driver_version": "580.95.05", "nvidia_driver_fabricmanager_version": "580.65.06"},
        [
            ("error", "nvidia_driver_fabricmanager_version", "unless its version equals the driver's exactly"),
        ],
    ),
    (
        "fabricmanager-other-branch",
        H100,
        {"nvidia_driver_fabricmanager_version": "570.133.20"},
        [
            ("error", "nvidia_driver_fabricmanager_version", "is not in the driver's branch 580"),
        ],
    ),
    (
        "cudnn9-cuda12-with-cuda13",
        H100,
        {"cuda_versions": ["13.0"], "cudnn_version": "9.17.0.29", "cudnn_cuda_major": 12, "nccl_version": ""},
        [
            ("error", "cudnn_cuda_major", "cuDNN built for CUDA 12 does not work with the default CUDA 13.0"),
        ],
    ),
    (
        "cudnn9.10-has-no-cuda13-build",
        H100,
        {"cuda_versions": ["13.0"], "nccl_version": ""},
        [
            ("error", "cudnn_version", "cuDNN 9.10.2.21 has no build for CUDA 13"),
        ],
    ),
    (
        "cudnn8-on-b200",
        B200,
        {"cudnn_version": "8.9.7.29-1+cuda12.2"},
        [
            ("error", "cudnn_version", "supports compute capability 5.0 to 9.0"),
        ],
    ),
    (
        "cudnn9.17-on-v100",
        V100,
        {"cudnn_version": "9.17.0.29"},
        [
            ("error", "cudnn_version", "supports compute capability 7.5 to 12.1"),
        ],
    ),
    (
        "nccl-cuda11.8-with-cuda12",
        H100,
        {"nccl_version": "2.21.5-1+cuda11.8"},
        [
            ("error", "nccl_version", "built for CUDA 11.8, but the default CUDA is 12.8"),
        ],
    ),
    (
        "nccl-cuda12.4-build-on-b200",
        B200,
        {"nccl_version": "2.21.5-1+cuda12.4", "cuda_versions": ["12.8", "12.4"], "cuda_default_version": "12.4"},
        [
            ("error", "nccl_version", "has no code for NVIDIA B200"),
            ("error", "cuda_versions", "CUDA 12.4 cannot build for NVIDIA B200"),
        ],
    ),
    ("nccl-without-patch", H100, {"nccl_version": "2.26"}, [("error", "nccl_version", "names no release")]),
    (
        "dcgm-cuda13-with-570",
        H100,
        {"nvidia_driver_branch": "570", "dcgm_cuda_major": 13},
        [
            (
                "error",
                "dcgm_cuda_major",
                "datacenter-gpu-manager-4-cuda13 does not match the driver, which runs CUDA 12.8",
            ),
            ("warning", "nvidia_driver_branch", "R570 has reached end of life (2026-02-28)"),
        ],
    ),
    (
        "cuda-12.7-does-not-exist",
        H100,
        {"cuda_versions": ["12.7"]},
        [
            ("error", "cuda_versions", "there is no CUDA 12.7 release"),
        ],
    ),
    (
        "cuda-12.4-on-b200",
        B200,
        {"cuda_versions": ["12.4"], "nccl_version": "", "cudnn_version": ""},
        [
            ("error", "cuda_versions", "its first toolkit is CUDA 12.8"),
        ],
    ),
    (
        "driver-565-on-b200",
        B200,
        {"nvidia_driver_branch": "565", "cuda_versions": ["12.6"], "cudnn_version": "", "nccl_version": ""},
        [
            ("error", "nvidia_driver_branch", "needs driver 570.26 or newer; 565 is older"),
            ("warning", "nvidia_driver_branch", "R565 has reached end of life"),
        ],
    ),
    (
        "forward-compat-on-geforce",
        RTX4090,
        {"nvidia_driver_branch": "570", "cuda_versions": ["13.0"], "cudnn_version": "", "nccl_version": ""},
        [
            ("error", "cuda_versions", "works only on datacenter GPUs"),
        ],
    ),
    (
        "forward-compat-refused",
        H100,
        {
            "nvidia_driver_branch": "570",
            "cuda_versions": ["13.0"],
            "cuda_forward_compat": False,
            "cudnn_version": "",
            "nccl_version": "",
        },
        [
            ("error", "cuda_versions", "cuda_forward_compat is false"),
        ],
    ),
    (
        "version-outside-branch",
        H100,
        {"nvidia_driver_version": "570.133.20"},
        [
            ("error", "nvidia_driver_version", "570.133.20 is not in branch 580"),
        ],
    ),
    (
        "default-not-listed",
        H100,
        {"cuda_default_version": "12.4"},
        [
            ("error", "cuda_default_version", "12.4 is not one of cuda_versions"),
        ],
    ),
    (
        "peermem-with-inbox",
        H100,
        {"ofed_flavour": "inbox", "ofed_gpudirect": "peermem"},
        [
            ("error", "ofed_gpudirect", "nvidia-peermem needs MLNX_OFED or DOCA-OFED"),
        ],
    ),
    (
        "dmabuf-on-old-kernel-proprietary",
        V100,
        {"ofed_flavour": "inbox", "ofed_gpudirect": "dmabuf", "kernel": "5.4.0-150-generic"},
        [
            ("error", "ofed_gpudirect", "needs open kernel modules, Linux 5.12 or newer (running 5.4.0-150-generic)"),
        ],
    ),
    (
        "mlnx-ofed-on-connectx8",
        CX8,
        {"ofed_flavour": "mlnx_ofed"},
        [
            ("error", "ofed_flavour", "MLNX_OFED does not support ConnectX-8"),
        ],
    ),
    (
        "cuda13-on-ubuntu-20.04",
        H100,
        {
            "distribution": "Ubuntu",
            "distribution_major_version": "20",
            "cuda_versions": ["13.0"],
            "cudnn_version": "",
            "nccl_version": "",
        },
        [
            ("error", "cuda_versions", "CUDA 13.0 has no packages for Ubuntu 20"),
            ("warning", "distribution", "Ubuntu 20 is not tested: no scenario"),
        ],
    ),
    (
        "unsupported-distribution",
        H100,
        {"distribution": "Archlinux", "distribution_major_version": "rolling"},
        [
            ("error", "distribution", "Archlinux rolling has no NVIDIA CUDA repository"),
        ],
    ),
    (
        "cuda-update-newer-than-pinned-driver",
        H100,
        {"nvidia_driver_version": "580.65.06", "cuda_versions": ["13.0", "12.8"]},
        [
            ("warning", "cuda_versions", "the newest CUDA 13.0 update (13.0 Update 2) needs driver 580.95.05"),
            ("error", "cudnn_version", "cuDNN 9.10.2.21 has no build for CUDA 13"),
        ],
    ),
]

VALID = [
    ("h100-580-defaults", H100, {}, []),
    (
        "l40s-580-two-toolkits",
        L40S,
        {
            "nvidia_driver_version": "580.95.05",
            "cuda_versions": ["12.8", "13.0"],
            "cuda_default_version": "12.8",
            "ofed_flavour": "inbox",
        },
        [],
    ),
    ("b200-580-nvlsm", B200, {"nccl_version": "2.26.5-1+cuda12.8"}, []),
    (
        "v100-570-proprietary",
        V100,
        {"nvidia_driver_branch": "570", "nvidia_driver_version": "570.133.20"},
        [
            ("warning", "nvidia_driver_branch", "R570 has reached end of life"),
        ],
    ),
    (
        "h100-570-forward-compat-cuda13",
        H100,
        {
            "nvidia_driver_branch": "570",
            "cuda_versions": ["13.0"],
            "cudnn_version": "9.17.0.29",
            "nccl_version": "2.27.7-1+cuda13.0",
        },
        [
            ("warning", "cuda_versions", "forward compatibility package cuda-compat-13-0"),
            ("warning", "nvidia_driver_branch", "R570 has reached end of life"),
        ],
    ),
    (
        "h100-595-cuda13.2",
        H100,
        {
            "nvidia_driver_branch": "595",
            "cuda_versions": ["13.2"],
            "cudnn_version": "9.17.0.29",
            "nccl_version": "2.28.9-1+cuda13.2",
        },
        [],
    ),
    (
        "h100-560-minor-compat-accepted",
        H100,
        {"nvidia_driver_branch": "560", "cuda_minor_version_compat": True},
        [
            ("warning", "cuda_versions", "runs under minor-version compatibility only"),
            ("warning", "nvidia_driver_branch", "R560 has reached end of life"),
        ],
    ),
    (
        "fabricmanager-pinned-apart-from-a-branch",
        H100,
        {"nvidia_driver_fabricmanager_version": "580.95.05"},
        [("warning", "nvidia_driver_fabricmanager_version", "while the driver takes branch 580's newest release")],
    ),
    (
        "ubuntu-24.04",
        H100,
        {"distribution": "Ubuntu", "distribution_major_version": "24"},
        [],
    ),
    (
        "ubuntu-22.04-in-part",
        H100,
        {"distribution": "Ubuntu", "distribution_major_version": "22"},
        [("warning", "distribution", "Ubuntu 22 is tested in part: the collection's CI runs molecule/slurm_cluster")],
    ),
    (
        "rocky-9-untested",
        H100,
        {"distribution": "Rocky", "distribution_major_version": "9"},
        [
            ("warning", "distribution", "RHEL-family task files follow NVIDIA's documentation"),
        ],
    ),
    ("no-gpu-controller", NONE, {}, []),
    (
        "r610-new-feature-branch",
        H100,
        {
            "nvidia_driver_branch": "610",
            "cuda_versions": ["13.3"],
            "cudnn_version": "9.17.0.29",
            "nccl_version": "2.29.7-1+cuda13.3",
        },
        [
            ("warning", "nvidia_driver_branch", "R610 has reached end of life (2026-08-31)"),
        ],
    ),
    (
        "volta-after-r580",
        V100,
        {"nvidia_driver_branch": "595", "cudnn_version": "9.10.2.21"},
        [
            ("warning", "nvidia_driver_branch", "R580 is the last driver branch for NVIDIA Tesla V100"),
        ],
    ),
    (
        "b300-on-570-uncertain-rows-warn",
        B300,
        {"nvidia_driver_branch": "570", "cudnn_version": ""},
        [
            ("warning", "nvidia_driver_branch", "needs driver 575.51.03 or newer"),
            ("warning", "cuda_versions", "its first toolkit is CUDA 12.9"),
            ("warning", "nvidia_driver_branch", "R570 has reached end of life"),
        ],
    ),
    (
        "proprietary-from-r620-warns",
        H100,
        {
            "nvidia_driver_branch": "620",
            "nvidia_driver_kernel_module": "proprietary",
            "cuda_versions": ["13.2"],
            "cudnn_version": "9.17.0.29",
            "nccl_version": "",
        },
        [
            ("warning", "nvidia_driver_kernel_module", "lists only the open kernel modules"),
            ("warning", "nvidia_driver_branch", "R620 is not in NVIDIA's datacenter driver lifecycle table"),
        ],
    ),
    ("inbox-dmabuf-auto", H100, {"ofed_flavour": "inbox"}, []),
    (
        "inbox-on-old-kernel-gets-no-gpudirect",
        H100,
        {"ofed_flavour": "inbox", "kernel": "5.4.0-150-generic"},
        [
            ("warning", "ofed_gpudirect", "this node gets no GPUDirect RDMA"),
        ],
    ),
]


@pytest.mark.parametrize(("hardware", "changes", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_stacks_are_refused_with_every_problem(hardware, changes, expected):
    problems, _resolved = run(hardware, **changes)
    assert errors(problems), problems
    for severity, variable, text in expected:
        assert found(problems, severity, variable, text), (severity, variable, text, problems)
    for item in problems:
        assert item["fix"] and item["message"] and item["variable"]


@pytest.mark.parametrize(("hardware", "changes", "expected"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_stacks_pass_with_only_the_expected_warnings(hardware, changes, expected):
    problems, resolved = run(hardware, **changes)
    assert not errors(problems), format_problems(problems)
    assert len(problems) == len(expected), problems
    for severity, variable, text in expected:
        assert found(problems, severity, variable, text), (severity, variable, text, problems)
    assert resolved["kernel_module"] in ("open", "proprietary")


def names(resolved, component):
    return [(p["name"], p["version"]) for p in resolved["packages"][component]]


def test_resolved_h100_needs_fabric_manager_at_the_driver_version():
    _problems, resolved = run(H100, nvidia_driver_version="580.95.05")
    assert resolved["kernel_module"] == "open"
    assert resolved["fabricmanager"] == {"required": True, "version": "580.95.05", "nvswitch_count": 4}
    assert not resolved["nvlsm"]["required"]
    assert names(resolved, "driver") == [("nvidia-open-580", "580.95.05-*")]
    assert names(resolved, "fabricmanager") == [
        ("nvidia-fabricmanager-580", "580.95.05-*"),
        ("libnvidia-nscq-580", "580.95.05-*"),
    ]
    assert names(resolved, "driver_pinning") == [("nvidia-driver-pinning-580", "580.95.05-*")]
    assert resolved["driver"]["apt_pin"] == "580.95.05-*"
    assert resolved["driver"]["native_cuda"] == "13.0"
    assert resolved["gpudirect"] == "peermem"
    assert resolved["repository"] == {"family": "apt", "distribution": "debian12", "arch": "x86_64"}


def test_resolved_b200_open_modules_and_nvlsm():
    _problems, resolved = run(B200)
    assert resolved["kernel_module"] == "open"
    assert resolved["kernel_module_reason"].startswith("required by")
    assert resolved["fabricmanager"]["required"] and resolved["nvlsm"]["required"]
    assert names(resolved, "nvlsm") == [("nvlsm", None)]


def test_resolved_v100_proprietary_and_dcgm_cuda12_on_r580():
    _problems, resolved = run(V100)
    assert resolved["kernel_module"] == "proprietary"
    assert names(resolved, "driver") == [("cuda-drivers-580", None)]
    assert names(resolved, "driver_compute_only") == [("libnvidia-compute-580", None), ("nvidia-dkms-580", None)]
    assert {k: resolved["dcgm"][k] for k in ("major", "cuda_major")} == {"major": 4, "cuda_major": 12}
    assert not resolved["fabricmanager"]["required"]


def test_resolved_l40s_has_no_fabric_manager_and_dcgm_follows_the_driver():
    _problems, resolved = run(L40S)
    assert resolved["fabricmanager"]["required"] is False
    assert resolved["packages"]["fabricmanager"] == []
    assert names(resolved, "dcgm") == [
        ("datacenter-gpu-manager-4-core", None),
        ("datacenter-gpu-manager-4-cuda13", None),
    ]


def test_resolved_versions_of_cudnn_nccl_and_cuda():
    _problems, resolved = run(H100, cuda_versions=["12.4", "12.8"], cudnn_version="9.10.2.21")
    assert resolved["cuda"]["default"] == "12.8"
    assert names(resolved, "cuda") == [("cuda-toolkit-12-4", None), ("cuda-toolkit-12-8", None)]
    assert names(resolved, "cudnn") == [("libcudnn9-cuda-12", "9.10.2.21-1"), ("libcudnn9-dev-cuda-12", "9.10.2.21-1")]
    assert names(resolved, "nccl") == [("libnccl2", "2.26.5-1+cuda12.8"), ("libnccl-dev", "2.26.5-1+cuda12.8")]
    _problems, resolved = run(H100, cudnn_version="8.9.7.29-1+cuda12.2", cuda_versions=["12.2"], nccl_version="")
    assert names(resolved, "cudnn") == [("libcudnn8", "8.9.7.29-1+cuda12.2"), ("libcudnn8-dev", "8.9.7.29-1+cuda12.2")]


def test_resolved_forward_compat_package():
    _problems, resolved = run(
        H100, nvidia_driver_branch="570", cuda_versions=["13.0"], cudnn_version="", nccl_version=""
    )
    assert resolved["cuda"]["forward_compat"] == ["13.0"]
    assert names(resolved, "cuda_compat") == [("cuda-compat-13-0", None)]


def test_resolved_branch_only_reports_the_minimum_the_install_must_reach():
    _problems, resolved = run(H100, cuda_versions=["13.0"], cudnn_version="", nccl_version="")
    assert resolved["driver"]["version"] is None
    assert resolved["driver"]["minimum_version"] == "580.95.05"
    assert resolved["driver"]["apt_pin"] == "580.*"


def test_resolved_unsuffixed_names_from_r590_and_dnf_streams():
    _problems, resolved = run(
        H100, nvidia_driver_branch="595", cuda_versions=["13.2"], cudnn_version="", nccl_version=""
    )
    assert resolved["driver"]["package_scheme"] == "unsuffixed"
    assert names(resolved, "driver") == [("nvidia-open", None)]
    assert names(resolved, "driver_compute_only") == [("libnvidia-compute", None), ("nvidia-dkms-open", None)]
    _problems, resolved = run(H100, distribution="Rocky", distribution_major_version="9", cpu_architecture="aarch64")
    assert resolved["driver"]["dnf_module_stream"] == "580-open"
    assert resolved["repository"] == {"family": "dnf", "distribution": "rhel9", "arch": "sbsa"}
    assert resolved["packages"]["driver_pinning"] == []


def test_resolved_action_against_the_installed_driver():
    installed = dict(H100, driver_version="570.133.20")
    assert run(installed)[1]["driver"]["action"] == "upgrade"
    assert (
        run(installed, nvidia_driver_branch="570", nvidia_driver_version="570.133.20")[1]["driver"]["action"] == "keep"
    )
    assert run(installed, nvidia_driver_branch="570")[1]["driver"]["action"] == "keep"
    assert run(H100)[1]["driver"]["action"] == "install"


@pytest.mark.parametrize(
    ("changes", "variable", "text"),
    [
        ({"nvidia_driver_branch": "R570"}, "nvidia_driver_branch", 'nvidia_driver_branch: "570"'),
        ({"nvidia_driver_branch": "570.133"}, "nvidia_driver_branch", "write the branch number only"),
        ({"nvidia_driver_version": "latest"}, "nvidia_driver_version", "write the full version"),
        ({"cuda_versions": ["12", "8"]}, "cuda_versions", "cuda_versions: ['12.8', '12.4']"),
        ({"cuda_versions": ["12.8.1"]}, "cuda_versions", "names an update"),
        ({"cudnn_version": "nine"}, "cudnn_version", 'cudnn_version: "9.10.2.21"'),
        ({"nccl_version": "v2.26"}, "nccl_version", 'nccl_version: "2.26.5"'),
        ({"nvidia_driver_fabricmanager_version": "same"}, "nvidia_driver_fabricmanager_version", "leave it empty"),
    ],
)
def test_malformed_values_name_the_variable_and_the_form(changes, variable, text):
    problems, _resolved = run(H100, **changes)
    assert any(p["variable"] == variable and text in p["message"] + p["fix"] for p in errors(problems)), problems


def test_a_malformed_value_does_not_hide_the_other_problems():
    problems, resolved = run(V100, cuda_versions=["12", "8", "13.0"], nccl_version="3.12")
    assert found(problems, "error", "cuda_versions", "'12' is not a CUDA version")
    assert found(problems, "error", "cuda_versions", "CUDA 13.0 removed Volta")
    assert found(problems, "error", "nccl_version", "there is no NCCL 3.12")
    assert resolved is not None
    problems, resolved = run(V100, nvidia_driver_branch="R580")
    assert resolved is None and len(problems) == 1


def test_one_message_lists_every_problem_with_its_fix():
    problems, _resolved = run(V100, nvidia_driver_kernel_module="open", cuda_versions=["13.0"], dcgm_cuda_major=13)
    message = format_problems(problems, header="Preflight failed on node1")
    lines = message.splitlines()
    assert lines[0] == "Preflight failed on node1: 5 error(s), 0 warning(s)."
    assert [line.split("]")[1].split(":")[0].strip() for line in lines[1:]] == [
        "nvidia_driver_kernel_module",
        "cuda_versions",
        "cudnn_version",
        "nccl_version",
        "dcgm_cuda_major",
    ]
    assert all(" Fix: " in line for line in lines[1:])


# --- the tables themselves -------------------------------------------------------------------------


def test_cuda_rows_need_newer_drivers_as_releases_go_up():
    rows = sorted(compat.CUDA_DRIVER_ROWS, key=lambda row: compat.vtuple(row.release))
    for older, newer in itertools.pairwise(rows):
        assert compat.vtuple(older.driver)[0] <= compat.vtuple(newer.driver)[0], (older, newer)
        if len(compat.vtuple(older.driver)) > 1 and len(compat.vtuple(newer.driver)) > 1:
            assert compat.vtuple(older.driver) < compat.vtuple(newer.driver), (older, newer)


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("450.51.05", "11.0"),
        ("535.104.05", "12.2"),
        ("535", "12.2"),
        ("570.26", "12.8"),
        ("570.133.20", "12.8"),
        ("575", "12.9"),
        ("580.65.06", "13.0"),
        ("595", "13.2"),
        ("610", "13.3"),
        ("615", "13.4"),
    ],
)
def test_native_cuda_of_a_driver(driver, cuda):
    assert compat.native_cuda(driver) == cuda


def test_the_stand_in_drivers_report_the_cuda_the_tables_give(repo_builder):
    for versions, cuda in repo_builder.DRIVERS.values():
        for version in versions:
            assert compat.native_cuda(version) == cuda


def test_every_family_minimum_is_a_release_row():
    for major, row in compat.CUDA_FAMILIES.items():
        assert compat.cuda_minors(major), major
        assert compat.native_cuda(row.driver).startswith(f"{major}.") or major == 11


def test_rows_name_a_known_source():
    with pytest.raises(KeyError):
        compat.Row("made-up-source", driver="1")
    for row in (*compat.CUDA_DRIVER_ROWS, *compat.ARCHITECTURES.values(), *compat.CUDNN_RELEASES):
        assert row.source in compat.SOURCES


def test_every_gpu_of_the_pci_table_has_an_architecture_row():
    for device_id in GPUS:
        capability = identify_gpu(device_id, None)["compute_capability"]
        assert compat.architecture(capability) is not None, (device_id, capability)


def test_resolved_packages_exist_in_the_stand_in_repository(repo_builder):
    available = {p.name for p in repo_builder.driver_packages() + repo_builder.cuda_packages()}
    for hardware, changes in (
        (H100, {"nvidia_driver_branch": "570"}),
        (B200, {}),
        (V100, {"nvidia_driver_branch": "570"}),
    ):
        _problems, resolved = run(hardware, **changes)
        for component in (
            "driver_pinning",
            "driver",
            "driver_compute_only",
            "fabricmanager",
            "nvlsm",
            "cuda",
            "cudnn",
            "nccl",
        ):
            for package in resolved["packages"][component]:
                assert package["name"] in available, (component, package)


def decision(resolved, name):
    (row,) = [r for r in resolved["decisions"] if r["decision"] == name]
    return row


def test_every_decision_carries_its_reason():
    _problems, resolved = run(H100, nvidia_driver_version="580.95.05")
    fm = decision(resolved, "Fabric Manager")
    assert fm["value"] == "yes, 580.95.05"
    assert fm["reason"].startswith("4 NVSwitch(es) on PCI")
    assert decision(resolved, "kernel modules") == {
        "decision": "kernel modules",
        "value": "open",
        "reason": resolved["kernel_module_reason"],
    }
    assert decision(resolved, "GPUDirect RDMA")["reason"] == "ofed_flavour doca ships nvidia-peermem"
    assert decision(resolved, "DCGM")["reason"] == "follows the driver, which runs CUDA 13.0"
    assert decision(resolved, "driver")["reason"] == "declared nvidia_driver_version"
    for row in resolved["decisions"]:
        assert row["reason"], row


def test_fabric_manager_follows_a_declared_version_or_the_installed_driver():
    _problems, resolved = run(H100)
    assert resolved["fabricmanager"]["version"] is None
    assert decision(resolved, "Fabric Manager")["value"] == "yes, the driver's installed version"
    _problems, resolved = run(L40S)
    assert decision(resolved, "Fabric Manager") == {
        "decision": "Fabric Manager",
        "value": "no",
        "reason": "no NVSwitch on PCI",
    }


def test_a_host_without_gpus_says_so_and_why():
    _problems, resolved = run({})
    assert decision(resolved, "NVIDIA stack")["reason"].startswith("no NVIDIA GPU on PCI")


def test_format_decisions_lines_up_the_columns():
    _problems, resolved = run(H100, nvidia_driver_version="580.95.05")
    text = format_decisions(resolved["decisions"], "Decisions on h100")
    lines = text.splitlines()
    assert lines[0] == "Decisions on h100"
    assert len(lines) == len(resolved["decisions"]) + 1
    column = lines[1].index("580.95.05")
    assert all(line[column - 2 : column] == "  " for line in lines[1:])


def test_dcgm_reason_names_the_pre_turing_cap():
    _problems, resolved = run(V100)
    assert resolved["dcgm"]["cuda_major"] == 12
    assert decision(resolved, "DCGM")["reason"].startswith("capped at CUDA 12 for the pre-Turing GPUs (")


def test_dcgm_3_is_refused_in_preflight_where_the_dcgm_role_would_fail():
    problems, _resolved = run(H100, dcgm_major=3)
    assert ("error", "dcgm_major") in [(p["severity"], p["variable"]) for p in problems]


def test_dcgm_versions_are_checked_against_nvidias_pairs():
    problems, resolved = run(H100, dcgm_version="4.4.1", dcgm_exporter_version="4.5.2")
    assert not errors(problems)
    assert resolved["dcgm"]["version"] == "4.4.1" and resolved["dcgm"]["exporter_version"] == "4.5.2"
    problems, _resolved = run(H100, dcgm_version="4.4.1", dcgm_exporter_version="4.1.3")
    assert found(problems, "error", "dcgm_exporter_version", "dcgm-exporter 4.1.3 is built for DCGM 4.2.3, not 4.4.1")
    problems, _resolved = run(H100, dcgm_version="3.3.9")
    assert found(problems, "error", "dcgm_version", "'3.3.9' is not a DCGM 4 release")


def test_an_architecture_without_nvidia_packages_is_refused_and_arm64_is_resolved_but_said_untested():
    problems, _resolved = run(H100, cpu_architecture="ppc64le")
    assert found(problems, "error", "cpu_architecture", "'ppc64le' has no NVIDIA datacenter packages")
    problems, resolved = run(H100, distribution="Ubuntu", distribution_major_version="24", cpu_architecture="aarch64")
    assert resolved["repository"]["arch"] == "sbsa"
    assert found(problems, "warning", "cpu_architecture", "no scenario of this collection runs on arm64")
    assert not [p for p in run(H100)[0] if p["variable"] == "cpu_architecture"]
