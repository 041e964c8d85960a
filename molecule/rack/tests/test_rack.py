# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's topology from the hardware on Debian 13's slurmctld 24.11: the two GB200 trays of one
rack's NVLink domain are one block, a two-node job lands in it, and the node outside every block
runs the jobs of its own partition."""

from __future__ import annotations

import re

import pytest
import testinfra
from hosts import name
from slurm_checks import assert_idle_with_gres

CONTROLLER = "rack-ctl"
# The block's name: nvl_, the cluster UUID's first eight hex digits, the clique (molecule.yml).
BLOCK = "nvl_5d1c0a9e_32766"


def controller(host):
    if name(host) != CONTROLLER:
        pytest.skip("checked on the controller")


def test_the_trays_register_with_their_gpus_and_the_node_outside_with_its_own(host):
    controller(host)
    assert_idle_with_gres(host, {"rack-t1": "gpu:gb200:4", "rack-t2": "gpu:gb200:4", "rack-x": "gpu:l40s:4"})


def test_slurmctld_takes_the_racks_trays_as_one_block(host):
    controller(host)
    config = host.check_output("scontrol show config")
    assert re.search(r"^TopologyPlugin\s+= topology/block$", config, re.M)
    topology = host.check_output("scontrol show topology").splitlines()
    assert len(topology) == 1, topology
    assert re.match(rf"^BlockName={BLOCK} BlockIndex=0 Nodes=rack-t\[1-2\] BlockSize=2$", topology[0]), topology


def test_every_node_that_reads_its_own_files_has_the_controllers_topology_conf(host):
    """The nodes keep their own slurm.conf here (not config-less): the same topology.conf as the
    controller's, or slurmd and slurmctld would disagree on the cluster's shape."""
    ours = host.check_output("sha256sum /etc/slurm/topology.conf").split()[0]
    inventory = host.backend.ansible_inventory
    theirs = testinfra.get_host(f"ansible://{CONTROLLER}", ansible_inventory=inventory)
    assert ours == theirs.check_output("sha256sum /etc/slurm/topology.conf").split()[0]
    assert f"BlockName={BLOCK} Nodes=rack-t[1-2]" in host.file("/etc/slurm/topology.conf").content_string


def test_a_two_node_job_lands_in_the_block_and_the_node_outside_runs_its_own_partitions(host):
    controller(host)
    assert_idle_with_gres(host, {"rack-t1": "gpu:gb200:4", "rack-t2": "gpu:gb200:4", "rack-x": "gpu:l40s:4"})
    ran = host.check_output("timeout 120 srun --nodes=2 --partition=nvl72 --segment=2 hostname")
    assert sorted(ran.split()) == ["rack-t1", "rack-t2"]
    alone = host.check_output("timeout 120 srun --nodes=1 --partition=pcie hostname")
    assert alone.split() == ["rack-x"]


def test_each_job_would_get_its_imex_channel_and_slurmd_says_why_it_has_none_here(host):
    """SwitchType=switch/nvidia_imex (the cluster has NVLink blocks, Debian 13's Slurm has the plugin):
    on a real tray slurmd creates each job's IMEX channel; here the stand-in driver has no
    nvidia-caps-imex-channels device, and the real plugin says it stays off."""
    if name(host) == CONTROLLER:
        config = host.check_output("scontrol show config")
        assert re.search(r"^SwitchType\s+= switch/nvidia_imex$", config, re.M)
    elif name(host) == "rack-t1":
        log = host.file("/var/log/slurm/slurmd.log").content_string
        assert "nvidia-caps-imex-channels major device not found, plugin disabled" in log
    else:
        pytest.skip("checked on the controller and one tray")
