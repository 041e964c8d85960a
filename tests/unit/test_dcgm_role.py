# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dcgm role's data agree: the dashboard plots only exported fields, the collectors are DCGM
fields, and the exporter pairing table knows the stand-in's pairs."""

from __future__ import annotations

import base64
import json
import re

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.gpuops.cluster.plugins.module_utils import compat
from conftest import GPUSIM, ROOT, load_script

ROLE = ROOT / "roles" / "dcgm"


def collectors():
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["dcgm_exporter_collectors"]


def test_the_dashboard_plots_only_exported_fields():
    dashboard = json.loads((ROLE / "files" / "gpuops-dcgm-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if isinstance(v.get("query"), dict)]
    used = {m for e in exprs for m in re.findall(r"DCGM_FI_[A-Z0-9_]+", e)}
    assert used
    assert used <= {c["field"] for c in collectors()}
    # Panels must not overlap: each has its own place in the grid.
    places = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in dashboard["panels"]]
    assert len(places) == len(set(places))
    # Each exporter's series by its scrape job's name (what the role's Prometheus calls them).
    for expr in exprs:
        for metric in re.findall(r"\b(DCGM_FI_[A-Z0-9_]+|node_[a-z_]+|gpuops_[a-z_]+)\{([^}]*)\}", expr):
            job = "gpuops-dcgm" if metric[0].startswith("DCGM") else "gpuops-node"
            if metric[0] != "gpuops_slurm_job_gpu_info":
                assert f'job="{job}"' in metric[1], (metric, expr)


def test_the_dashboard_groups_panels_by_role_with_one_gpu_row_per_model():
    """Rows in order: the head (Prometheus, its targets, gpuops-health), the GPU nodes repeated per GPU
    model (every DCGM query filtered by it), the compute fabric, the Slurm jobs."""
    dashboard = json.loads((ROLE / "files" / "gpuops-dcgm-dashboard.json").read_text())
    rows, current = {}, None
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            current = panel
            rows[panel["title"]] = []
        else:
            rows[current["title"]].append(panel)
    assert [title.split(":")[0] for title in rows] == ["Head", "GPU nodes", "Compute fabric", "Slurm jobs"]
    (gpu_row,) = [p for p in dashboard["panels"] if p["type"] == "row" and p.get("repeat")]
    assert (gpu_row["repeat"], gpu_row["title"]) == ("model", "GPU nodes: $model")
    for panel in rows["GPU nodes: $model"]:
        assert all('modelName=~"$model"' in t["expr"] for t in panel["targets"]), panel["title"]
    fabric = [t["expr"] for p in rows["Compute fabric: InfiniBand and RoCE ports"] for t in p["targets"]]
    assert all("node_infiniband_" in e and "gpuops_ib_compute_port_rate_bytes_per_second" in e for e in fabric)
    assert any("transmit_wait" in e for e in fabric)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert "modelName)" in variables["model"]["query"]["query"]
    assert 'modelName=~"$model"' in variables["node"]["query"]["query"]


def test_default_collectors_are_dcgm_fields_with_prometheus_types():
    exporter = (GPUSIM / "repo" / "dcgm-exporter.py").read_text()
    known = set(re.findall(r'^    "(DCGM_FI_[A-Z0-9_]+)":', exporter, re.M))
    for c in collectors():
        assert c["field"] in known, c
        assert c["type"] in ("gauge", "counter")
        assert "," not in c["help"], "the help text is the CSV's last column: no commas"
    assert len({c["field"] for c in collectors()}) == len(collectors())


def test_the_pairing_table_knows_the_standin_pairs_and_the_defaults_pair():
    pairs = compat.DCGM_EXPORTER_BUILT_FOR.pairs
    builder = load_script(GPUSIM / "repo" / "build.py", "gpusim_repo_build_pairs")
    for exporter, dcgm in builder.DCGM_EXPORTER.items():
        assert pairs[exporter.split("-")[0]] == dcgm.split(":")[1].split("-")[0]
    defaults = yaml.safe_load((ROOT / "roles" / "preflight" / "defaults" / "main.yml").read_text())
    assert pairs[defaults["dcgm_exporter_version"]] == defaults["dcgm_version"]


def _discovery_assertion(first_line, count):
    tasks = yaml.safe_load((ROLE / "tasks" / "hostengine.yml").read_text())
    (task,) = [t for t in tasks if t.get("name") == "Check that the host engine sees every GPU"]
    variables = {"__dcgm_discovery": {"stdout_lines": [first_line]}, "ansible_facts": {"nvidia_gpu": {"count": count}}}
    templar = Templar(loader=DataLoader(), variables=variables)
    # As assert evaluates "that": a conditional, whose backslashes are not unescaped.
    return templar.evaluate_conditional(trust_as_template(task["ansible.builtin.assert"]["that"]))


def test_the_host_engine_gpu_count_is_compared_as_a_number():
    """ "8 GPU" is a substring of "18 GPUs found.": the check compared text before."""
    assert _discovery_assertion("8 GPUs found.", 8) is True
    assert _discovery_assertion("1 GPU found.", 1) is True
    assert _discovery_assertion("18 GPUs found.", 8) is False
    assert _discovery_assertion("Error: Unable to connect to host engine.", 8) is False


def _merged(now, **overrides):
    """prometheus.yml as the role merges it into ``now`` (the set_fact of tasks/prometheus.yml)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "prometheus.yml").read_text())
    (task,) = [t for t in tasks if "ansible.builtin.set_fact" in t]
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # As a play reads them: the task's vars are templates (trusted), the rest data.
    variables.update({k: trust_as_template(v) if isinstance(v, str) else v for k, v in task["vars"].items()})
    variables["__dcgm_prometheus_text"] = {"content": base64.b64encode(yaml.safe_dump(now).encode()).decode()}
    variables["__dcgm_prometheus_files"] = {"results": [{"stat": {"exists": True}}, {"stat": {"exists": True}}]}
    variables.update(overrides)
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(task["ansible.builtin.set_fact"]["__dcgm_prometheus_wanted"]))


def test_prometheus_yml_gets_the_rules_and_the_alertmanager_once_and_keeps_the_sites_own():
    debian = {
        "global": {"evaluation_interval": "15s"},
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": ["localhost:9093"]}]}]},
        "rule_files": None,
        "scrape_configs": [{"job_name": "prometheus"}],
    }
    receiver = {"webhook_configs": [{"url": "http://127.0.0.1:9099/"}]}
    merged = _merged(debian, dcgm_alertmanager_receiver=receiver)
    assert merged["rule_files"] == ["/etc/prometheus/rules/gpuops-*.rules.yml"]
    assert merged["alerting"] == debian["alerting"]  # Debian's has the Alertmanager already
    assert [j["job_name"] for j in merged["scrape_configs"]] == ["prometheus", "gpuops-dcgm", "gpuops-node"]
    # A site's own configuration: its rule files and Alertmanagers kept, ours added once.
    site = {
        "rule_files": ["/etc/prometheus/site.rules.yml"],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": ["am.site:9093"]}]}]},
    }
    merged = _merged(site, dcgm_alertmanager_receiver=receiver)
    assert merged["rule_files"] == ["/etc/prometheus/site.rules.yml", "/etc/prometheus/rules/gpuops-*.rules.yml"]
    targets = [t for a in merged["alerting"]["alertmanagers"] for c in a["static_configs"] for t in c["targets"]]
    assert targets == ["am.site:9093", "localhost:9093"]
    # No receiver, no rules: nothing of ours, and no key the site did not have.
    merged = _merged({"scrape_configs": []}, dcgm_alert_rules=False)
    assert "rule_files" not in merged and "alerting" not in merged
