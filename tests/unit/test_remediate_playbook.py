# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/remediate.yml, the repair ladder's third rung, through ansible-playbook against real
Redfish BMCs (sushy-tools' emulator, its fake driver, over TLS with basic authentication) with
community.general's real redfish modules, and a fake Slurm (sinfo and scontrol over a model of the
fleet that logs each call). The emulator tells the harness when it has powered a system back on
(its external notifier); the harness then does what the node's boot would: slurmd registers on a
new boot (a new BootTime, answering again, still drained)."""

from __future__ import annotations

import http.server
import importlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import ROOT

if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():
    import bcrypt  # sushy-tools (requirements.txt) brings it: in the project's venv, a failure, never a skip

    importlib.import_module("sushy_tools")
else:  # make core-matrix's venvs, which hold the unit tests' packages only
    pytest.importorskip("sushy_tools")
    bcrypt = pytest.importorskip("bcrypt")

PASSWORD = "bmc-secret-7f3a9"
FAKE_SLURM = r"""#!{python}
import json, os, sys, time
model = os.path.join(os.environ["FAKE_SLURM"], "nodes.json")
nodes = json.load(open(model))
tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
with open(os.path.join(os.environ["FAKE_SLURM"], "calls"), "a") as log:
    log.write(json.dumps([tool] + args) + "\n")
if tool == "sinfo" and any(arg.startswith("--Format=") for arg in args):
    for name, node in nodes.items():
        print(f"{{name}}|{{node.get('comment') or '(null)'}}")
elif tool == "sinfo":
    for name, node in nodes.items():
        print(f"{{name}}|{{node['state']}}|{{node['reason'] or 'none'}}")
elif args[:3] == ["--oneliner", "show", "node"]:
    node = nodes[args[3]]
    flags = {{"down*": "DOWN+DRAIN+NOT_RESPONDING", "drain": "IDLE+DRAIN", "idle": "IDLE"}}[node["state"]]
    print(f"NodeName={{args[3]}} State={{flags}} BootTime={{node['boot']}} Reason={{node['reason']}} [root@x]")
elif args[0] == "update" and "Reason" not in dict(word.partition("=")[::2] for word in args[1:]):
    fields = dict(word.partition("=")[::2] for word in args[1:])
    for name in fields["NodeName"].split(","):
        nodes[name]["comment"] = fields["Comment"]
    json.dump(nodes, open(model + ".tmp", "w"))
    os.replace(model + ".tmp", model)
elif args[0] == "update":
    fields = dict(word.partition("=")[::2] for word in args[1:])
    node = nodes[fields["NodeName"]]
    node["reason"] = fields["Reason"]
    node["state"] = "down*" if node["state"] == "down*" else "drain"
    json.dump(nodes, open(model + ".tmp", "w"))
    os.replace(model + ".tmp", model)
