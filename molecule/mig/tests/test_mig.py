# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each node's GPUs are in its layout as the driver (stand-in nvidia-smi) reports them, the MIG
manager itself agrees, the service is set up to apply the layout at boot, and the GPU client that
held the GPUs was stopped and started around the change. Debian's real Slurm hands MIG slices to
jobs by type, refuses a type the node lacks, and took mig-a100's new layout (side effect) only
after the job that held one of its slices had ended."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hosts import name
from slurm_checks import assert_idle_with_gres

LGI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+\d+\s+(\d+)\s+(\d+):(\d+)\s*\|$")
LCI_ROW = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+MIG\s+\S+\s+\d+\s+\d+\s+\d+:\d+\s*\|$")

CONTROLLER = "mig-ctl"
# What each node's layout asks, GPU by GPU (molecule.yml; mig-a100's is the side effect's new one);
# GPUs left out are left as they were.
EXPECTED = {
    "mig-h100": {
        0: {"1g.10gb": 7},
        1: {"1g.10gb": 7},
        2: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
        3: None,
    },
    "mig-a100": {i: {"1g.10gb": 7} for i in range(8)},
}
CONFIG = {"mig-h100": "h100-mixed", "mig-a100": "a100-small"}
# The node lines' Gres: the MIG devices by type, in PCI bus order (GPU2's 2g.20gb sits at slice 0,
# before its 1g.10gb at 2 and 3 and its 3g.40gb at 4), then the whole GPUs.
GRES = {
    "mig-h100": "gpu:h100_1g.10gb:16,gpu:h100_2g.20gb:1,gpu:h100_3g.40gb:1,gpu:h100:5",
    "mig-a100": "gpu:a100_1g.10gb:56",
}


def gpu_node(host):
    if name(host) not in EXPECTED:
        pytest.skip("checked on the GPU nodes")


def controller(host):
    if name(host) != CONTROLLER:
        pytest.skip("checked on the controller")


@pytest.fixture
def instances(host):
    """{gpu: Counter(profile)} of the GPU instances that have a compute instance."""
    gpu_node(host)
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
    gpu_node(host)
    config = CONFIG[name(host)]
    result = host.run(f"nvidia-mig-parted assert -f /etc/nvidia-mig-manager/gpuops-config.yaml -c {config}")
    assert result.rc == 0, result.stderr
    # The other config in the file, MIG off everywhere, is not what the GPUs are in.
    other = host.run("nvidia-mig-parted assert -f /etc/nvidia-mig-manager/gpuops-config.yaml -c all-disabled")
    assert other.rc == 1


def test_the_service_applies_the_layout_at_boot(host):
    gpu_node(host)
    service = host.service("nvidia-mig-manager.service")
    assert service.is_enabled
    environment = host.check_output("systemctl show -p Environment --value nvidia-mig-manager.service")
    assert f"MIG_PARTED_SELECTED_CONFIG={CONFIG[name(host)]}" in environment
    assert "MIG_PARTED_HOOKS_FILE=/etc/nvidia-mig-manager/gpuops-hooks.yaml" in environment
    # Its last run (the apply) ended well.
    assert host.check_output("systemctl show -p Result --value nvidia-mig-manager.service") == "success"


def test_the_package_is_the_verified_release_and_held(host):
    gpu_node(host)
    assert host.package("nvidia-mig-manager").version == "0.15.0-1"
    assert "nvidia-mig-manager" in host.check_output("apt-mark showhold").split()


def test_the_gpu_client_was_stopped_and_started_around_the_change(host):
    gpu_node(host)
    before = host.file("/var/tmp/dcgm-invocation").content_string.strip()
    now = host.check_output("systemctl show -p InvocationID --value nvidia-dcgm.service")
    assert host.service("nvidia-dcgm.service").is_running
    assert now and now != before
    assert not host.file("/run/gpuops-mig-stopped").exists


def test_nodes_are_idle_with_their_mig_devices(host):
    controller(host)
    assert_idle_with_gres(host, GRES)
    for node, gres in GRES.items():
        line = host.check_output(f"scontrol --oneliner show node {node}")
        assert re.sub(r"\([^)]*\)", "", re.search(r"Gres=(\S+)", line).group(1)) == gres


def test_gres_conf_has_a_line_per_mig_device_with_its_caps_files(host):
    gpu_node(host)
    lines = [line for line in host.file("/etc/slurm/gres.conf").content_string.splitlines() if "Name=gpu" in line]
    mine = [line for line in lines if line.startswith(f"NodeName={name(host)} ")]
    mig_lines = [line for line in mine if "MultipleFiles=" in line]
    assert len(mig_lines) == (18 if name(host) == "mig-h100" else 56)
    for line in mig_lines:
        files = re.search(r"MultipleFiles=(\S+)", line).group(1).split(",")
        assert len(files) == 3 and files[0].startswith("/dev/nvidia")
        for path in files:
            assert host.run(f"test -c {path}").rc == 0, f"{path} is not a character device"
    assert host.file("/etc/slurm/cgroup.conf").contains("^ConstrainDevices=yes")


@pytest.mark.parametrize(
    ("node", "gres"),
    [("mig-h100", "h100_1g.10gb"), ("mig-h100", "h100_3g.40gb"), ("mig-h100", "h100"), ("mig-a100", "a100_1g.10gb")],
)
def test_a_job_gets_the_slice_it_asks_for(host, node, gres):
    """The job's own view (scontrol inside it): one GRES of the asked type, on the asked node."""
    controller(host)
    out = host.check_output(
        f"srun --immediate=60 -w {node} --gres=gpu:{gres}:1 sh -c "
        "'scontrol --details show job $SLURM_JOB_ID | grep -o \"GRES=[^ ]*\"; echo visible=$CUDA_VISIBLE_DEVICES'"
    )
    allocated = re.search(r"GRES=gpu:([^:(]+):1\(IDX:(\d+)\)", out)
    assert allocated, out
    assert allocated.group(1) == gres
    assert re.search(r"visible=\d+$", out), out


def test_a_slice_the_node_lacks_is_refused(host):
    controller(host)
    result = host.run("srun --immediate=10 -w mig-h100 --gres=gpu:h100_4g.40gb:1 true")
    assert result.rc != 0
    assert "Requested node configuration is not available" in result.stderr


def test_the_node_was_drained_for_the_layout_change_while_its_job_ran_to_its_end(host):
    """The side effect submitted a 15 s job on an a100_1g.10gb slice, then changed mig-a100's layout:
    slurmctld drained the node with the mig role's reason and the job completed."""
    controller(host)
    job = host.file("/var/tmp/side-job.id").content_string.strip()
    assert "JobState=COMPLETED" in host.check_output(f"scontrol --oneliner show job {job}")
    log = host.file("/var/log/slurm/slurmctld.log").content_string
    assert re.search(r"node mig-a100 reason set to: gpuops mig layout a100-small", log), "no drain in the log"


def test_the_layout_changed_only_after_the_job_ended(host):
    """On mig-a100: the job printed its start and end (15 s, uncut), and the MIG manager's apply
    started after the end."""
    if name(host) != "mig-a100":
        pytest.skip("the node of the side effect's job")
    words = host.file("/var/tmp/side-job.out").content_string.split()
    started, ended = int(words[words.index("start") + 1]), int(words[words.index("end") + 1])
    assert ended - started >= 15
    assert int(host.file("/var/tmp/layout-applied-at").content_string) >= ended
