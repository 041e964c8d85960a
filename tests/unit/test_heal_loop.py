# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The repair loop between runs, with real parts: an alert posted to a real Alertmanager (Debian's)
reaches the collection's rulebook (extensions/eda/rulebooks/heal.yml) in a real ansible-rulebook
(Drools on the machine's Java) through the collection's event source, which runs
playbooks/remediate.yml through ansible-runner; the playbook power-cycles the node through a real
Redfish BMC (sushy-tools' emulator). Slurm is the fake of test_remediate_playbook.py."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT
from test_remediate_playbook import BOOT, PASSWORD, Fleet, free_port

if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():
    importlib.import_module(
        "ansible_rulebook"
    )  # requirements.txt has it: in the project's venv, a failure, never a skip
else:  # make core-matrix's venvs, which hold the unit tests' packages only
    pytest.importorskip("ansible_rulebook")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
pytestmark = pytest.mark.skipif(
    not ALERTMANAGER or not shutil.which("java"),
    reason="needs Alertmanager (tests/scripts/registry-tools.sh installs Debian's) and Java",
)
TOKEN = "webhook-token-51c2"


def wait_for(what, check, seconds, logs):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} within {seconds} s; " + " | ".join(path.read_text()[-2500:] for path in logs if path.exists()))


def test_an_alert_reaches_the_rulebook_which_power_cycles_the_node_through_its_bmc(tmp_path):
    cluster = Fleet(tmp_path, {
        "gpu-b": {"state": "drain", "reason": "gpuops-health: power node, xid GPU1", "boot": BOOT},
        "gpu-d": {"state": "idle", "reason": "", "boot": BOOT},
    })  # fmt: skip
    processes = []
    try:
        bmcs = {"gpu-b": cluster.bmc("gpu-b"), "gpu-d": cluster.bmc("gpu-d")}
        cluster.run(bmcs, "--list-hosts")  # writes the inventory the rulebook runs the playbook with
        hook, am = free_port(), free_port()
        (tmp_path / "heal.vars.yml").write_text(
            json.dumps({
                "heal_webhook_host": "127.0.0.1",
                "heal_webhook_port": hook,
                "heal_webhook_token": TOKEN,
                "remediate_poll_seconds": 1,
                "remediate_boot_timeout": 20,
                "remediate_budget_percent": 100,
            })
        )  # fmt: skip
        (tmp_path / "alertmanager.yml").write_text(
            json.dumps({
                "route": {"receiver": "eda", "group_by": ["alertname", "node"], "group_wait": "1s",
                          "group_interval": "5m", "repeat_interval": "4h"},
                "receivers": [{"name": "eda", "webhook_configs": [{
                    "url": f"http://127.0.0.1:{hook}/gpuops",
                    "http_config": {"authorization": {"type": "Bearer", "credentials": TOKEN}},
                    "send_resolved": False,
                }]}],
            })
        )  # fmt: skip
        env = dict(
            os.environ,
            ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
            ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"),
            ANSIBLE_NOCOLOR="1",
            FAKE_SLURM=str(tmp_path),
            PATH=f"{tmp_path / 'bin'}:{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
        )
        logs = [tmp_path / "rulebook.log", tmp_path / "alertmanager.log"]
        with open(logs[0], "w") as out:
            processes.append(
                subprocess.Popen(
                    [str(ROOT / ".venv" / "bin" / "ansible-rulebook"), "--rulebook", "gpuops.cluster.heal",
                     "-i", str(tmp_path / "inventory.json"), "--vars", str(tmp_path / "heal.vars.yml"), "-v"],
                    stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                )
            )  # fmt: skip
        with open(logs[1], "w") as out:
            processes.append(
                subprocess.Popen(
                    [ALERTMANAGER, f"--config.file={tmp_path / 'alertmanager.yml'}",
                     f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{am}",
                     "--cluster.listen-address="],
                    stdout=out, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip

        def listening(port):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            except urllib.error.HTTPError:
                return True
            except OSError:
                return False
            return True

        wait_for(
            "the rulebook's webhook and Alertmanager listening", lambda: listening(hook) and listening(am), 90, logs
        )
        # A request without the token is refused; Alertmanager's carries it.
        denied = urllib.request.Request(f"http://127.0.0.1:{hook}/", data=b'{"alerts": []}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(denied, timeout=5)
        assert refused.value.code == 401
        alerts = [
            {"labels": {"alertname": "GpuopsNodePowerCycleOwed", "node": "gpu-b", "severity": "critical"}},
            # A node in service whose exporter does not answer: remediate.yml leaves it (Slurm has it in service).
            {"labels": {"alertname": "GpuopsExporterDown", "job": "gpuops-node", "node": "gpu-d"}},
        ]  # fmt: skip
        post = urllib.request.Request(
            f"http://127.0.0.1:{am}/api/v2/alerts",
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        assert urllib.request.urlopen(post, timeout=10).status == 200
        wait_for("gpu-b power-cycled and back", lambda: cluster.powered_on == ["gpu-b"]
                 and cluster.nodes()["gpu-b"]["boot"] != BOOT, 150, logs)  # fmt: skip
        wait_for("both remediate.yml runs ended", lambda: logs[0].read_text().count("PLAY RECAP") >= 2, 120, logs)
        nodes = cluster.nodes()
        assert nodes["gpu-b"]["reason"] == "gpuops-health: power node, xid GPU1 : power cycle (remediate.yml)"
        assert nodes["gpu-d"] == {"state": "idle", "reason": "", "boot": BOOT}
        updated = {call[2] for call in cluster.calls() if call[:2] == ["scontrol", "update"]}
        assert updated == {"NodeName=gpu-b"}
        log = logs[0].read_text()
        assert "gpu-d: none: in service" in " ".join(log.split())
        assert PASSWORD not in log and TOKEN not in log
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        cluster.close()


def test_the_event_source_makes_one_event_per_alert_and_refuses_what_is_not_alertmanager_s():
    sys.path.insert(0, str(ROOT / "extensions" / "eda" / "plugins" / "event_source"))
    try:
        import alertmanager  # noqa: PLC0415 - the plugin is a file of the collection, not a package
    finally:
        sys.path.pop(0)
    payload = {"receiver": "eda", "groupKey": "{}", "alerts": [
        {"status": "firing", "labels": {"alertname": "GpuopsNodePowerCycleOwed", "node": "gpu-b"}, "extra": 1},
        "not an alert",
        {"status": "firing", "labels": ["not", "a", "dict"]},
    ]}  # fmt: skip
    found, problem = alertmanager.events(payload, "/gpuops")
    assert problem is None and len(found) == 2
    assert found[0] == {
        "alert": {"status": "firing", "labels": {"alertname": "GpuopsNodePowerCycleOwed", "node": "gpu-b"},
                  "annotations": {}},
        "meta": {"receiver": "eda", "group_key": "{}", "path": "/gpuops"},
    }  # fmt: skip
    assert found[1]["alert"]["labels"] == {}
    assert alertmanager.events({"alerts": "x"})[1] == "not Alertmanager's webhook: no list of alerts"
    assert alertmanager.events([1, 2])[1] == "not Alertmanager's webhook: no list of alerts"
    assert len(alertmanager.events({"alerts": [{}] * 500}, max_alerts=100)[0]) == 100


def test_the_rulebook_runs_playbooks_of_the_collection_on_alerts_the_collection_fires():
    """A rulebook pointed at a playbook that does not exist, or waiting for an alert nothing fires,
    would fail only when an alert comes: checked here."""
    import yaml  # noqa: PLC0415 - this test's only use

    (ruleset,) = yaml.safe_load((ROOT / "extensions" / "eda" / "rulebooks" / "heal.yml").read_text())
    rules_text = (ROOT / "roles" / "dcgm" / "templates" / "gpuops-gpu.rules.yml.j2").read_text()
    assert [next(iter(source)) for source in ruleset["sources"]] == ["gpuops.cluster.alertmanager"]
    assert (ROOT / "extensions" / "eda" / "plugins" / "event_source" / "alertmanager.py").is_file()
    for rule in ruleset["rules"]:
        name = rule["action"]["run_playbook"]["name"]
        assert name.startswith("gpuops.cluster."), name
        assert (ROOT / "playbooks" / f"{name.split('.', 2)[2]}.yml").is_file(), name
        for alertname in re.findall(r'alertname == "(\w+)"', rule["condition"]):
            assert f"alert: {alertname}\n" in rules_text, alertname
