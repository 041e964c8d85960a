# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCGM 4 per the driver's CUDA major, nv-hostengine on localhost, dcgm-exporter as a service on its
configured address, and a real Prometheus that scrapes every GPU node."""

from __future__ import annotations

import json
import re
import time
import urllib.parse

import pytest
import yaml
from hosts import management_address, name

DCGM = "1:4.4.1-1"
CUDA_PACKAGE = {"dcgm-h100": "datacenter-gpu-manager-4-cuda13", "dcgm-v100": "datacenter-gpu-manager-4-cuda12"}
PORT = {"dcgm-h100": 9400, "dcgm-v100": 9500}
GPUS = {"dcgm-h100": 8, "dcgm-v100": 8}


def gpu_node(host):
    if name(host) not in CUDA_PACKAGE:
        pytest.skip("checked on the GPU nodes")


def test_dcgm4_for_the_drivers_cuda_major_replaces_dcgm3(host):
    gpu_node(host)
    held = set(host.check_output("apt-mark showhold").split())
    for package in ("datacenter-gpu-manager-4-core", CUDA_PACKAGE[name(host)]):
        assert host.package(package).version == DCGM
        assert package in held
    other = ({"datacenter-gpu-manager-4-cuda12", "datacenter-gpu-manager-4-cuda13"} - {CUDA_PACKAGE[name(host)]}).pop()
    assert not host.package(other).is_installed
    status = host.run("dpkg-query -W -f='${db:Status-Abbrev}' datacenter-gpu-manager")
    assert status.rc != 0 or status.stdout.strip() in ("", "un")


def test_hostengine_listens_on_localhost_only_and_sees_every_gpu(host):
    gpu_node(host)
    assert host.service("nvidia-dcgm").is_enabled
    assert host.service("nvidia-dcgm").is_running
    assert host.socket("tcp://127.0.0.1:5555").is_listening
    assert not host.socket("tcp://0.0.0.0:5555").is_listening
    dropin = host.file("/etc/systemd/system/nvidia-dcgm.service.d/gpuops.conf").content_string
    assert "--bind-interface 127.0.0.1 --port 5555" in dropin
    out = host.check_output("dcgmi discovery -l")
    assert out.splitlines()[0] == f"{GPUS[name(host)]} GPUs found."


def test_exporter_serves_every_gpu_on_its_configured_address(host):
    gpu_node(host)
    exporter = host.service("dcgm-exporter")
    assert exporter.is_enabled
    assert exporter.is_running
    port = PORT[name(host)]
    if name(host) == "dcgm-h100":
        # The default: the management address only, not every interface.
        address = management_address(host)
        assert host.socket(f"tcp://{address}:{port}").is_listening
        assert not host.socket(f"tcp://0.0.0.0:{port}").is_listening
        assert host.run(f"curl -fsS -o /dev/null http://127.0.0.1:{port}/metrics").rc != 0
    else:
        address = "127.0.0.1"
        assert host.socket(f"tcp://0.0.0.0:{port}").is_listening
    metrics = host.check_output(f"curl -fsS http://{address}:{port}/metrics")
    temps = [line for line in metrics.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    assert len(temps) == GPUS[name(host)]
    assert f'Hostname="{name(host)}"' in temps[0]
    # Every managed collector and nothing else.
    collectors = [
        line.split(",")[0]
        for line in host.file("/etc/dcgm-exporter/gpuops-counters.csv").content_string.splitlines()
        if line and not line.startswith("#")
    ]
    exported = {line.split()[2] for line in metrics.splitlines() if line.startswith("# TYPE ")}
    assert exported == set(collectors)
    unit = host.file("/etc/systemd/system/dcgm-exporter.service").content_string
    assert "--remote-hostengine-info 127.0.0.1:5555" in unit


def test_exporter_runs_unprivileged(host):
    """Through nv-hostengine the exporter needs no root and no capability: the running process has none."""
    gpu_node(host)
    pid = host.check_output("systemctl show -p MainPID --value dcgm-exporter")
    status = dict(
        line.split(":", 1) for line in host.file(f"/proc/{pid}/status").content_string.splitlines() if ":" in line
    )
    uid = status["Uid"].split()[0]
    assert host.check_output(f"getent passwd {uid}").split(":")[0] == "dcgm-exporter"
    assert int(uid) != 0
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert int(status[cap].strip(), 16) == 0, cap
    assert status["NoNewPrivs"].strip() == "1"
    # nv-hostengine keeps the privileges, on localhost only (test above).
    assert host.check_output("getent passwd dcgm-exporter").split(":")[6] == "/usr/sbin/nologin"


def test_exporter_binary_comes_from_its_source(host):
    gpu_node(host)
    if name(host) == "dcgm-v100":
        binary = host.file("/usr/local/bin/dcgm-exporter")
        assert binary.mode == 0o755
        assert not host.package("datacenter-gpu-manager-exporter").is_installed
        assert (
            "ExecStart=/usr/local/bin/dcgm-exporter --address :9500"
            in host.file("/etc/systemd/system/dcgm-exporter.service").content_string
        )
    else:
        assert host.package("datacenter-gpu-manager-exporter").version == "4.5.2-1"
    assert "4.4.1-4.5.2" in host.check_output(
        "/usr/local/bin/dcgm-exporter --version" if name(host) == "dcgm-v100" else "dcgm-exporter --version"
    )


def test_node_exporter_only_where_asked_for(host):
    gpu_node(host)
    if name(host) == "dcgm-h100":
        assert host.service("prometheus-node-exporter").is_running
        assert host.socket("tcp://9100").is_listening
    else:
        assert not host.package("prometheus-node-exporter").is_installed


def monitor(host):
    if name(host) != "dcgm-monitor":
        pytest.skip("checked on the Prometheus host")


def h100_address(host):
    """dcgm-h100's address on the scenario network, the one its exporter listens on by default."""
    return host.check_output("getent ahostsv4 dcgm-h100").split()[0]


