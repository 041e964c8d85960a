# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The repair loop's controller side for molecule/slurm_cluster, on the machine that runs Molecule:
a real Alertmanager (Debian's), the collection's rulebook in a real ansible-rulebook (Drools on the
machine's Java), and a real Redfish BMC for one node (sushy-tools' emulator, its fake driver, over
TLS with basic authentication), listening on the cluster network's gateway so that remediate.yml's
redfish modules reach it from the Slurm controller.

What stands in is the wire from the BMC to the node: when the emulator has powered the system on
again (its external notifier), this script does to the node's container what a power cycle does
that the node's checks and Slurm see: gpusim-reboot (a new boot id, the kernel log and the driver's
state empty, slurmd back reporting a new boot).

Writes ``ready.json`` in --workdir (the ports, the BMC's address and CA) once everything listens, and
``power-cycles`` (one line per node powered on again), or ``failed`` with the reason where something
did not start. Ends when ``stop`` appears there, or after
--deadline seconds, and ends what it started either way."""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path


def free_port(address):
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def listening(address, port):
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def fail(work, why):
    (work / "failed").write_text(why + "\n")
    sys.exit(f"heal_loop: {why}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--address", required=True, help="the cluster network's gateway (where the BMC listens)")
    parser.add_argument("--node", required=True, help="the Slurm node behind the BMC")
    parser.add_argument("--container", required=True, help="the node's container")
    parser.add_argument("--inventory", required=True, type=Path, help="Molecule's inventory")
    parser.add_argument("--project", required=True, type=Path, help="the collection's checkout")
    parser.add_argument("--deadline", type=int, default=600)
    args = parser.parse_args()
    # Ended from outside (a kill, Ansible's async cleanup): still end what it started (finally, below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("heal_loop: terminated"))
    # Secrets from the environment, never the command line: the BMC's password (it goes into the
    # rulebook's inventory, 0600) and the webhook's bearer token.
    args.password, args.token = os.environ["HEAL_BMC_PASSWORD"], os.environ["HEAL_WEBHOOK_TOKEN"]
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    for stale in ("stop", "failed", "ready.json"):
        (work / stale).unlink(missing_ok=True)
    venv = args.project / ".venv" / "bin"
    alertmanager = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if not alertmanager or not shutil.which("java"):
        fail(work, "needs Alertmanager (tests/scripts/registry-tools.sh installs Debian's) and Java")
    import bcrypt  # noqa: PLC0415 - sushy-tools brings it into the project's venv (run with its Python)

    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={args.address}",
         "-addext", f"subjectAltName=IP:{args.address}", "-keyout", str(work / "bmc.key"),
         "-out", str(work / "bmc.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    (work / "htpasswd").write_text(
        f"admin:{bcrypt.hashpw(args.password.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"
    )
    bmc, hook, am = free_port(args.address), free_port("127.0.0.1"), free_port("127.0.0.1")
    cycles = work / "power-cycles"
    cycles.write_text("")

    class Wire(http.server.BaseHTTPRequestHandler):
        """The emulator's external notifier: the system's new power state."""

        def do_PUT(self):
            system = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()
            if system.get("power_state") == "On" and not system.get("pending_power"):
                done = subprocess.run(
                    ["docker", "exec", args.container, "/usr/local/sbin/gpusim-reboot"],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                with cycles.open("a") as out:
                    out.write(f"{args.node} {time.time():.0f} rc={done.returncode} {done.stdout.strip()}\n")

        def log_message(self, *_args):
            return

    wire = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Wire)
    threading.Thread(target=wire.serve_forever, daemon=True).start()
    (work / "sushy.conf").write_text(
        f"SUSHY_EMULATOR_LISTEN_IP = '{args.address}'\nSUSHY_EMULATOR_LISTEN_PORT = {bmc}\n"
        f"SUSHY_EMULATOR_SSL_CERT = '{work / 'bmc.pem'}'\nSUSHY_EMULATOR_SSL_KEY = '{work / 'bmc.key'}'\n"
        f"SUSHY_EMULATOR_AUTH_FILE = '{work / 'htpasswd'}'\nSUSHY_EMULATOR_STATE_DIR = '{work / 'sushy-state'}'\n"
        f"EXTERNAL_NOTIFICATION_URL = 'http://127.0.0.1:{wire.server_address[1]}/'\n"
        f"SUSHY_EMULATOR_FAKE_SYSTEMS = [{{'uuid': '{uuid.uuid4()}', 'name': '{args.node}', 'power_state': 'On',"
        f" 'external_notifier': True, 'nics': [{{'mac': '00:5c:52:31:3a:9c', 'ip': '192.0.2.10'}}]}}]\n"
    )
    # The rulebook's inventory: Molecule's, and the node's BMC (the password a vault's in a real one).
    inventory = work / "inventory"
    inventory.mkdir(exist_ok=True)
    shutil.copy(args.inventory, inventory / "molecule.yml")
    (inventory / "bmc.yml").touch(mode=0o600)
    (inventory / "bmc.yml").write_text(
        json.dumps(
            {
                "all": {
                    "hosts": {
                        args.node: {
                            "gpuops_bmc_address": f"{args.address}:{bmc}",
                            "gpuops_bmc_username": "admin",
                            "gpuops_bmc_password": args.password,
                            "gpuops_bmc_ca_path": "/etc/gpuops/bmc-ca.pem",
                        }
                    }
                }
            }
        )
    )
    (work / "heal.vars.yml").write_text(
        json.dumps(
            {
                "heal_webhook_host": "127.0.0.1",
                "heal_webhook_port": hook,
                "heal_webhook_token": args.token,
                "remediate_poll_seconds": 2,
                "remediate_boot_timeout": 120,
            }
        )
    )
    (work / "alertmanager.yml").write_text(
        json.dumps(
            {
                "route": {
                    "receiver": "eda",
                    "group_by": ["alertname", "node"],
                    "group_wait": "1s",
                    "group_interval": "5m",
                    "repeat_interval": "4h",
                },
                "receivers": [
                    {
                        "name": "eda",
                        "webhook_configs": [
                            {
                                "url": f"http://127.0.0.1:{hook}/gpuops",
                                "http_config": {"authorization": {"type": "Bearer", "credentials": args.token}},
                                "send_resolved": False,
                            }
                        ],
                    }
                ],
            }
        )
    )
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(args.project / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(args.project / ".collections"),
        ANSIBLE_NOCOLOR="1",
        PATH=f"{venv}:{os.environ['PATH']}",
    )
    started = []

    def start(name, argv, **kwargs):
        with (work / f"{name}.log").open("w") as out:
            started.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **kwargs))

    start("sushy", [str(venv / "sushy-emulator"), "--config", str(work / "sushy.conf"), "--fake"])
    start(
        "alertmanager",
        [
            alertmanager,
            f"--config.file={work / 'alertmanager.yml'}",
            f"--storage.path={work / 'am'}",
            f"--web.listen-address=127.0.0.1:{am}",
            "--cluster.listen-address=",
        ],
    )
    start(
        "rulebook",
        [
            str(venv / "ansible-rulebook"),
            "--rulebook",
            "gpuops.cluster.heal",
            "-i",
            str(inventory),
            "--vars",
            str(work / "heal.vars.yml"),
            "-v",
        ],
        env=env,
        cwd=work,
    )
    ready_by, end = time.monotonic() + 120, time.monotonic() + args.deadline
    try:
        while not all(listening(*where) for where in (("127.0.0.1", hook), ("127.0.0.1", am), (args.address, bmc))):
            if time.monotonic() > ready_by or any(p.poll() is not None for p in started):
                fail(work, f"the rulebook, Alertmanager or the BMC did not start; see the logs in {work}")
            time.sleep(0.5)
        (work / "ready.json").write_text(
            json.dumps(
                {"alertmanager": f"http://127.0.0.1:{am}", "bmc": f"{args.address}:{bmc}", "ca": str(work / "bmc.pem")}
            )
        )
        while time.monotonic() < end and not (work / "stop").exists():
            time.sleep(1)
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        wire.shutdown()


if __name__ == "__main__":
    main()
