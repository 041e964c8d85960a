# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sound stacks: what preflight resolved, and that it installed nothing."""

from __future__ import annotations

import json

from preflight_common import headers_available, platform, stack_packages

testinfra_hosts = ["pf-h100", "pf-b200"]


def names(resolved, component):
    return [p["name"] for p in resolved["packages"][component]]


def report(host):
    return json.loads(host.file("/var/tmp/preflight.json").content_string)


def test_preflight_installed_nothing(host):
    assert stack_packages(host) == []


def test_sound_stack_resolves_for_the_hardware(host):
    name = host.backend.get_hostname()
    data = report(host)
    resolved, problems = data["resolved"], data["problems"]
    assert resolved["kernel_module"] == "open"
    assert resolved["driver"]["branch"] == "580" and resolved["driver"]["action"] == "install"
    assert resolved["fabricmanager"]["required"] is True
    assert names(resolved, "driver") == ["nvidia-open-580"]
    assert names(resolved, "fabricmanager") == ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]
    assert names(resolved, "cuda") == ["cuda-toolkit-12-8", "cuda-toolkit-13-0"]
    assert resolved["cuda"]["default"] == "12.8"
    assert names(resolved, "cudnn") == ["libcudnn9-cuda-12", "libcudnn9-dev-cuda-12"]
    assert [p["version"] for p in resolved["packages"]["nccl"]] == ["2.26.5-1+cuda12.8"] * 2
    assert names(resolved, "dcgm") == ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda13"]
    assert resolved["nvlsm"]["required"] is (name == "pf-b200")
    folder, tested = platform(host)
    assert resolved["repository"] == {"family": "apt", "distribution": folder, "arch": "x86_64"}
    assert all(p["severity"] == "warning" for p in problems)
    header_warnings = [p for p in problems if p["variable"] == "preflight_kernel_headers"]
    assert len(header_warnings) == (0 if headers_available(host) else 1)
    # A platform no scenario of the collection calls tested is named in a warning.
    platform_warnings = [p for p in problems if p["variable"] == "distribution"]
    assert len(platform_warnings) == (0 if tested else 1)
    assert len(problems) == len(header_warnings) + len(platform_warnings)
