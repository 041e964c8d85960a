# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each node's GPUs are in its layout as the driver (stand-in nvidia-smi) reports them, the MIG
manager itself agrees, the service is set up to apply the layout at boot, and the GPU client that
held the GPUs was stopped and started around the change."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hosts import name

LGI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+\d+\s+(\d+)\s+(\d+):(\d+)\s*\|$")
LCI_ROW = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+MIG\s+\S+\s+\d+\s+\d+\s+\d+:\d+\s*\|$")

# What each node's layout asks (molecule.yml), GPU by GPU; GPUs left out are left as they were.
EXPECTED = {
    "mig-h100": {
        0: {"1g.10gb": 7},
        1: {"1g.10gb": 7},
        2: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
        3: None,
    },
    "mig-a100": {i: {"2g.20gb": 3, "1g.10gb": 1} for i in range(8)},
}
CONFIG = {"mig-h100": "h100-mixed", "mig-a100": "a100-balanced"}


@pytest.fixture(scope="module")
def instances(host):
    """{gpu: Counter(profile)} of the GPU instances that have a compute instance."""
    with_ci = set()
    for line in host.check_output("nvidia-smi mig -lci").splitlines():
        match = LCI_ROW.match(line)
        if match:
            with_ci.add((int(match.group(1)), int(match.group(2))))
    out = {}
    for line in host.check_output("nvidia-smi mig -lgi").splitlines():
        match = LGI_ROW.match(line)
        if match and (int(match.group(1)), int(match.group(3))) in with_ci:
            out.setdefault(int(match.group(1)), Counter())[match.group(2)] += 1
    return out


def test_each_gpu_is_in_its_layout(host, instances):
    modes = dict(
        line.split(", ", 1)
        for line in host.check_output(
            "nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader"
        ).splitlines()
    )
    for gpu, wanted in EXPECTED[name(host)].items():
        if wanted is None:
            assert modes[str(gpu)] == "Disabled" and gpu not in instances, gpu
        else:
            assert modes[str(gpu)] == "Enabled", gpu
            assert instances.get(gpu) == Counter(wanted), gpu
    named = set(EXPECTED[name(host)])
    assert {gpu for gpu, mode in modes.items() if int(gpu) not in named} == {
        gpu for gpu, mode in modes.items() if int(gpu) not in named and mode == "Disabled"
    }


def test_the_mig_manager_agrees_that_its_config_is_applied(host):
    config = CONFIG[name(host)]
    result = host.run(f"nvidia-mig-parted assert -f /etc/nvidia-mig-manager/gpuops-config.yaml -c {config}")
    assert result.rc == 0, result.stderr
    # The other config in the file, MIG off everywhere, is not what the GPUs are in.
    other = host.run("nvidia-mig-parted assert -f /etc/nvidia-mig-manager/gpuops-config.yaml -c all-disabled")
    assert other.rc == 1


def test_the_service_applies_the_layout_at_boot(host):
    service = host.service("nvidia-mig-manager.service")
    assert service.is_enabled
    environment = host.check_output("systemctl show -p Environment --value nvidia-mig-manager.service")
    assert f"MIG_PARTED_SELECTED_CONFIG={CONFIG[name(host)]}" in environment
    assert "MIG_PARTED_HOOKS_FILE=/etc/nvidia-mig-manager/gpuops-hooks.yaml" in environment
    # Its last run (the apply) ended well.
    assert host.check_output("systemctl show -p Result --value nvidia-mig-manager.service") == "success"


def test_the_package_is_the_verified_release_and_held(host):
    assert host.package("nvidia-mig-manager").version == "0.15.0-1"
    assert "nvidia-mig-manager" in host.check_output("apt-mark showhold").split()


def test_the_gpu_client_was_stopped_and_started_around_the_change(host):
    before = host.file("/var/tmp/dcgm-invocation").content_string.strip()
    now = host.check_output("systemctl show -p InvocationID --value nvidia-dcgm.service")
    assert host.service("nvidia-dcgm.service").is_running
    assert now and now != before
    assert not host.file("/run/gpuops-mig-stopped").exists
