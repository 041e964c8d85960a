# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An impossible stack: refused with every problem named, the node untouched."""

from __future__ import annotations

from preflight_common import headers_available, platform, stack_packages

testinfra_hosts = ["pf-v100"]


def test_impossible_stack_was_refused_with_every_problem(host):
    failure = host.file("/var/tmp/preflight-failure.txt").content_string
    lines = failure.splitlines()
    assert lines[0].startswith("Preflight failed on pf-v100: ")
    variables = [line.split("] ", 1)[1].split(":", 1)[0] for line in lines[1:]]
    expected = {
        "nvidia_driver_kernel_module",
        "cuda_versions",
        "cudnn_cuda_major",
        "nccl_version",
        "dcgm_cuda_major",
        "nvidia_driver_fabricmanager_version",
        "preflight_min_free_gib",
        "host",
        "nvidia_driver_branch",  # R570's end of life, a warning
    }
    if not headers_available(host):
        expected.add("preflight_kernel_headers")
    if not platform(host)[1]:
        expected.add("distribution")
    assert set(variables) == expected
    assert all(" Fix: " in line for line in lines[1:])
    # The leftover it reported is still there: preflight changes nothing, even to fix.
    assert host.file("/etc/apt/sources.list.d/cuda-debian12-x86_64.list").exists


def test_preflight_installed_nothing(host):
    assert stack_packages(host) == []
