# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dcgm role's alert rules, rendered as the role renders them and run by Prometheus' own
promtool (Debian's, tests/scripts/promtool.sh): each rule fires on the series that should fire it and
stays quiet on the ones that should not; the GPU textfile of each simulated node passes promtool's
metrics check and carries the threshold form its GPUs print."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.gpuops.cluster.plugins.module_utils import ibstat, nvidia_smi
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci
from ansible_collections.gpuops.cluster.plugins.module_utils.validation import FATAL_XIDS
from conftest import GPUSIM, ROOT

ROLE = ROOT / "roles" / "dcgm"
H100 = 'gpu="0",UUID="GPU-aaa",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",node="n1",job="gpuops-dcgm"'
V100 = 'gpu="1",UUID="GPU-bbb",modelName="Tesla V100-SXM2-32GB",Hostname="n1",node="n1",job="gpuops-dcgm"'
NODE = 'node="n1",job="gpuops-node",instance="10.0.0.1:9100"'


@pytest.fixture(scope="module")
def promtool():
    out = subprocess.run([str(ROOT / "tests" / "scripts" / "promtool.sh")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"no promtool (tests/scripts/promtool.sh): {out.stderr}"
    return out.stdout.strip()


def render(name, **extra):
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(ansible_managed="test", **extra)
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template((ROLE / "templates" / name).read_text()))


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    path = tmp_path_factory.mktemp("rules") / "gpuops-gpu.rules.yml"
    path.write_text(render("gpuops-gpu.rules.yml.j2"))
    return path


def run_tests(promtool, rules, tests, tmp_path):
    spec = tmp_path / "tests.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}))
    out = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def alert(name, exp, at="5m"):
    return {"eval_time": at, "alertname": name, "exp_alerts": exp}


def fired(rules, name, labels, value=None):
    """An expected alert: its labels and its annotations as Prometheus expands them."""
    return {"exp_labels": labels, "exp_annotations": _annotations(rules, labels, value, 0, name)}


def test_rules_pass_promtool_check_and_name_every_fatal_xid(promtool, rules):
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    text = rules.read_text()
    assert "{{ $labels.node }}" in text  # Prometheus' own templates reach the file untouched
    groups = yaml.safe_load(text)["groups"]
    fatal = next(r for g in groups for r in g["rules"] if r.get("alert") == "GpuopsGpuFatalXid")
    assert "|".join(map(str, sorted(FATAL_XIDS))) in fatal["expr"]


def test_a_gpu_at_its_own_slowdown_threshold_fires_and_one_below_does_not(promtool, rules, tmp_path):
    series = [
        # An older GPU prints an absolute threshold (89 C): 90 C is past it, on another GPU 85 C is not.
        {"series": f"DCGM_FI_DEV_GPU_TEMP{{{V100}}}", "values": "90x10"},
        {"series": f'gpuops_gpu_slowdown_temperature_celsius{{gpu="1",UUID="GPU-bbb",{NODE}}}', "values": "89x10"},
        # A Hopper GPU prints a margin to T.Limit (-2 C): 3 degrees past T.Limit is past it.
        {"series": f"DCGM_FI_DEV_GPU_TEMP{{{H100}}}", "values": "91x10"},
        {"series": f"DCGM_FI_DEV_GPU_TEMP_LIMIT{{{H100}}}", "values": "-3x10"},
        {"series": f'gpuops_gpu_slowdown_tlimit_margin_celsius{{gpu="0",UUID="GPU-aaa",{NODE}}}', "values": "-2x10"},
    ]
    labels = {"severity": "critical", "gpu": "1", "UUID": "GPU-bbb", "node": "n1", "job": "gpuops-dcgm"}
    labels |= {"Hostname": "n1", "modelName": "Tesla V100-SXM2-32GB", "__name__": "DCGM_FI_DEV_GPU_TEMP"}
    h100 = dict(
        labels, gpu="0", UUID="GPU-aaa", modelName="NVIDIA H100 80GB HBM3", __name__="DCGM_FI_DEV_GPU_TEMP_LIMIT"
    )
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    alert("GpuopsGpuSlowdownTemperature", [], at="0m"),  # not before dcgm_alert_temperature_for
                    {
                        "eval_time": "5m",
                        "alertname": "GpuopsGpuSlowdownTemperature",
                        "exp_alerts": [
                            {"exp_labels": _drop_name(labels), "exp_annotations": _annotations(rules, labels, 90, 0)},
                            {"exp_labels": _drop_name(h100), "exp_annotations": _annotations(rules, h100, -3, 1)},
                        ],
                    },
                    alert("GpuopsGpuThresholdUnknown", [], at="2h"),
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"DCGM_FI_DEV_GPU_TEMP{{{V100}}}", "values": "85x10"},
                    {
                        "series": f'gpuops_gpu_slowdown_temperature_celsius{{gpu="1",UUID="GPU-bbb",{NODE}}}',
                        "values": "89x10",
                    },
                    {"series": f"DCGM_FI_DEV_GPU_TEMP_LIMIT{{{H100}}}", "values": "0x10"},
                    {
                        "series": f'gpuops_gpu_slowdown_tlimit_margin_celsius{{gpu="0",UUID="GPU-aaa",{NODE}}}',
                        "values": "-2x10",
                    },
                ],
                "alert_rule_test": [alert("GpuopsGpuSlowdownTemperature", [])],
            },
        ],
        tmp_path,
    )


