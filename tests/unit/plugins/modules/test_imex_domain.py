# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IMEX gate against the gpusim stand-in daemons run for real on two loopback addresses: a
domain whose two daemons connect is UP; a stopped peer and a peer with another node list are named.
Then imex_domain's own decisions on those outputs: ready, not ready within the wait, check mode
before the package."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils.imex import check_records, parse_domain_status
from ansible_collections.gpuops.cluster.plugins.modules import imex_domain
from conftest import GPUSIM
from module_harness import Node, run_module

PROGRAM = f"#!{sys.executable}\n" + (GPUSIM / "repo" / "nvidia-imex.py").read_text().split("\n", 1)[1]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Domain:
    """Two stand-in daemons on 127.0.0.1 and 127.0.0.2 (each bound to its own address, as two trays)."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.bin = tmp_path / "nvidia-imex"
        self.bin.write_text(PROGRAM.replace("@VERSION@", "580.95.05"))
        self.bin.chmod(0o755)
        (tmp_path / "nvidia-imex-ctl").symlink_to(self.bin)
        (tmp_path / "driver-version").write_text("580.95.05\n")
        self.port = free_port()
        self.nodes = tmp_path / "nodes_config.cfg"
        self.nodes.write_text("127.0.0.1\n127.0.0.2\n")
        self.daemons = {}

    def config(self, n, nodes=None):
        path = self.tmp / f"config{n}.cfg"
        path.write_text(
            f"LOG_FILE_NAME={self.tmp}/imex{n}.log\nDAEMONIZE=0\nBIND_INTERFACE_IP=127.0.0.{n}\n"
            f"SERVER_PORT={self.port}\nIMEX_NODE_CONFIG_FILE={nodes or self.nodes}\nIMEX_CMD_ENABLED=1\n"
            f"IMEX_CMD_BIND_INTERFACE_IP=127.0.0.{n}\nIMEX_CMD_PORT={self.cmd_port(n)}\n"
        )
        return path

    def cmd_port(self, n):
        if not hasattr(self, "_cmd"):
            self._cmd = {1: free_port(), 2: free_port()}
        return self._cmd[n]

    def start(self, n, nodes=None):
        env = {"PATH": "/usr/bin:/bin", "GPUSIM_DRIVER_STAMP": str(self.tmp / "driver-version")}
        self.daemons[n] = subprocess.Popen([str(self.bin), "-c", str(self.config(n, nodes))], env=env)

    def stop(self, n):
        self.daemons.pop(n).kill()

    def ctl(self, n=1):
        done = subprocess.run(
            [str(self.tmp / "nvidia-imex-ctl"), "-c", str(self.tmp / f"config{n}.cfg"), "-N", "-j"],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def until(self, predicate, seconds=15):
        deadline = time.monotonic() + seconds
        while True:
            out = self.ctl()
            if predicate(parse_domain_status(out)) or time.monotonic() > deadline:
                return out
            time.sleep(0.2)


@pytest.fixture
def domain(tmp_path):
    two = Domain(tmp_path)
    yield two
    for process in two.daemons.values():
        process.kill()


def test_two_connected_daemons_make_an_up_domain_and_a_stopped_one_is_named(domain):
    domain.start(1)
    domain.start(2)
    up = domain.until(lambda status: status["status"] == "UP")
    (record,) = check_records(domain.nodes.read_text(), up)
    assert (record["verdict"], record["measured"]) == ("pass", "UP, 2/2 nodes READY"), record
    domain.stop(2)
    lost = domain.until(lambda status: status["nodes"][0]["connections"][1] != "CONNECTED")
    (record,) = check_records(domain.nodes.read_text(), lost)
    assert record["verdict"] == "fail"
    assert "node #0 (127.0.0.1) has no connection to #1 DISCONNECTED" in record["reason"]
    assert "node #1 (127.0.0.2) is UNAVAILABLE" in record["reason"]


def test_a_peer_that_lists_other_nodes_is_a_node_map_mismatch(domain):
    three = domain.tmp / "three.cfg"
    three.write_text("127.0.0.1\n127.0.0.2\n127.0.0.3\n")
    domain.start(1)
    domain.start(2, nodes=three)
    out = domain.until(lambda status: status["nodes"][0]["connections"][1] == "NODES_MISMATCH")
    (record,) = check_records(domain.nodes.read_text(), out)
    assert "node #0 (127.0.0.1) has no connection to #1 NODES_MISMATCH" in record["reason"]


def test_without_a_daemon_the_tool_prints_the_whole_domain_down_as_the_real_one(domain):
    domain.config(1)
    status = parse_domain_status(domain.ctl())
    assert status["status"] == "DOWN"
    assert [node["status"] for node in status["nodes"]] == ["UNAVAILABLE", "UNAVAILABLE"]


def test_a_daemon_without_the_driver_or_its_own_address_refuses_to_start(domain):
    env = {"PATH": "/usr/bin:/bin", "GPUSIM_DRIVER_STAMP": str(domain.tmp / "missing")}
    done = subprocess.run(
        [str(domain.bin), "-c", str(domain.config(1))], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and "NVIDIA GPU driver" in done.stderr
    other = domain.tmp / "other.cfg"
    other.write_text("192.0.2.10\n")
    env["GPUSIM_DRIVER_STAMP"] = str(domain.tmp / "driver-version")
    config = domain.config(1, nodes=other)
    config.write_text(config.read_text().replace("BIND_INTERFACE_IP=127.0.0.1\n", "BIND_INTERFACE_IP=\n"))
    done = subprocess.run([str(domain.bin), "-c", str(config)], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "address of this node" in done.stderr


# imex_domain's decisions, on the outputs above.
def gate(monkeypatch, tmp_path, outputs, binaries=None, **args):
    nodes = tmp_path / "nodes_config.cfg"
    nodes.write_text("127.0.0.1\n127.0.0.2\n")
    node = Node(monkeypatch, {"nvidia-imex-ctl": "/usr/bin/nvidia-imex-ctl"} if binaries is None else binaries, {})
    argv = ("/usr/bin/nvidia-imex-ctl", "-c", "/etc/nvidia-imex/config.cfg", "-N", "-j")
    node.outputs[argv] = outputs
    check_mode = args.pop("check_mode", False)
    return run_module(imex_domain.main, {"nodes_config": str(nodes), **args}, check_mode=check_mode)


def test_the_gate_passes_a_ready_domain_and_fails_naming_what_is_not(monkeypatch, tmp_path, domain):
    domain.start(1)
    domain.start(2)
    up = domain.until(lambda status: status["status"] == "UP")
    done = gate(monkeypatch, tmp_path, (0, up, ""), wait=0)
    assert not done.failed and done.result["ready"] and done.result["status"] == "UP"
    assert done.result["expected"] == ["127.0.0.1", "127.0.0.2"]
    domain.stop(2)
    lost = domain.until(lambda status: status["status"] != "UP")
    done = gate(monkeypatch, tmp_path, (0, lost, ""), wait=0)
    assert done.failed and not done.result["ready"]
    assert "the IMEX domain is not ready after 0 s" in done.result["msg"]
    assert "node #1 (127.0.0.2) is UNAVAILABLE" in done.result["msg"]
    assert "SERVER_PORT" in done.result["msg"]


def test_the_gate_names_a_tool_that_fails_and_waits_only_as_told(monkeypatch, tmp_path):
    start = time.monotonic()
    done = gate(monkeypatch, tmp_path, (1, "", "Query Status failed."), wait=1)
    assert done.failed and "`nvidia-imex-ctl -N -j` exited 1: Query Status failed." in done.result["msg"]
    assert 1 <= time.monotonic() - start < 5


def test_check_mode_before_the_package_reports_instead_of_failing(monkeypatch, tmp_path):
    done = gate(monkeypatch, tmp_path, (0, "", ""), binaries={}, check_mode=True)
    assert not done.failed and done.result["ready"] is False
    assert "nvidia-imex-ctl is not installed" in done.result["problems"][0]
    done = gate(monkeypatch, tmp_path, (0, "", ""), binaries={})
    assert done.failed and "run the imex role first" in done.result["msg"]
    done = gate(monkeypatch, tmp_path, (0, "", ""), wait=-1)
    assert done.failed and "wait is -1" in done.result["msg"]