def test_file_sd_lists_every_gpu_node(host):
    monitor(host)
    h100 = h100_address(host)
    targets = host.file("/etc/prometheus/file_sd/gpuops-dcgm.yml").content_string
    # The H100 node's exporter is scraped at the address it listens on; the V100 node's, which
    # listens on every address, by the name its scrape host variable gives.
    assert f"- {h100}:9400" in targets
    assert "- dcgm-v100:9500" in targets
    assert "gpu_model: h100" in targets
    assert "gpu_model: v100" in targets
    node = host.file("/etc/prometheus/file_sd/gpuops-node.yml").content_string
    assert f"- {h100}:9100" in node
    assert "dcgm-v100" not in node


def test_prometheus_config_keeps_debians_jobs_and_passes_promtool(host):
    monitor(host)
    assert host.run("promtool check config /etc/prometheus/prometheus.yml").rc == 0
    conf = host.file("/etc/prometheus/prometheus.yml").content_string
    for job in ("job_name: prometheus", "job_name: node", "job_name: gpuops-dcgm", "job_name: gpuops-node"):
        assert job in conf


def query(host, path):
    return json.loads(host.check_output(f"curl -fsS 'http://127.0.0.1:9090/api/v1/{path}'"))["data"]


def test_prometheus_scrapes_every_gpu(host):
    monitor(host)
    assert host.service("prometheus").is_running
    deadline = time.monotonic() + 90
    while True:
        targets = {
            t["scrapeUrl"]: t["health"]
            for t in query(host, "targets")["activeTargets"]
            if t["labels"]["job"] in ("gpuops-dcgm", "gpuops-node")
        }
        up = query(host, "query?query=count(DCGM_FI_DEV_GPU_TEMP)")["result"]
        if (set(targets.values()) == {"up"} and len(targets) == 3 and up) or time.monotonic() > deadline:
            break
        time.sleep(3)
    h100 = h100_address(host)
    assert targets == {
        f"http://{h100}:9400/metrics": "up",
        "http://dcgm-v100:9500/metrics": "up",
        f"http://{h100}:9100/metrics": "up",
    }
    assert up[0]["value"][1] == str(sum(GPUS.values()))


def test_alert_rules_are_loaded_and_judge_each_gpu_by_its_own_threshold(host):
    """Prometheus loaded the rules (promtool-checked) and evaluates them on what the exporters serve:
    the H100 node's textfile gives its 8 GPUs their T.Limit slowdown margin (-2 C, as its
    nvidia-smi -q -x prints it), so no threshold alert is pending there; the V100 node has no node
    exporter, so its 8 GPUs are pending as GPUs without a threshold, and nothing fires but the link
    errors of the side effect's port fault."""
    monitor(host)
    conf = yaml.safe_load(host.file("/etc/prometheus/prometheus.yml").content_string)
    assert "/etc/prometheus/rules/gpuops-*.rules.yml" in conf["rule_files"]
    deadline = time.monotonic() + 120
    while True:
        groups = {g["name"]: g for g in query(host, "rules")["groups"]}
        margins = query(host, "query?query=gpuops_gpu_slowdown_tlimit_margin_celsius")["result"]
        pending = query(host, "query?query=" + urllib.parse.quote('ALERTS{alertname="GpuopsGpuThresholdUnknown"}'))[
            "result"
        ]
        if (len(margins) == 8 and len(pending) == 8) or time.monotonic() > deadline:
            break
        time.sleep(3)
    rules = [r for g in ("gpuops-gpu", "gpuops-ib", "gpuops-targets") for r in groups[g]["rules"]]
    assert {r["health"] for r in rules} == {"ok"}, [(r["name"], r.get("lastError")) for r in rules]
    assert {m["metric"]["node"] for m in margins} == {"dcgm-h100"}
    assert {m["value"][1] for m in margins} == {"-2"}
    assert len(margins) == 8
    assert {(p["metric"]["node"], p["metric"]["alertstate"]) for p in pending} == {("dcgm-v100", "pending")}
    assert len(pending) == 8
    # Firing: only the link down the side effect's port fault counted (link_downed rose), which
    # GpuopsIbPortErrors keeps for dcgm_alert_ib_error_window; the hot GPU and the port are back.
    firing = query(host, "query?query=" + urllib.parse.quote('ALERTS{alertstate="firing"}'))["result"]
    assert {(f["metric"]["alertname"], f["metric"]["node"], f["metric"].get("device")) for f in firing} == {
        ("GpuopsIbPortErrors", "dcgm-h100", "mlx5_4")
    }