def _drop_name(labels):
    return {k: v for k, v in labels.items() if k != "__name__"}


def _annotations(rules, labels, value, which, name="GpuopsGpuSlowdownTemperature"):
    """The rule's annotations expanded as Prometheus expands them, for the labels and value given."""
    groups = yaml.safe_load(rules.read_text())["groups"]
    rule = [r for g in groups for r in g["rules"] if r.get("alert") == name][which]
    out = {}
    for key, template in rule["annotations"].items():
        text = template
        for label, label_value in labels.items():
            text = text.replace("{{ $labels." + label + " }}", label_value)
        out[key] = text.replace("{{ $value }}", str(value))
    return out


def test_a_gpu_without_a_threshold_is_named_after_an_hour(promtool, rules, tmp_path):
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "5m",
                "input_series": [
                    {"series": f"DCGM_FI_DEV_GPU_TEMP{{{V100}}}", "values": "40x20"},
                    # A T.Limit threshold, but the margin is not exported (collectors without field 153).
                    {"series": f"DCGM_FI_DEV_GPU_TEMP{{{H100}}}", "values": "40x20"},
                    {
                        "series": f'gpuops_gpu_slowdown_tlimit_margin_celsius{{gpu="0",UUID="GPU-aaa",{NODE}}}',
                        "values": "-2x20",
                    },
                ],
                "alert_rule_test": [
                    alert("GpuopsGpuThresholdUnknown", [], at="30m"),
                    {
                        "eval_time": "70m",
                        "alertname": "GpuopsGpuThresholdUnknown",
                        "exp_alerts": [
                            fired(
                                rules,
                                "GpuopsGpuThresholdUnknown",
                                {"severity": "warning", "gpu": "1", "UUID": "GPU-bbb"}
                                | {
                                    "node": "n1",
                                    "job": "gpuops-dcgm",
                                    "Hostname": "n1",
                                    "modelName": "Tesla V100-SXM2-32GB",
                                },
                            ),
                            fired(
                                rules,
                                "GpuopsGpuThresholdUnknown",
                                {"severity": "warning", "gpu": "0", "UUID": "GPU-aaa"}
                                | {"node": "n1", "job": "gpuops-node", "instance": "10.0.0.1:9100"},
                            ),
                        ],
                    },
                ],
            }
        ],
        tmp_path,
    )