"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Fleet:
    """The fake Slurm's model, the emulated BMCs, and the listener that boots a node once its BMC has
    powered it on again."""

    def __init__(self, tmp_path, nodes):
        self.tmp = tmp_path
        self.model = tmp_path / "nodes.json"
        self.model.write_text(json.dumps(nodes))
        (tmp_path / "bin").mkdir()
        for tool in ("sinfo", "scontrol"):
            (tmp_path / "bin" / tool).write_text(FAKE_SLURM.format(python=sys.executable))
            (tmp_path / "bin" / tool).chmod(0o755)
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tmp_path / "bmc.key"),
             "-out", str(tmp_path / "bmc.pem")],
            check=True, capture_output=True,
        )  # fmt: skip
        digest = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        (tmp_path / "htpasswd").write_text(f"admin:{digest}\n")
        self.powered_on, self.emulators = [], []
        self.listener = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.listener.serve_forever, daemon=True).start()

    def _handler(self):
        fleet = self

        class Notified(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):
                system = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if system.get("power_state") == "On" and not system.get("pending_power"):
                    fleet.boot(system["name"])
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args):
                return

        return Notified

    def boot(self, name):
        """The node boots: slurmd registers on a new boot, answering, still drained (its reason kept)."""
        self.powered_on.append(name)
        nodes = json.loads(self.model.read_text())
        nodes[name].update(state="drain", boot=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 60)))
        self.model.with_suffix(".boot").write_text(json.dumps(nodes))
        os.replace(self.model.with_suffix(".boot"), self.model)

    def bmc(self, name):
        """A BMC for node ``name``: its Redfish address."""
        port = free_port()
        config = self.tmp / f"sushy-{name}.conf"
        config.write_text(
            f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {port}\n"
            f"SUSHY_EMULATOR_SSL_CERT = '{self.tmp / 'bmc.pem'}'\nSUSHY_EMULATOR_SSL_KEY = '{self.tmp / 'bmc.key'}'\n"
            f"SUSHY_EMULATOR_AUTH_FILE = '{self.tmp / 'htpasswd'}'\n"
            f"SUSHY_EMULATOR_STATE_DIR = '{self.tmp / ('state-' + name)}'\n"
            f"EXTERNAL_NOTIFICATION_URL = 'http://127.0.0.1:{self.listener.server_address[1]}/'\n"
            f"SUSHY_EMULATOR_FAKE_SYSTEMS = [{{'uuid': '{uuid.uuid4()}', 'name': '{name}', 'power_state': 'On',"
            f" 'external_notifier': True, 'nics': [{{'mac': '00:5c:52:31:3a:9c', 'ip': '192.0.2.10'}}]}}]\n"
        )
        process = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "sushy-emulator"), "--config", str(config), "--fake"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.emulators.append(process)
        for _attempt in range(100):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return f"127.0.0.1:{port}"
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"sushy-emulator for {name} did not listen on {port}")

    def close(self):
        for process in self.emulators:
            process.terminate()
            process.wait(timeout=10)
        self.listener.shutdown()

    def nodes(self):
        return json.loads(self.model.read_text())

    def calls(self):
        path = self.tmp / "calls"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def run(self, bmcs, *extra, check=False):
        inventory = {
            "all": {
                "hosts": {
                    "ctl": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                    **{
                        name: {
                            **({"gpuops_bmc_address": address} if address else {}),
                            "gpuops_bmc_username": "admin",
                            "gpuops_bmc_password": PASSWORD,
                            "gpuops_bmc_ca_path": str(self.tmp / "bmc.pem"),
                        }
                        for name, address in bmcs.items()
                    },
                },
                "children": {"slurm_controller": {"hosts": {"ctl": {}}}},
            }
        }
        (self.tmp / "inventory.json").write_text(json.dumps(inventory))
        env = dict(
            os.environ,
            ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
            ANSIBLE_NOCOLOR="1",
            FAKE_SLURM=str(self.tmp),
            PATH=f"{self.tmp / 'bin'}:{os.environ['PATH']}",
        )
        argv = [
            str(ROOT / ".venv" / "bin" / "ansible-playbook"),
            str(ROOT / "playbooks" / "remediate.yml"),
            "-i", str(self.tmp / "inventory.json"),
            "-e", json.dumps({"remediate_poll_seconds": 1, "remediate_boot_timeout": 20}),
            *extra,
        ]  # fmt: skip
        if check:
            argv.append("--check")
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)
        return done.returncode, done.stdout + done.stderr


@pytest.fixture
def fleet(tmp_path):
    made = []

    def make(nodes):
        made.append(Fleet(tmp_path, nodes))
        return made[0]

    yield make
    for each in made:
        each.close()


BOOT = "2026-12-01T08:00:00"
TIMED_OUT = "gpuops-health: reboot GPU0, xid GPU0 : reboot timed out"


def test_hung_and_owed_nodes_are_power_cycled_a_dead_bmc_quarantines_and_others_are_left(fleet):
    cluster = fleet({
        "gpu-a": {"state": "down*", "reason": TIMED_OUT, "boot": BOOT},
        "gpu-b": {"state": "drain", "reason": "gpuops-health: power node, xid GPU1", "boot": BOOT},
        "gpu-c": {"state": "drain", "reason": "cable check", "boot": BOOT},
        "gpu-d": {"state": "idle", "reason": "", "boot": BOOT},
        "gpu-e": {"state": "down*", "reason": TIMED_OUT, "boot": BOOT},
    })  # fmt: skip
    dead = f"127.0.0.1:{free_port()}"  # a BMC that does not answer
    bmcs = {"gpu-a": cluster.bmc("gpu-a"), "gpu-b": cluster.bmc("gpu-b"), "gpu-c": None, "gpu-e": dead}
    rc, out = cluster.run(bmcs, "-e", "remediate_budget_percent=100")  # five nodes: 10 % would allow one
    nodes = cluster.nodes()
    # The BMCs carried out the restart and reported the systems on; the nodes came back on a new boot,
    # drained still, for their own health check to resume on proof.
    assert sorted(cluster.powered_on) == ["gpu-a", "gpu-b"], out[-3000:]
    for name, was in (("gpu-a", TIMED_OUT), ("gpu-b", "gpuops-health: power node, xid GPU1")):
        assert nodes[name]["state"] == "drain" and nodes[name]["boot"] != BOOT
        assert nodes[name]["reason"] == f"{was} : power cycle (remediate.yml)"
    # A BMC that does not answer: quarantined with the reason, and the run fails naming it.
    assert nodes["gpu-e"]["reason"].startswith("gpuops-remediate: quarantined: its BMC did not power-cycle it (")
    assert rc != 0 and "Quarantined (drained, a person's now): gpu-e: its BMC did not power-cycle it" in out
    # A person's drain and a node in service are never touched.
    assert nodes["gpu-c"] == {"state": "drain", "reason": "cable check", "boot": BOOT}
    assert nodes["gpu-d"]["state"] == "idle"
    updated = {call[2] for call in cluster.calls() if call[:2] == ["scontrol", "update"]}
    assert updated == {"NodeName=gpu-a", "NodeName=gpu-b", "NodeName=gpu-e"}
    assert PASSWORD not in out


