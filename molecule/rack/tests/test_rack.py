# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's topology from the hardware on Debian 13's slurmctld 24.11: the two GB200 trays of one
rack's NVLink domain are one block, a two-node job lands in it, and the node outside every block
runs the jobs of its own partition. IMEX on the trays (the stand-in daemon): each tray lists the
domain from the fleet state, the daemons say the domain is UP, and a stopped peer is named."""

from __future__ import annotations

import json
import re
import time

import pytest
import testinfra
from ansible_collections.gpuops.cluster.plugins.module_utils.imex import check_records, parse_domain_status
from hosts import management_address, name
from slurm_checks import assert_idle_with_gres

CONTROLLER = "rack-ctl"
# The block's name: nvl_, the cluster UUID's first eight hex digits, the clique (molecule.yml).
BLOCK = "nvl_5d1c0a9e_32766"


TRAYS = ("rack-t1", "rack-t2")


def other(host, node):
    return testinfra.get_host(f"ansible://{node}", ansible_inventory=host.backend.ansible_inventory)


def domain_until(host, ready, seconds=30):
    """``nvidia-imex-ctl -N -j`` on the tray until ``ready(status)`` or the time is up."""
    deadline = time.monotonic() + seconds
    while True:
        out = host.check_output("nvidia-imex-ctl -N -j")
        if ready(parse_domain_status(out)) or time.monotonic() > deadline:
            return out
        time.sleep(1)


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


def test_each_tray_lists_the_domain_from_the_fleet_state_and_the_node_outside_runs_no_imex(host):
    if name(host) not in TRAYS:
        assert not host.file("/etc/nvidia-imex/nodes_config.cfg").exists
        assert not host.package("nvidia-imex-580").is_installed
        if name(host) == CONTROLLER:
            for tray in TRAYS:
                record = json.loads(host.file(f"/var/lib/gpuops/fleet/{tray}.json").content_string)
                assert record["sections"]["imex"]["data"]["address"] == management_address(other(host, tray))
        return
    addresses = [management_address(other(host, tray)) for tray in TRAYS]
    assert host.file("/etc/nvidia-imex/nodes_config.cfg").content_string.split() == addresses
    # The driver's version, held (apt upgrade cannot move it away from the driver).
    assert host.package("nvidia-imex-580").version.startswith("580.95.05-")
    assert "nvidia-imex-580" in host.check_output("apt-mark showhold").split()
    assert host.service("nvidia-imex").is_running and host.service("nvidia-imex").is_enabled
    assert not host.file("/etc/modprobe.d/nvidia-imex-channel0.conf").exists


def test_the_daemons_say_the_domain_is_up_and_name_a_stopped_peer(host):
    if name(host) != "rack-t1":
        pytest.skip("read from one tray, with the other's daemon stopped")
    nodes = host.file("/etc/nvidia-imex/nodes_config.cfg").content_string
    (record,) = check_records(nodes, domain_until(host, lambda status: status["status"] == "UP"))
    assert (record["verdict"], record["measured"]) == ("pass", "UP, 2/2 nodes READY"), record
    peer = other(host, "rack-t2")
    peer.run_test("systemctl stop nvidia-imex")
    try:
        lost = domain_until(host, lambda status: status["status"] != "UP")
        (record,) = check_records(nodes, lost)
        assert record["verdict"] == "fail"
        assert f"node #1 ({management_address(peer)}) is UNAVAILABLE" in record["reason"], record
    finally:
        peer.run_test("systemctl start nvidia-imex")
    (record,) = check_records(nodes, domain_until(host, lambda status: status["status"] == "UP"))
    assert record["verdict"] == "pass", record