def test_a_gpu_that_stops_reporting_fires_unless_its_whole_exporter_is_down(promtool, rules, tmp_path):
    info = (
        'gpuops_gpu_info{{gpu="{}",UUID="GPU-{}",pci_bus_id="0000:{}:00.0",model_name="NVIDIA H100 80GB HBM3",'
        + NODE
        + "}}"
    )
    gpu1 = 'gpu="1",UUID="GPU-ccc",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",node="n1",job="gpuops-dcgm"'
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": info.format(0, "aaa", "18"), "values": "1x10"},
                    {"series": info.format(1, "ccc", "2a"), "values": "1x10"},
                    {"series": f"DCGM_FI_DEV_GPU_TEMP{{{H100}}}", "values": "40x10"},
                    # GPU 1 reports for two minutes, then no more (it fell off the bus).
                    {"series": f"DCGM_FI_DEV_GPU_TEMP{{{gpu1}}}", "values": "40 40 40"},
                    {"series": 'up{job="gpuops-dcgm",node="n1",instance="10.0.0.1:9400"}', "values": "1x10"},
                ],
                "alert_rule_test": [
                    alert("GpuopsGpuMissing", [], at="2m"),
                    # Prometheus keeps a series 5 minutes after its last sample, then dcgm_alert_missing_for.
                    alert("GpuopsGpuMissing", [], at="7m"),
                    {
                        "eval_time": "12m",
                        "alertname": "GpuopsGpuMissing",
                        "exp_alerts": [
                            fired(
                                rules,
                                "GpuopsGpuMissing",
                                {"severity": "critical", "gpu": "1", "UUID": "GPU-ccc"}
                                | {"node": "n1", "pci_bus_id": "0000:2a:00.0", "model_name": "NVIDIA H100 80GB HBM3"}
                                | {"job": "gpuops-node", "instance": "10.0.0.1:9100"},
                            ),
                        ],
                    },
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {"series": info.format(0, "aaa", "18"), "values": "1x10"},
                    {"series": 'up{job="gpuops-dcgm",node="n1",instance="10.0.0.1:9400"}', "values": "0x10"},
                ],
                "alert_rule_test": [
                    alert("GpuopsGpuMissing", [], at="9m"),
                    {
                        "eval_time": "9m",
                        "alertname": "GpuopsExporterDown",
                        "exp_alerts": [
                            fired(
                                rules,
                                "GpuopsExporterDown",
                                {"severity": "critical", "job": "gpuops-dcgm", "node": "n1"}
                                | {"instance": "10.0.0.1:9400"},
                            ),
                        ],
                    },
                ],
            },
        ],
        tmp_path,
    )


def test_xids_fire_by_the_catalogues_severity_and_only_when_new(promtool, rules, tmp_path):
    base = {"severity": "critical", "gpu": "0", "UUID": "GPU-aaa", "node": "n1", "job": "gpuops-dcgm"}
    base |= {"Hostname": "n1", "modelName": "NVIDIA H100 80GB HBM3"}
    v100 = {"gpu": "1", "UUID": "GPU-bbb", "modelName": "Tesla V100-SXM2-32GB"}
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": [
                    # Xid 79 (fallen off the bus: fatal) at minute 3; Xid 13 (an application's: a warning) at minute 3.
                    {"series": f"DCGM_FI_DEV_XID_ERRORS{{{H100}}}", "values": "0 0 0 79x60"},
                    {"series": f"DCGM_FI_DEV_XID_ERRORS{{{V100}}}", "values": "0 0 0 13x60"},
                ],
                "alert_rule_test": [
                    alert("GpuopsGpuFatalXid", [], at="2m"),
                    alert("GpuopsGpuFatalXid", [fired(rules, "GpuopsGpuFatalXid", dict(base, xid="79"))]),
                    alert(
                        "GpuopsGpuXid", [fired(rules, "GpuopsGpuXid", dict(base, xid="13", severity="warning", **v100))]
                    ),
                    # The exporter keeps the last Xid; with no new one the alerts end after the window.
                    alert("GpuopsGpuFatalXid", [], at="40m"),
                    alert("GpuopsGpuXid", [], at="40m"),
                ],
            }
        ],
        tmp_path,
    )


def test_ecc_row_remap_and_nvlink_counters_fire_when_they_rise(promtool, rules, tmp_path):
    labels = {"gpu": "0", "UUID": "GPU-aaa", "node": "n1", "job": "gpuops-dcgm", "Hostname": "n1"}
    labels |= {"modelName": "NVIDIA H100 80GB HBM3"}
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{H100}}}", "values": "0 0 0 2x20"},
                    {"series": f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{V100}}}", "values": "5x20"},
                    {"series": f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{H100}}}", "values": "0 0 1x20"},
                    {"series": f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{H100}}}", "values": "0 1x20"},
                    {"series": f"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL{{{H100}}}", "values": "0 0 0 0 3x20"},
                    {"series": f"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{{{V100}}}", "values": "7x20"},
                ],
                "alert_rule_test": [
                    alert(
                        "GpuopsGpuUncorrectableEcc",
                        [fired(rules, "GpuopsGpuUncorrectableEcc", dict(labels, severity="critical"))],
                    ),
                    alert(
                        "GpuopsGpuRowRemapFailure",
                        [fired(rules, "GpuopsGpuRowRemapFailure", dict(labels, severity="critical"))],
                    ),
                    alert(
                        "GpuopsGpuRowRemapped", [fired(rules, "GpuopsGpuRowRemapped", dict(labels, severity="warning"))]
                    ),
                    alert(
                        "GpuopsNvlinkErrors",
                        [fired(rules, "GpuopsNvlinkErrors", dict(labels, severity="warning"))],
                        at="6m",
                    ),
                    # Counters that stand still (the V100's, from before) fire nothing.
                    alert("GpuopsGpuUncorrectableEcc", [], at="20m"),
                ],
            }
        ],
        tmp_path,
    )


