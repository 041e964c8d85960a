# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml end to end on the demo cluster: every layer where the hardware calls for it, from the
pinned stack, and a working Slurm cluster with accounting and GPU monitoring on top."""

from __future__ import annotations

import json
import os
import random
import re
import time
import urllib.parse
from pathlib import Path

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import hostlist, slurm
from hosts import injected_faults, management_address, name
from slurm_checks import accounted_gpu_job, assert_idle_with_gres

HEAD = "demo-head"
GPUS = {"demo-h100": 8, "demo-l40s": 4}
GRES = {"demo-h100": "gpu:h100:8", "demo-l40s": "gpu:l40s:4"}


def gpu_node(host):
    if name(host) not in GPUS:
        pytest.skip("GPU nodes")


def head(host):
    if name(host) != HEAD:
        pytest.skip("the head node")


def query(host, expr):
    """An instant PromQL query to the head's Prometheus: its result list."""
    url = "http://127.0.0.1:9090/api/v1/query?query=" + urllib.parse.quote(expr)
    return json.loads(host.check_output(f"curl -fsS '{url}'"))["data"]["result"]


def test_driver_at_the_pinned_version_with_fabric_manager_only_where_nvswitches_are(host):
    gpu_node(host)
    versions = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()
    assert versions == ["580.95.05"] * GPUS[name(host)]
    fabricmanager = host.package("nvidia-fabricmanager-580")
    if name(host) == "demo-h100":  # dgx-h100: 4 NVSwitches
        assert fabricmanager.version.startswith("580.95.05")
        assert host.service("nvidia-fabricmanager").is_running
    else:
        assert not fabricmanager.is_installed


def test_head_node_gets_no_gpu_stack(host):
    head(host)
    for package in ("nvidia-driver-580-open", "cuda-toolkit-12-8", "libnccl2", "datacenter-gpu-manager-4-core"):
        assert not host.package(package).is_installed, package


def test_cuda_cudnn_nccl_from_the_pinned_stack(host):
    gpu_node(host)
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.8"
    assert host.package("libcudnn9-cuda-12").version.startswith("9.10.2.21")
    assert host.package("libnccl2").version == "2.26.5-1+cuda12.8"
    held = set(host.check_output("apt-mark showhold").split())
    assert {"libnccl2", "libcudnn9-cuda-12", "cuda-toolkit-12-8"} <= held
    hcas = {
        "demo-h100": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
        "demo-l40s": "=mlx5_0:1",
    }[name(host)]
    assert f"NCCL_IB_HCA={hcas}" in host.file("/etc/nccl.conf").content_string.splitlines()


def test_slurm_and_munge_are_held_on_every_slurm_host(host):
    """An apt upgrade must not move one node's Slurm or munge apart from the others'."""
    held = set(host.check_output("apt-mark showhold").split())
    expected = {"munge", "slurmctld", "slurm-client"} if name(host) == HEAD else {"munge", "slurmd"}
    assert expected <= held, held


def test_rdma_stack_before_the_driver(host):
    """nvidia-peermem is built against the OFED in use: dpkg's log must show DOCA-OFED installed
    before the driver."""
    gpu_node(host)
    assert host.package("doca-ofed").is_installed
    log = host.file("/var/log/dpkg.log").content_string.splitlines()
    first = {}
    for number, line in enumerate(log):
        words = line.split()
        if len(words) > 3 and words[2] == "install":
            first.setdefault(words[3].split(":")[0], number)
    assert first["doca-ofed"] < first["nvidia-driver-580-open"], (first["doca-ofed"], first["nvidia-driver-580-open"])


def test_container_toolkit_and_cdi_spec(host):
    gpu_node(host)
    assert host.package("nvidia-container-toolkit").version.startswith("1.18.0")
    # The CDI spec names every GPU the driver reports, by index, plus "all".
    devices = set(host.check_output("nvidia-ctk cdi list").split())
    assert {f"nvidia.com/gpu={i}" for i in range(GPUS[name(host)])} | {"nvidia.com/gpu=all"} <= devices


