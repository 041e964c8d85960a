# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The distribution's own Slurm, set up by the slurm role alone: the daemons that run are the
packaged release, slurmctld took the GPU node as its profile describes it, and a job gets the GPUs
it asks for."""

from __future__ import annotations

import re

import pytest
import testinfra
from hosts import name
from slurm_checks import assert_idle_with_gres

CONTROLLER = "slurm-head"
NODE = "slurm-gpu"


def controller(host):
    if name(host) != CONTROLLER:
        pytest.skip("checked on the controller")


def other(host, node):
    return testinfra.get_host(f"ansible://{node}", ansible_inventory=host.backend.ansible_inventory)


def test_the_running_daemons_are_the_distributions_release(host):
    """slurmctld and slurmd report the release of the packages installed (Debian 12: 22.05), so the
    scenario tests the release its platform ships."""
    controller(host)
    packaged = host.check_output("dpkg-query -W -f '${Version}' slurmctld")
    upstream = re.match(r"^(?:\d+:)?(\d+\.\d+\.\d+)", packaged).group(1)
    config = host.check_output("scontrol show config")
    assert re.search(rf"^SLURM_VERSION\s+= {re.escape(upstream)}$", config, re.M), config.splitlines()[:3]
    node = other(host, NODE)
    assert node.check_output("dpkg-query -W -f '${Version}' slurmd") == packaged
    detail = host.check_output(f"scontrol show node {NODE}")
    assert re.search(rf"\bVersion={re.escape(upstream)}\b", detail), detail


def test_one_private_munge_key_on_both_nodes(host):
    key = host.file("/etc/munge/munge.key")
    assert (key.user, key.group, key.mode) == ("munge", "munge", 0o400)
    assert host.service("munge").is_running
    digest = host.check_output("sha256sum /etc/munge/munge.key").split()[0]
    assert digest == other(host, CONTROLLER).check_output("sha256sum /etc/munge/munge.key").split()[0]


def test_the_gpu_node_is_idle_with_its_gpus(host):
    controller(host)
    assert_idle_with_gres(host, {NODE: "gpu:l40s:4"}, partition="gpu")


def test_slurmctld_took_the_node_as_its_profile_describes_it(host):
    """pcie-l40s: 2 sockets of 32 cores, 2 threads each (its lscpu), 4 L40S (its nvidia-smi)."""
    controller(host)
    detail = host.check_output(f"scontrol show node {NODE}")
    fields = dict(re.findall(r"(\w+)=(\S+)", detail))
    assert (fields["CPUTot"], fields["Sockets"], fields["CoresPerSocket"], fields["ThreadsPerCore"]) == (
        "128",
        "2",
        "32",
        "2",
    )
    assert re.sub(r"\([^)]*\)", "", fields["Gres"]) == "gpu:l40s:4"


def test_a_job_gets_the_gpus_it_asks_for(host):
    controller(host)
    out = host.check_output("srun --immediate=60 --gres=gpu:l40s:2 printenv CUDA_VISIBLE_DEVICES SLURMD_NODENAME")
    visible, node = out.split()
    assert node == NODE
    assert len(visible.split(",")) == 2


def test_a_job_asking_for_more_gpus_than_the_node_has_is_refused(host):
    controller(host)
    result = host.run("srun --immediate=10 --gres=gpu:l40s:5 true")
    assert result.rc != 0
    assert "Requested node configuration is not available" in result.stderr