def test_gpuops_health_drains_and_failures_and_a_check_that_stopped_running(promtool, rules, tmp_path):
    """gpuops-health's textfile: its own drain (with the reason), a failure it did not drain for (a
    Kubernetes node, or a node drained already), and a check that no longer runs."""
    drained = 'gpuops_health_drained{reason="gpuops-health: xid GPU3",' + NODE + "}"
    failed = 'gpuops_health_failed{check="ib_ports",subject="mlx5_0:1",' + NODE.replace("n1", "n2") + "}"
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": drained, "values": "0 0 1x10"},
                    {"series": failed, "values": "1x10"},
                    {"series": 'gpuops_health_drained{reason="",' + NODE.replace("n1", "n2") + "}", "values": "0x10"},
                    # n1's check ran at minute 0 and at minute 1, then never again.
                    {"series": f"gpuops_health_last_check_timestamp_seconds{{{NODE}}}", "values": "0 60 60x40"},
                ],
                "alert_rule_test": [
                    alert("GpuopsNodeDrainedByHealthCheck", [], at="1m"),
                    alert(
                        "GpuopsNodeDrainedByHealthCheck",
                        [
                            fired(
                                rules,
                                "GpuopsNodeDrainedByHealthCheck",
                                {"severity": "warning", "reason": "gpuops-health: xid GPU3", "node": "n1"}
                                | {"job": "gpuops-node", "instance": "10.0.0.1:9100"},
                            )
                        ],
                    ),
                    alert(
                        "GpuopsHealthCheckFailing",
                        [
                            fired(
                                rules,
                                "GpuopsHealthCheckFailing",
                                {"severity": "warning", "check": "ib_ports", "subject": "mlx5_0:1", "node": "n2"}
                                | {"job": "gpuops-node", "instance": "10.0.0.1:9100"},
                            )
                        ],
                        at="6m",
                    ),
                    alert("GpuopsHealthCheckStale", [], at="20m"),
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"gpuops_health_last_check_timestamp_seconds{{{NODE}}}", "values": "60x40"},
                ],
                # 1800 s after the last check (at 1 minute): firing at 32 minutes, not at 30.
                "alert_rule_test": [
                    alert("GpuopsHealthCheckStale", [], at="30m"),
                    {
                        "eval_time": "32m",
                        "alertname": "GpuopsHealthCheckStale",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "warning", "node": "n1", "job": "gpuops-node"}
                                | {"instance": "10.0.0.1:9100"},
                                "exp_annotations": {
                                    "summary": "n1: gpuops-health has not run for 31m 0s",
                                    "description": _annotations(
                                        rules, {"node": "n1"}, None, 0, "GpuopsHealthCheckStale"
                                    )["description"].replace("{{ $value | humanizeDuration }}", "31m 0s"),
                                },
                            }
                        ],
                    },
                ],
            },
        ],
        tmp_path,
    )


def test_a_node_drained_longer_than_the_bound_fires(promtool, rules, tmp_path):
    # Drained at 60 s (the series' value); the default bound is four hours.
    since = "gpuops_health_drained_since_timestamp_seconds{" + NODE + "}"
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "10m",
                "input_series": [{"series": since, "values": "60x30"}],
                "alert_rule_test": [
                    alert("GpuopsNodeDrainedTooLong", [], at="4h"),
                    {
                        "eval_time": "4h10m",
                        "alertname": "GpuopsNodeDrainedTooLong",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "warning", "node": "n1", "job": "gpuops-node"}
                                | {"instance": "10.0.0.1:9100"},
                                "exp_annotations": {
                                    k: text.replace("{{ $value | humanizeDuration }}", "4h 9m 0s")
                                    for k, text in _annotations(
                                        rules, {"node": "n1"}, None, 0, "GpuopsNodeDrainedTooLong"
                                    ).items()
                                },
                            }
                        ],
                    },
                ],
            }
        ],
        tmp_path,
    )