def test_dcgm_exporter_serves_every_gpu(host):
    gpu_node(host)
    assert host.service("nvidia-dcgm").is_running
    # On the node's management address (the default), where the head's Prometheus scrapes it.
    metrics = host.check_output(f"curl -fsS http://{management_address(host)}:9400/metrics")
    temps = [line for line in metrics.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    assert len(temps) == GPUS[name(host)]


def test_prometheus_on_the_head_scrapes_both_gpu_nodes(host):
    head(host)
    # Until every GPU node's exporter has been scraped once (5 s apart); a slow machine needs longer.
    expected = str(sum(GPUS.values()))
    deadline = time.monotonic() + 180
    while True:
        out = host.check_output("curl -fsS 'http://127.0.0.1:9090/api/v1/query?query=count(DCGM_FI_DEV_GPU_TEMP)'")
        counted = [row["value"][1] for row in json.loads(out)["data"]["result"]]
        if counted == [expected] or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert counted == [expected]


def test_the_heads_alert_rules_judge_each_gpu_node_by_what_its_driver_prints(host):
    """The head's Prometheus evaluates the GPU alert rules on both GPU nodes' series: every GPU of the
    last run is known (gpuops_gpu_info, from each node's node exporter textfile) and reporting, the
    H100's GPUs carry their T.Limit slowdown margin, and the L40S's driver prints no threshold (as
    no public L40S capture shows one), so its 4 GPUs are pending as GPUs the temperature alert
    cannot judge. Nothing fires."""
    head(host)

    deadline = time.monotonic() + 120
    while True:
        known = query(host, "count by (node) (gpuops_gpu_info)")
        pending = query(host, 'ALERTS{alertname="GpuopsGpuThresholdUnknown"}')
        if len(pending) == GPUS["demo-l40s"] or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert {k["metric"]["node"]: int(k["value"][1]) for k in known} == GPUS
    assert {(p["metric"]["node"], p["metric"]["alertstate"]) for p in pending} == {("demo-l40s", "pending")}
    assert len(pending) == GPUS["demo-l40s"]
    margins = query(host, "gpuops_gpu_slowdown_tlimit_margin_celsius")
    assert len(margins) == GPUS["demo-h100"] and {m["value"][1] for m in margins} == {"-2"}
    assert query(host, 'ALERTS{alertstate="firing"}') == []
    assert query(host, 'ALERTS{alertname="GpuopsGpuMissing"}') == []
    # gpuops-health (slurmd's HealthCheckProgram, run at slurmd's start) left its result in each GPU
    # node's textfile folder: the node exporter serves it, and neither node is drained by it.
    checked = query(host, "gpuops_health_last_check_timestamp_seconds")
    assert {c["metric"]["node"] for c in checked} == set(GPUS)
    drained = query(host, "gpuops_health_drained")
    assert {(d["metric"]["node"], d["value"][1]) for d in drained} == {(node, "0") for node in GPUS}


def test_the_health_check_reads_dcgm_s_health_watches_and_fails_the_gpu_dcgm_fails(host):
    """gpuops-health where DCGM runs: its dcgm_health check turns DCGM's health watches on where none is
    (those of this node's systems: NVLink only on the NVSwitch node), passes on a healthy answer, and
    fails the GPU of a Failure incident the stand-in host engine reports, with DCGM's message; cleared,
    it passes again. Report mode: it prints and changes nothing in Slurm."""
    gpu_node(host)

    def check():
        out = host.run("/usr/local/sbin/gpuops-health --json")
        assert out.rc in (0, 1), out.stderr
        return [r for r in json.loads(out.stdout)["checks"] if r["check"] == "dcgm_health"]

    check()  # sets the watches if nv-hostengine has none (a restart clears them)
    assert host.file("/run/gpusim/dcgm-health-watches").content_string == (
        "pmitdn" if name(host) == "demo-h100" else "pmitd"
    )
    assert [(r["subject"], r["verdict"], r["measured"]) for r in check()] == [("all GPUs", "pass", "Healthy")]
    message = "Detected 1 volatile double-bit ECC error(s) in GPU 1."
    fault = {"dcgm_health": {"gpu": 1, "system": "Memory system", "health": "Failure", "message": message}}
    with injected_faults(host, fault):
        assert [(r["subject"], r["verdict"], r["measured"]) for r in check()] == [
            ("GPU1", "fail", f"Memory system: Failure: {message}")
        ]
    assert [r["verdict"] for r in check()] == ["pass"]


def test_sharp_am_on_its_host(host):
    if name(host) != "demo-h100":
        pytest.skip("the sharp_am host")
    assert host.service("sharp_am").is_running


def test_slurm_nodes_idle_with_their_gpus(host):
    head(host)
    assert_idle_with_gres(host, GRES)


def test_jobs_run_across_nodes_and_are_accounted_with_their_gpus(host):
    head(host)
    out = host.check_output("srun --immediate=120 --nodes=2 --ntasks-per-node=1 hostname")
    assert sorted(out.split()) == sorted(GPUS)
    record = accounted_gpu_job(host, "gpu:h100:2", "site-gpu")
    assert (record["JobName"], record["State"], record["NodeList"]) == ("site-gpu", "COMPLETED", "demo-h100")
    assert "gres/gpu:h100=2" in record["AllocTRES"]


DASHBOARD = Path(__file__).resolve().parents[3] / "roles" / "dcgm" / "files" / "gpuops-dcgm-dashboard.json"


def test_the_dashboard_s_health_panels_answer_for_each_gpu_node(host):
    """The head row's gpuops-health panels, as the role ships them, answer for both GPU nodes, where
    slurmd runs gpuops-health: no check failing on either, and a last check minutes old at most."""
    head(host)
    panels = {
        p["title"]: p["targets"][0]["expr"].replace('=~"$node"', '=~".+"')
        for p in json.loads(DASHBOARD.read_text())["panels"]
        if any("gpuops_health_" in t["expr"] for t in p.get("targets", []))
    }
    failed = query(host, panels["Failed health checks per node"])
    assert {(r["metric"]["node"], r["value"][1]) for r in failed} == {(node, "0") for node in GPUS}
    ages = query(host, panels["Age of the last health check"])
    assert {r["metric"]["node"] for r in ages} == set(GPUS)
    assert all(0 <= float(r["value"][1]) < 3600 for r in ages)


def test_a_running_job_s_gpus_join_dcgm_s_utilisation_in_prometheus(host):
    """GPU use per job (slurm_job_gpu_metrics): slurm.conf names the Prolog and Epilog (every compute
    node has recorded them), a job holding two H100 GPUs gets one gpuops_slurm_job_gpu_info series per
    GPU from its node's node exporter, and the dashboard's per-job panel query, as the role ships it,
    joins them with DCGM's utilisation: the job's id, user and account with the mean of its two GPUs.
    Once the job is cancelled the Epilog removes the series."""
    head(host)
    conf = host.check_output("scontrol show config")
    assert re.search(r"^Prolog\s+= /usr/local/sbin/gpuops-slurm-prolog$", conf, re.M), conf
    assert re.search(r"^PrologFlags\s+= Alloc", conf, re.M)

    job = host.check_output(
        "sbatch --parsable --job-name=site-job-gpus --gres=gpu:h100:2 --output=/dev/null --wrap 'sleep 300'"
    ).strip()
    try:
        panel = next(
            p
            for p in json.loads(DASHBOARD.read_text())["panels"]
            if p["title"] == "GPU utilization per running Slurm job"
        )
        expr = panel["targets"][0]["expr"].replace('=~"$node"', '=~".+"')
        deadline = time.monotonic() + 120
        while True:
            info = query(host, f'gpuops_slurm_job_gpu_info{{jobid="{job}"}}')
            joined = [r for r in query(host, expr) if r["metric"].get("jobid") == job]
            if (len(info) == 2 and joined) or time.monotonic() > deadline:
                break
            time.sleep(3)
        assert sorted((r["metric"]["node"], r["metric"]["gpu"]) for r in info) in (
            [("demo-h100", str(a)), ("demo-h100", str(b))] for a in range(8) for b in range(a + 1, 8)
        ), info
        assert {r["metric"]["user"] for r in info} == {"root"}
        (row,) = joined
        assert row["metric"]["user"] == "root" and row["metric"]["account"] == info[0]["metric"]["account"]
        utilisation = float(row["value"][1])
        direct = [
            float(r["value"][1])
            for r in query(host, "DCGM_FI_DEV_GPU_UTIL" + '{node="demo-h100"}')
            if r["metric"]["gpu"] in {i["metric"]["gpu"] for i in info}
        ]
        assert len(direct) == 2 and abs(utilisation - sum(direct) / 2) < 1e-6
    finally:
        host.run(f"scancel {job}")
    deadline = time.monotonic() + 120
    while query(host, f'gpuops_slurm_job_gpu_info{{jobid="{job}"}}') and time.monotonic() < deadline:
        time.sleep(3)
    assert query(host, f'gpuops_slurm_job_gpu_info{{jobid="{job}"}}') == []


def test_demo_summary_reads_the_cluster_back(host):
    """The side effect ran make demo's summary playbook; its text has every part a person reads."""
    head(host)
    text = Path(os.environ["DEMO_SUMMARY"]).read_text()
    assert "8 x NVIDIA H100 80GB HBM3 (hopper, compute 9.0)" in text
    assert "4 x NVIDIA L40S (ada, compute 8.9)" in text
    assert re.search(r"^  0 +81559 MiB +0 +0-55,112-167 +7 +mlx5_0 \(PIX\)$", text, re.M)
    # NVIDIA's revision: -1 in its Debian folders, -0ubuntu1 in its Ubuntu ones.
    assert re.search(r"^ +nvidia-driver-580-open +580\.95\.05-(1|0ubuntu1)  \(held\)$", text, re.M)
    assert re.search(r"^demo-h100 +gpu\* +idle +224 ", text, re.M)
    assert "NodeName=demo-h100 Name=gpu Type=h100 File=/dev/nvidia4 Cores=56-111" in text
    assert "demo-h100: CUDA_VISIBLE_DEVICES=0,1" in text
    assert re.search(r"^\d+\|COMPLETED\|demo-h100\|.*gres/gpu:h100=2", text, re.M)
    assert "Prometheus on demo-head: 12 GPUs report DCGM metrics" in text


# --- validation (roles/validate): the converge's gate, then the side effect's faulted and healed runs


REPORTS = Path(os.environ.get("GPUOPS_VALIDATE_REPORT_DIR", "validate-report"))
# What each injected fault must fail (molecule/site/side_effect.yml), and nothing else.
INJECTED = {
    "demo-h100": {
        ("nvlink", "GPU3"),
        ("pcie", "GPU5"),
        ("ib_ports", "mlx5_4:1"),
        ("hca_firmware", "mlx5_9"),
        ("xid", "GPU2"),
    },
    "demo-l40s": {("dcgm_diag", "software"), ("nccl_node", "demo-l40s"), ("acs", "0000:00:02.0")},
}


def report(which):
    folder = REPORTS if which == "converge" else REPORTS.parent / f"validate-{which}"
    return json.loads((folder / "validation.json").read_text()), (folder / "validation.html").read_text()


def failed(node):
    return {(c["check"], c["subject"]) for c in node["checks"] if c["verdict"] == "fail"}


def test_the_converged_cluster_passes_the_gate_with_thresholds_from_its_hardware(host):
    head(host)
    data, _html = report("converge")
    assert data["verdict"] == "pass", data["findings"]
    assert sorted(data["nodes"]) == ["demo-h100", "demo-l40s"] and not data["drain"]
    checks = {h: {c["check"]: c for c in n["checks"]} for h, n in data["nodes"].items()}
    h100, l40s = checks["demo-h100"], checks["demo-l40s"]
    # The single-node floor comes from 18 NVLink 4 links at 26.562 GB/s (dgx-h100), the published
    # 476 GB/s is what the stand-in nccl-tests reaches; the L40S node has no NVLink at all.
    assert h100["nccl_node"]["verdict"] == "pass" and h100["nccl_node"]["floor"] == 435.4
    assert "18 NVLink links x 26.562" in h100["nccl_node"]["reason"]
    assert l40s["nvlink"]["verdict"] == "skip" and "PCIe only" in l40s["nccl_node"]["reason"]
    assert h100["ib_ports"]["subject"] == "8 InfiniBand port(s)" and l40s["ib_ports"]["subject"] == "1 Ethernet port(s)"
    for node in (h100, l40s):
        for check in (
            "gpu_count",
            "driver_version",
            "persistence_mode",
            "ecc",
            "xid",
            "pcie",
            "acs",
            "nccl_hcas",
            "dcgm_diag",
            "hca_firmware",
        ):
            assert node[check]["verdict"] == "pass", (check, node[check])
        # The demo's slurmd takes slurm.conf's counts (config_overrides): visibly skipped.
        assert node["slurmd"]["verdict"] == "skip" and "config_overrides" in node["slurmd"]["reason"]
    cluster = {c["subject"]: c for c in data["cluster"]["checks"]}
    assert "the only node on the InfiniBand fabric" in cluster["demo-h100"]["reason"]


def test_each_injected_fault_fails_exactly_its_own_check(host):
    head(host)
    data, _html = report("faulted")
    assert data["verdict"] == "fail"
    for node, expected in INJECTED.items():
        assert failed(data["nodes"][node]) == expected, node
    h100 = {(c["check"], c["subject"]): c for c in data["nodes"]["demo-h100"]["checks"]}
    assert "inactive: link 5" in h100[("nvlink", "GPU3")]["measured"]
    assert (h100[("pcie", "GPU5")]["expected"], h100[("pcie", "GPU5")]["measured"]) == ("Gen5 x16", "Gen3 x8")
    assert h100[("ib_ports", "mlx5_4:1")]["measured"] == "200 Gb/s"
    assert (h100[("hca_firmware", "mlx5_9")]["expected"], h100[("hca_firmware", "mlx5_9")]["measured"]) == (
        "28.39.1002",
        "28.37.1014",
    )
    assert "Xid 79 (GPU has fallen off the bus)" == h100[("xid", "GPU2")]["measured"]
    l40s = {(c["check"], c["subject"]): c for c in data["nodes"]["demo-l40s"]["checks"]}
    assert "inforom is corrupt" in l40s[("dcgm_diag", "software")]["reason"]
    assert l40s[("nccl_node", "demo-l40s")]["verdict"] == "fail"
    assert l40s[("acs", "0000:00:02.0")]["measured"] == "ReqRedir+ CmpltRedir+"
    assert "of GPU1 below it" in l40s[("acs", "0000:00:02.0")]["reason"]


def test_the_gate_drains_exactly_the_failing_nodes_with_their_checks_as_the_reason(host):
    head(host)
    data, _html = report("faulted")
    folder = REPORTS.parent / "validate-faulted"
    states = {}
    for line in (folder / "sinfo.txt").read_text().splitlines():
        node, state, reason = line.split("|", 2)
        states[node] = (state, reason)
    for node, expected in INJECTED.items():
        state, reason = states[node]
        assert state.startswith("drain"), (node, state)
        assert reason == data["drain"][node]
        assert reason.startswith("gpuops-validate: ")
        assert {tuple(item.split(" ", 1)) for item in reason[len("gpuops-validate: ") :].split(", ")} == expected
    for node, expected in INJECTED.items():
        message = json.loads((folder / f"failure-{node}.json").read_text())
        assert message[0].startswith(f"Validation failed on {node}; report: ")
        assert len(message) == 1 + len(expected) and all(line.startswith(node + ": ") for line in message[1:])


def test_the_report_shows_each_fault_to_a_person(host):
    head(host)
    _data, html = report("faulted")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    assert 'src="http' not in html and "<link" not in html  # self-contained: nothing fetched
    for text in (
        "demo-h100",
        "demo-l40s",
        "inactive: link 5",
        "Gen3 x8",
        "28.37.1014",
        "Xid 79",
        "inforom is corrupt",
        "drain: gpuops-validate: ",
        "bus bandwidth",
    ):
        assert text in html, text
    # A bandwidth plot and a topology picture per node (matplotlib SVG, text kept as text).
    assert html.count("<svg") >= 4
    assert "NVSw" in html and "GPU7" in html and "_11" in html and "NUMA1" in html


def test_the_healed_cluster_passes_and_is_resumed(host):
    head(host)
    data, _html = report("healed")
    assert data["verdict"] == "pass", data["findings"]
    assert sorted(data["resume"]) == ["demo-h100", "demo-l40s"]
    states = host.check_output("sinfo -h -N -o '%N|%t'").split()
    for node in INJECTED:
        assert not any(line.startswith(node + "|drain") for line in states), states


def test_slurmd_c_of_the_real_slurm_matches_the_node_line_built_from_the_same_hardware(host):
    """The slurmd comparison, honestly: Slurm's own slurmd -C sees the container's real CPUs and
    memory, not the profile's, so the NodeName values are built here from the same real hardware
    (the real lscpu, not gpusim's, and /proc/meminfo) the way the slurm role builds them."""
    gpu_node(host)
    measured = slurm.parse_slurmd_config(host.check_output("slurmd -C"))
    topology = slurm.cpu_topology(slurm.parse_lscpu(host.check_output("/usr/bin/lscpu -p=CPU,CORE,SOCKET,NODE")))
    memtotal = int(re.search(r"MemTotal:\s+(\d+) kB", host.file("/proc/meminfo").content_string).group(1)) // 1024
    real = slurm.real_memory(memtotal, 5, 1024)
    declared = {
        "CPUs": topology["cpus"],
        "Boards": topology["boards"],
        "SocketsPerBoard": topology["sockets_per_board"],
        "CoresPerSocket": topology["cores_per_socket"],
        "ThreadsPerCore": topology["threads_per_core"],
        "RealMemory": real,
    }
    assert slurm.compare_node(declared, measured, memtotal - real) == []
    # And the comparison catches a wrong line: the profile's counts are not the container's.
    assert slurm.compare_node(dict(declared, CPUs=declared["CPUs"] + 1), measured, memtotal - real)


def _random_host_sets(count, seed=20261123):
    """Host sets of the shapes sites use: prefixes with digits and dashes, zero padding, a text
    after the number (node-01-gpu), several numbers in a name (rack1-node04), gaps."""
    rng = random.Random(seed)
    sets = []
    for _set in range(count):
        prefix = rng.choice(["node", "gpu", "n", "rack1-node", "hk-gpu", "a", "dgx-h100-"])
        suffix = rng.choice(["", "", "", "-ib", "-gpu", "b"])
        width = rng.choice([0, 2, 3])
        numbers = rng.sample(range(0, 120), rng.randint(1, 12))
        sets.append(sorted({f"{prefix}{str(n).zfill(width)}{suffix}" for n in numbers}))
    return sets


def test_hostlists_agree_with_slurms_own_scontrol_both_ways(host):
    """Differential test against the installed Slurm (the platform's): what hostlist_compress writes,
    scontrol expands to the same hosts; what scontrol compresses, hostlist_expand reads back."""
    head(host)
    sets = _random_host_sets(200)
    ours = [hostlist.hostlist_compress(hosts) for hosts in sets]
    script = "".join(
        f"echo '=== {i}'; scontrol show hostnames '{expression}' 2>&1; echo '--- {i}'; "
        f"scontrol show hostlist '{','.join(hosts)}' 2>&1; "
        for i, (expression, hosts) in enumerate(zip(ours, sets, strict=True))
    )
    out = host.check_output(f"bash -c {json.dumps(script)}")
    blocks = re.split(r"^=== \d+\n", out, flags=re.M)[1:]
    assert len(blocks) == len(sets)
    for hosts, expression, block in zip(sets, ours, blocks, strict=True):
        expanded, _sep, slurm_compressed = block.partition("---")
        slurm_compressed = slurm_compressed.split("\n", 1)[1].strip()
        assert sorted(expanded.split()) == hosts, (expression, expanded)
        assert sorted(hostlist.hostlist_expand(slurm_compressed)) == hosts, slurm_compressed