def test_alertmanager_delivered_the_hot_gpu_and_its_resolution(host):
    """The side effect heated GPU 2 of the H100 node past its T.Limit slowdown margin and cooled it:
    Alertmanager (Debian's, configuration checked by amtool) delivered both to the webhook receiver,
    with the node, the GPU and its UUID."""
    monitor(host)
    assert host.service("prometheus-alertmanager").is_running
    assert host.file("/etc/prometheus/alertmanager.yml").mode == 0o640
    notes = [json.loads(line) for line in host.file("/var/log/gpuops-webhook.jsonl").content_string.splitlines()]
    alerts = [a for n in notes for a in n["alerts"] if a["labels"]["alertname"] == "GpuopsGpuSlowdownTemperature"]
    assert {(a["status"], a["labels"]["node"], a["labels"]["gpu"]) for a in alerts} == {
        ("firing", "dcgm-h100", "2"),
        ("resolved", "dcgm-h100", "2"),
    }
    assert all(a["labels"]["UUID"].startswith("GPU-") and a["labels"]["severity"] == "critical" for a in alerts)
    assert "7" in alerts[0]["annotations"]["summary"]  # the margin, -7 C, as Prometheus rendered it


def test_the_compute_fabric_is_in_prometheus_and_its_port_down_reached_the_webhook(host):
    """The H100 node's node exporter reads the simulated /sys/class/infiniband (12 ports: 8 InfiniBand
    at 400 Gb/s, 4 Ethernet); its textfile names the 8 InfiniBand ports as the compute ports; the side
    effect took mlx5_4 down and up: the webhook got GpuopsIbPortDown firing and resolved."""
    monitor(host)
    states = query(host, "query?query=node_infiniband_state_id")["result"]
    assert {s["metric"]["node"] for s in states} == {"dcgm-h100"} and len(states) == 12
    assert sorted(s["value"][1] for s in states).count("4") == 9  # 8 InfiniBand + 1 Ethernet Active
    compute = query(host, "query?query=gpuops_ib_compute_port_rate_bytes_per_second")["result"]
    assert sorted(c["metric"]["device"] for c in compute) == sorted(f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11))
    assert {c["value"][1] for c in compute} == {"50000000000"}
    rates = query(host, "query?query=" + urllib.parse.quote('node_infiniband_rate_bytes_per_second{device="mlx5_0"}'))
    assert [r["value"][1] for r in rates["result"]] == ["50000000000"]
    notes = [json.loads(line) for line in host.file("/var/log/gpuops-webhook.jsonl").content_string.splitlines()]
    alerts = [a for n in notes for a in n["alerts"] if a["labels"]["alertname"] == "GpuopsIbPortDown"]
    assert {(a["status"], a["labels"]["node"], a["labels"]["device"], a["labels"]["port"]) for a in alerts} == {
        ("firing", "dcgm-h100", "mlx5_4", "1"),
        ("resolved", "dcgm-h100", "mlx5_4", "1"),
    }


def test_grafana_dashboard_plots_what_prometheus_has(host):
    """Every panel's query must return series from the Prometheus the role set up: a metric the
    exporters do not export, or a job label that is not the scrape job's, plots nothing. The GPU rows
    answer for both nodes (one row per model: the model variable lists both), the compute fabric's for
    the H100 node, the only one with HCAs."""
    monitor(host)
    dashboard = json.loads(host.file("/var/lib/grafana/dashboards/gpuops-dcgm-dashboard.json").content_string)
    assert dashboard["uid"] == "gpuops-dcgm"
    (model,) = [v for v in dashboard["templating"]["list"] if v["name"] == "model"]
    label = re.fullmatch(r"label_values\((.*), (\w+)\)", model["query"]["query"])
    models = {r["metric"][label[2]] for r in query(host, "query?query=" + urllib.parse.quote(label[1]))["result"]}
    assert models == {"NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB"}, models
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert exprs
    deadline = time.monotonic() + 60
    for expr in exprs:
        if "gpuops_slurm_job_gpu_info" in expr or "gpuops_health_" in expr:
            continue  # per Slurm job and gpuops-health: neither runs here; molecule/site checks these panels
        # The dashboard's node and model variables match every node and model here.
        promql = expr.replace('=~"$node"', '=~".+"').replace('=~"$model"', '=~".+"')
        while True:
            result = query(host, "query?query=" + urllib.parse.quote(promql))["result"]
            if result or time.monotonic() > deadline:
                break
            time.sleep(3)
        assert result, f"{expr} returns nothing"
        if "ALERTS" in expr:
            continue  # the count of firing alerts, cluster-wide
        nodes = {"dcgm-h100"} if "node_infiniband" in expr else {"dcgm-h100", "dcgm-v100"}
        assert {series["metric"]["node"] for series in result} == nodes, expr