def test_a_node_the_budget_kept_in_service_fires_at_once_and_a_drained_one_does_not(promtool, rules, tmp_path):
    refused = "gpuops_health_budget_refused{" + NODE + "}"
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": [
                    {"series": refused, "values": "0 0 1 1 0"},
                    {"series": "gpuops_health_budget_refused{" + NODE.replace("n1", "n2") + "}", "values": "0x4"},
                ],
                "alert_rule_test": [
                    alert("GpuopsHealBudgetSpent", [], at="1m"),
                    alert(
                        "GpuopsHealBudgetSpent",
                        [
                            fired(
                                rules,
                                "GpuopsHealBudgetSpent",
                                {
                                    "severity": "critical",
                                    "node": "n1",
                                    "job": "gpuops-node",
                                    "instance": "10.0.0.1:9100",
                                },
                            )
                        ],
                        at="2m",
                    ),
                    alert("GpuopsHealBudgetSpent", [], at="4m"),
                ],
            }
        ],
        tmp_path,
    )


def test_compute_ports_fire_when_down_slow_erring_or_congested_and_other_ports_never(promtool, rules, tmp_path):
    """gpuops-ib.prom names the compute ports (mlx5_0, mlx5_3, mlx5_4 at 400 Gb/s); mlx5_1 is an
    Ethernet port off the compute fabric, down and erring without an alert."""

    def port(device):
        return f'device="{device}",port="1",{NODE}'

    rate = "5e10x40"
    series = [
        {
            "series": f'gpuops_ib_compute_port_rate_bytes_per_second{{{port(d)},link_layer="InfiniBand"}}',
            "values": rate,
        }
        for d in ("mlx5_0", "mlx5_3", "mlx5_4")
    ]
    series += [
        {"series": f"node_infiniband_state_id{{{port('mlx5_0')}}}", "values": "4x40"},
        {"series": f"node_infiniband_state_id{{{port('mlx5_3')}}}", "values": "4 4 1x38"},  # down at 2m
        {"series": f"node_infiniband_state_id{{{port('mlx5_4')}}}", "values": "4x40"},
        {"series": f"node_infiniband_state_id{{{port('mlx5_1')}}}", "values": "1x40"},
        {"series": f"node_infiniband_rate_bytes_per_second{{{port('mlx5_0')}}}", "values": rate},
        {"series": f"node_infiniband_rate_bytes_per_second{{{port('mlx5_4')}}}", "values": "2.5e10x40"},  # HDR
        {"series": f"node_infiniband_port_errors_received_total{{{port('mlx5_0')}}}", "values": "0 0 0 5x37"},
        {"series": f"node_infiniband_symbol_error_total{{{port('mlx5_1')}}}", "values": "0+100x40"},
        # 4e10 ticks a minute of 8 bytes over 5e10 bytes/s: 10.67 % of the link's time; mlx5_0 0.27 %.
        {"series": f"node_infiniband_port_transmit_wait_total{{{port('mlx5_4')}}}", "values": "0+4e10x40"},
        {"series": f"node_infiniband_port_transmit_wait_total{{{port('mlx5_0')}}}", "values": "0+1e9x40"},
    ]
    node = {"node": "n1", "job": "gpuops-node", "instance": "10.0.0.1:9100", "port": "1"}
    down = dict(node, device="mlx5_3", link_layer="InfiniBand", severity="critical")
    errors = dict(node, device="mlx5_0", severity="warning")
    # One-to-one matching on (node, device, port) keeps those labels only.
    slow = {"node": "n1", "device": "mlx5_4", "port": "1", "severity": "warning"}
    congested = slow
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    alert("GpuopsIbPortDown", [], at="3m"),  # not before dcgm_alert_ib_for
                    alert("GpuopsIbPortDown", [fired(rules, "GpuopsIbPortDown", down)]),
                    alert("GpuopsIbPortSlow", [fired(rules, "GpuopsIbPortSlow", slow, "2.5e+10")]),
                    alert("GpuopsIbPortErrors", [fired(rules, "GpuopsIbPortErrors", errors)]),
                    alert("GpuopsIbPortErrors", [], at="25m"),  # out of the window: quiet again
                    alert("GpuopsIbCongestion", [], at="10m"),  # not before 10 minutes of it
                    {
                        "eval_time": "20m",
                        "alertname": "GpuopsIbCongestion",
                        "exp_alerts": [
                            {
                                "exp_labels": congested,
                                "exp_annotations": {
                                    key: value.replace("{{ $value | humanizePercentage }}", "10.67%")
                                    for key, value in _annotations(
                                        rules, congested, None, 0, "GpuopsIbCongestion"
                                    ).items()
                                },
                            }
                        ],
                    },
                ],
            }
        ],
        tmp_path,
    )


