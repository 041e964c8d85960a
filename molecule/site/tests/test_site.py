# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml end to end on the demo cluster: every layer where the hardware calls for it, from the
pinned stack, and a working Slurm cluster with accounting and GPU monitoring on top."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from hosts import name
from slurm_checks import accounted_gpu_job, assert_idle_with_gres

HEAD = "demo-head"
GPUS = {"demo-h100": 8, "demo-l40s": 4}
GRES = {"demo-h100": "gpu:h100:8", "demo-l40s": "gpu:l40s:4"}


def gpu_node(host):
    if name(host) not in GPUS:
        pytest.skip("GPU nodes")


def head(host):
    if name(host) != HEAD:
        pytest.skip("the head node")


def test_driver_at_the_pinned_version_with_fabric_manager_only_where_nvswitches_are(host):
    gpu_node(host)
    versions = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()
    assert versions == ["580.95.05"] * GPUS[name(host)]
    fabricmanager = host.package("nvidia-fabricmanager-580")
    if name(host) == "demo-h100":  # dgx-h100: 4 NVSwitches
        assert fabricmanager.version.startswith("580.95.05")
        assert host.service("nvidia-fabricmanager").is_running
    else:
        assert not fabricmanager.is_installed


def test_head_node_gets_no_gpu_stack(host):
    head(host)
    for package in ("nvidia-driver-580-open", "cuda-toolkit-12-8", "libnccl2", "datacenter-gpu-manager-4-core"):
        assert not host.package(package).is_installed, package


def test_cuda_cudnn_nccl_from_the_pinned_stack(host):
    gpu_node(host)
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.8"
    assert host.package("libcudnn9-cuda-12").version.startswith("9.10.2.21")
    assert host.package("libnccl2").version == "2.26.5-1+cuda12.8"
    held = set(host.check_output("apt-mark showhold").split())
    assert {"libnccl2", "libcudnn9-cuda-12"} <= held
    assert "NCCL_IB_HCA=" in host.file("/etc/nccl.conf").content_string


def test_rdma_stack_before_the_driver(host):
    gpu_node(host)
    assert host.package("doca-ofed").is_installed


def test_container_toolkit_and_cdi_spec(host):
    gpu_node(host)
    assert host.package("nvidia-container-toolkit").version.startswith("1.18.0")


def test_dcgm_exporter_serves_every_gpu(host):
    gpu_node(host)
    assert host.service("nvidia-dcgm").is_running
    metrics = host.check_output("curl -fsS http://127.0.0.1:9400/metrics")
    temps = [line for line in metrics.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    assert len(temps) == GPUS[name(host)]


def test_prometheus_on_the_head_scrapes_both_gpu_nodes(host):
    head(host)
    # Until every GPU node's exporter has been scraped once (5 s apart); a slow machine needs longer.
    expected = str(sum(GPUS.values()))
    deadline = time.monotonic() + 180
    while True:
        out = host.check_output("curl -fsS 'http://127.0.0.1:9090/api/v1/query?query=count(DCGM_FI_DEV_GPU_TEMP)'")
        counted = [row["value"][1] for row in json.loads(out)["data"]["result"]]
        if counted == [expected] or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert counted == [expected]


def test_sharp_am_on_its_host(host):
    if name(host) != "demo-h100":
        pytest.skip("the sharp_am host")
    assert host.service("sharp_am").is_running


def test_slurm_nodes_idle_with_their_gpus(host):
    head(host)
    assert_idle_with_gres(host, GRES)


def test_jobs_run_across_nodes_and_are_accounted_with_their_gpus(host):
    head(host)
    out = host.check_output("srun --immediate=120 --nodes=2 --ntasks-per-node=1 hostname")
    assert sorted(out.split()) == sorted(GPUS)
    record = accounted_gpu_job(host, "gpu:h100:2", "site-gpu")
    assert (record["JobName"], record["State"], record["NodeList"]) == ("site-gpu", "COMPLETED", "demo-h100")
    assert "gres/gpu:h100=2" in record["AllocTRES"]


def test_demo_summary_reads_the_cluster_back(host):
    """The side effect ran make demo's summary playbook; its text has every part a person reads."""
    head(host)
    text = Path(os.environ["DEMO_SUMMARY"]).read_text()
    assert "8 x NVIDIA H100 80GB HBM3 (hopper, compute 9.0)" in text
    assert "4 x NVIDIA L40S (ada, compute 8.9)" in text
    assert re.search(r"^  0 +81559 MiB +0 +0-55,112-167 +7 +mlx5_0 \(PIX\)$", text, re.M)
    assert re.search(r"^ +nvidia-driver-580-open +580\.95\.05-1  \(held\)$", text, re.M)
    assert re.search(r"^demo-h100 +gpu\* +idle +224 ", text, re.M)
    assert "NodeName=demo-h100 Name=gpu Type=h100 File=/dev/nvidia4 Cores=56-111" in text
    assert "demo-h100: CUDA_VISIBLE_DEVICES=0,1" in text
    assert re.search(r"^\d+\|COMPLETED\|demo-h100\|.*gres/gpu:h100=2", text, re.M)
    assert "Prometheus on demo-head: 12 GPUs report DCGM metrics" in text