def test_check_mode_plans_within_the_budget_and_changes_nothing(fleet):
    cluster = fleet({
        "gpu-a": {"state": "down*", "reason": TIMED_OUT, "boot": BOOT},
        "gpu-b": {"state": "drain", "reason": "gpuops-health: power node, xid GPU1", "boot": BOOT},
    })  # fmt: skip
    rc, out = cluster.run({"gpu-a": "192.0.2.1:443", "gpu-b": "192.0.2.2:443"}, "-e", "remediate_budget_nodes=1",
                          check=True)  # fmt: skip
    assert rc == 0, out[-3000:]
    assert "gpu-a: power_cycle: down or not responding" in out
    assert "gpu-b: refused: the blast-radius budget allows 1 power cycle(s) a run" in out
    assert [call for call in cluster.calls() if call[0] != "sinfo"] == []


def test_a_person_reopens_the_latched_budget_and_their_own_comments_stay(fleet):
    latch = "gpuops: budget spent 2026-12-04T10:00:00Z (gpu-b refused, 1 of 1 out)"
    cluster = fleet({
        "gpu-a": {"state": "idle", "reason": "", "boot": BOOT, "comment": "gpuops: taken out 2026-12-04T09:59:00Z"},
        "gpu-b": {"state": "idle", "reason": "", "boot": BOOT, "comment": latch},
        "gpu-c": {"state": "idle", "reason": "", "boot": BOOT, "comment": "RMA 4711 open"},
        "gpu-d": {"state": "idle", "reason": "", "boot": BOOT},
    })  # fmt: skip
    rc, out = cluster.run({}, "-e", "remediate_reopen_budget=true", check=True)
    assert rc == 0 and f"The budget was latched by gpu-b: {latch}; check mode: nothing cleared." in " ".join(
        out.split()
    ), out[-3000:]
    assert [call for call in cluster.calls() if call[0] != "sinfo"] == []  # check mode changes nothing
    rc, out = cluster.run({}, "-e", "remediate_reopen_budget=true")
    assert rc == 0 and "its records are cleared." in " ".join(out.split()), out[-3000:]
    assert [call[1:] for call in cluster.calls() if call[0] == "scontrol"] == [
        ["update", "NodeName=gpu-a,gpu-b", "Comment="]
    ]
    nodes = cluster.nodes()
    assert [nodes[n].get("comment") for n in ("gpu-a", "gpu-b", "gpu-c")] == ["", "", "RMA 4711 open"]
    # Without remediate_reopen_budget (the rulebook's run), the Comments are not even read.
    before = len(cluster.calls())
    rc, out = cluster.run({})
    assert rc == 0 and not any("--Format=" in " ".join(c) for c in cluster.calls()[before:]), out[-3000:]


@pytest.mark.parametrize(
    ("bmcs", "extra", "message"),
    [
        ({"gpu-a": None}, [], "gpu-a is to be power-cycled (down or not responding"),
        ({"gpu-a": None}, [], "gives no gpuops_bmc_address"),
        ({"gpu-a": "192.0.2.1:443"}, ["-e", '{"remediate_nodes": ["gpu-z"]}'], "gpu-z is not a node Slurm knows"),
        ({"gpu-a": "192.0.2.1:443"}, ["-e", "remediate_budget_nodes=0"], "remediate_budget_nodes is 0"),
        ({"gpu-a": "192.0.2.1:443"}, ["-e", '{"remediate_nodes": "gpu-a"}'], "remediate_nodes must be a list"),
        ({"gpu-a": "192.0.2.1:443"}, ["-e", "remediate_reopen_budget=maybe"], "remediate_reopen_budget (maybe) true"),
    ],
)
def test_bad_settings_are_refused_before_any_change(fleet, bmcs, extra, message):
    cluster = fleet({"gpu-a": {"state": "down*", "reason": TIMED_OUT, "boot": BOOT}})
    rc, out = cluster.run(bmcs, *extra)
    assert rc != 0 and message in " ".join(out.split()), out[-3000:]
    assert [call for call in cluster.calls() if call[0] != "sinfo"] == []