@pytest.mark.parametrize(
    ("profile", "fabric", "ports"),
    [("dgx-h100", "InfiniBand", 8), ("pcie-l40s", "Ethernet", 1), ("hgx-a100", "InfiniBand", 6)],
)
def test_each_nodes_ib_textfile_names_the_active_ports_of_its_compute_fabric(promtool, profile, fabric, ports):
    cas = ibstat.parse_ibstat((GPUSIM / "profiles" / profile / "ibstat.txt").read_text())
    infiniband = {"hcas": cas, "active_ports": ibstat.active_ports(cas)}
    text = render("gpuops-ib.prom.j2", ansible_facts={"infiniband": infiniband})
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) == ports and all(f'link_layer="{fabric}"' in s for s in samples)
    assert f"({fabric}: the Active ports NCCL uses)" in text


def profile_facts(name):
    profile = GPUSIM / "profiles" / name
    pci = classify(parse_lspci((profile / "lspci-Dnn.txt").read_text()))
    return build_gpu_facts(pci, nvidia_smi.parse_query_xml((profile / "nvidia-smi-q-x.xml").read_text()))


@pytest.mark.parametrize(
    ("profile", "absolute", "margin"),
    [("dgx-h100", None, -2), ("dgx1-v100", 87, None), ("hgx-a100", 89, None), ("pcie-l40s", None, None)],
)
def test_each_nodes_textfile_carries_the_threshold_form_its_gpus_print(promtool, tmp_path, profile, absolute, margin):
    facts = profile_facts(profile)
    text = render("gpuops-gpus.prom.j2", ansible_facts={"nvidia_gpu": facts})
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    count = facts["count"]
    assert len([s for s in samples if s.startswith("gpuops_gpu_info{")]) == count
    absolute_lines = [s for s in samples if s.startswith("gpuops_gpu_slowdown_temperature_celsius{")]
    margin_lines = [s for s in samples if s.startswith("gpuops_gpu_slowdown_tlimit_margin_celsius{")]
    assert len(absolute_lines) == (count if absolute is not None else 0)
    assert len(margin_lines) == (count if margin is not None else 0)
    for line in absolute_lines + margin_lines:
        assert line.endswith(f" {absolute if absolute is not None else margin}")
    first = facts["gpus"][0]
    assert f'UUID="{first["uuid"]}"' in samples[0]


def test_the_fatal_xids_lookup_reads_validations_list_and_takes_no_terms():
    templar = Templar(loader=DataLoader(), variables={})
    assert templar.template(trust_as_template("{{ query('gpuops.cluster.fatal_xids') }}")) == sorted(FATAL_XIDS)
    with pytest.raises(Exception, match="takes no terms"):
        templar.template(trust_as_template("{{ query('gpuops.cluster.fatal_xids', 79) }}"))


def test_a_node_that_owes_a_power_cycle_fires_at_once_and_one_that_owes_a_reboot_does_not(promtool, rules, tmp_path):
    power = 'gpuops_health_owed{action="power",subject="node",' + NODE + "}"
    reboot = 'gpuops_health_owed{action="reboot",subject="GPU0",' + NODE.replace("n1", "n2") + "}"
    labels = {
        "severity": "critical",
        "node": "n1",
        "job": "gpuops-node",
        "instance": "10.0.0.1:9100",
        "action": "power",
        "subject": "node",
    }
    run_tests(
        promtool,
        rules,
        [
            {
                "interval": "1m",
                "input_series": [{"series": power, "values": "_ 1 1"}, {"series": reboot, "values": "1x3"}],
                "alert_rule_test": [
                    alert("GpuopsNodePowerCycleOwed", [], at="0m"),
                    alert(
                        "GpuopsNodePowerCycleOwed",
                        [fired(rules, "GpuopsNodePowerCycleOwed", labels)],
                        at="1m",
                    ),
                ],
            }
        ],
        tmp_path,
    )
