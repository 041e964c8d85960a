# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in tools the simulated nodes run, exercised against every profile."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET

import pytest
import yaml
from ansible_collections.gpuops.cluster.plugins.module_utils import dcgm, ibstat, mig, pci
from ansible_collections.gpuops.cluster.plugins.module_utils import nvidia_smi as nvidia_smi_parsers
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import cpu_topology, parse_lscpu
from conftest import GPUSIM, PROFILE_NAMES, fixture, profile_summary
from hypothesis import given, settings
from hypothesis import strategies as st


def run(tool: str, *args: str, profile: str | None = None, env_extra: dict | None = None):
    env = dict(os.environ, GPUSIM_PROFILE_DIR=str(GPUSIM / "profiles" / (profile or "missing")), **(env_extra or {}))
    return subprocess.run([sys.executable, str(tool), *args], capture_output=True, text=True, env=env, check=False)


LSPCI = GPUSIM / "bin" / "lspci"
IBSTAT = GPUSIM / "bin" / "ibstat"
LSCPU = GPUSIM / "bin" / "lscpu"


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_lspci_Dnn_is_the_profile(name):
    assert run(LSPCI, "-Dnn", profile=name).stdout == (GPUSIM / "profiles" / name / "lspci-Dnn.txt").read_text()


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_lscpu_parse_is_the_profiles_topology(name):
    for flag in ("-p=CPU,CORE,SOCKET,NODE", "--parse=cpu,core,socket,node"):
        out = run(LSCPU, flag, profile=name)
        assert out.returncode == 0
        assert out.stdout == (GPUSIM / "profiles" / name / "lscpu-p.txt").read_text()
    topology = cpu_topology(parse_lscpu(out.stdout))
    # Every core of every socket has the threads its NUMA node's CPU ranges give (two on the x86
    # profiles: the cores' first threads, then their second; one on Grace).
    spec = yaml.safe_load((GPUSIM / "profiles" / f"{name}.yml").read_text())
    threads = len(spec["cpu"]["numa_cpus"][0].split(","))
    assert topology["threads_per_core"] == threads
    assert topology["cpus"] == topology["sockets_per_board"] * topology["cores_per_socket"] * threads


def test_lscpu_other_uses_run_the_real_one():
    out = run(LSCPU, "--version", profile="dgx-h100")
    assert out.returncode == 0
    assert "util-linux" in out.stdout


def test_lspci_formats():
    first_gpu = run(LSPCI, "-d", "10de:2330", profile="dgx-h100").stdout.splitlines()[0]
    assert first_gpu == "53:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)"
    assert run(LSPCI, "-n", "-s", "53:00.0", profile="dgx-h100").stdout == "53:00.0 0302: 10de:2330 (rev a1)\n"
    assert run(LSPCI, "-D", "-d", "::0680", profile="dgx-h100").stdout.count("NVSwitch") == 4


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(PROFILE_NAMES), vendor=st.sampled_from(["10de", "15b3", "8086", "1a03", "ffff"]))
def test_lspci_vendor_filter_keeps_exactly_that_vendor(name, vendor):
    full = run(LSPCI, "-Dnn", profile=name).stdout.splitlines()
    filtered = run(LSPCI, "-Dnn", "-d", f"{vendor}:", profile=name).stdout.splitlines()
    assert filtered == [line for line in full if f"[{vendor}:" in line]


def test_lspci_refuses_options_it_does_not_simulate():
    result = run(LSPCI, "-k", profile="dgx-h100")
    assert result.returncode == 2
    assert "unsupported argument '-k'" in result.stderr
    result = run(LSPCI, "-vvv", "-nn", profile="dgx-h100")
    assert result.returncode == 2 and "-v with -n or -d is not simulated" in result.stderr


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_lspci_vvv_puts_every_gpu_and_nic_below_its_bridges_and_the_acs_fault_on_the_gpus(name, tmp_path):
    faults = tmp_path / "faults.json"
    env = {"GPUSIM_FAULTS": str(faults)}
    devices = pci.parse_lspci_verbose(run(LSPCI, "-D", "-vvv", profile=name, env_extra=env).stdout)
    summary = profile_summary(name)
    # The GPUs and NICs (not the host bridge, the BMC's VGA or the NVSwitches, class 0680).
    endpoints = {
        d["pci_bus_id"]
        for d in pci.parse_lspci(run(LSPCI, "-Dnn", profile=name).stdout)
        if d["vendor_id"] in ("10de", "15b3") and d["class_id"] != "0680"
    }
    assert {d["pci_bus_id"] for d in devices} >= endpoints
    assert all(pci.pci_ancestors(devices, bus) for bus in endpoints)  # every GPU and NIC sits in a port
    assert not any((d["acs"] or {}).get("ReqRedir") for d in devices)
    faults.write_text('{"acs": [{"gpu": 0}]}')
    faulted = pci.parse_lspci_verbose(run(LSPCI, "-D", "-vvv", profile=name, env_extra=env).stdout)
    gpu0 = summary["gpu_pci_bus_ids"][0]
    nearest = pci.pci_ancestors(faulted, gpu0)[0]
    assert [d["pci_bus_id"] for d in faulted if (d["acs"] or {}).get("ReqRedir")] == [nearest["pci_bus_id"]]


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_ibstat_list_and_single_ca(name):
    names = sorted(n["name"] for n in profile_summary(name)["nics"])
    assert sorted(run(IBSTAT, "-l", profile=name).stdout.split()) == names
    one = run(IBSTAT, names[0], profile=name).stdout
    assert one.startswith(f"CA '{names[0]}'\n")
    assert one.count("CA '") == 1
    missing = run(IBSTAT, "mlx5_99", profile=name)
    assert missing.returncode == 255


@pytest.fixture(scope="module")
def nvidia_smi(tmp_path_factory, repo_builder):
    path = tmp_path_factory.mktemp("smi") / "nvidia-smi"
    path.write_text(repo_builder._template("nvidia-smi.py", DRIVER_VERSION="580.95.05", CUDA_VERSION="13.0"))
    return path


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_nvidia_smi_reports_the_installed_version_and_the_profile(nvidia_smi, name):
    out = run(nvidia_smi, "-q", "-x", profile=name).stdout
    root = ET.fromstring(out.split("\n", 2)[2])
    assert root.findtext("driver_version") == "580.95.05"
    assert root.findtext("cuda_version") == "13.0"
    assert [g.findtext("uuid") for g in root.findall("gpu")] == profile_summary(name)["gpu_uuids"]
    gsp = {g.findtext("gsp_firmware_version") for g in root.findall("gpu")}
    assert gsp == ({"N/A"} if name == "dgx1-v100" else {"580.95.05"})


def test_nvidia_smi_query_and_list(nvidia_smi):
    csv = run(nvidia_smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits", profile="pcie-l40s")
    assert csv.stdout.splitlines() == [f"{i}, NVIDIA L40S, 46068" for i in range(4)]
    assert run(nvidia_smi, "-L", profile="pcie-l40s").stdout.count("NVIDIA L40S (UUID: GPU-") == 4
    bad = run(nvidia_smi, "--query-gpu=bogus", "--format=csv", profile="pcie-l40s")
    assert bad.returncode == 2


def test_nvidia_smi_faults_busy_gpus_and_lost_gpus(nvidia_smi, tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text(
        json.dumps(
            {
                "gpu_processes": [{"pid": 4242, "gpu": 1, "used_memory": 2048, "name": "train"}],
                "lost_gpus": {"count": 1, "driver": "580.95.05"},
            }
        )
    )
    env = {"GPUSIM_FAULTS": str(faults)}
    fields = "--query-compute-apps=pid,gpu_uuid,used_memory,process_name"
    apps = run(nvidia_smi, fields, "--format=csv,noheader", profile="pcie-l40s", env_extra=env).stdout
    uuids = profile_summary("pcie-l40s")["gpu_uuids"]
    assert apps == f"4242, {uuids[1]}, 2048 MiB, train\n"
    xml = run(nvidia_smi, "-q", "-x", profile="pcie-l40s", env_extra=env).stdout
    root = ET.fromstring(xml.split("\n", 2)[2])
    assert [g.findtext("uuid") for g in root.findall("gpu")] == uuids[:-1]
    assert root.findtext("attached_gpus") == str(len(uuids) - 1)
    # Under another driver version the GPU is there.
    faults.write_text(json.dumps({"lost_gpus": {"count": 1, "driver": "570.133.20"}}))
    assert run(nvidia_smi, "-L", profile="pcie-l40s", env_extra=env).stdout.count("UUID: GPU-") == len(uuids)
    assert run(nvidia_smi, fields, "--format=csv,noheader", profile="pcie-l40s", env_extra=env).stdout == ""


def test_nvidia_smi_mig_profiles_are_the_real_h100s_and_parse(nvidia_smi, tmp_path):
    """With MIG off, `mig -lgip` on GPU 0 is the real H100's output byte for byte; every
    MIG-capable profile's tables parse with the collection's parsers."""
    env = {"GPUSIM_MIG_STATE": str(tmp_path / "mig.json"), "GPUSIM_DEV_ROOT": str(tmp_path)}
    lgip = run(nvidia_smi, "mig", "-i", "0", "-lgip", profile="dgx-h100", env_extra=env).stdout
    assert lgip == fixture("mig", "h100_80gb_lgip_7_profiles_mig_disabled_device_capture.txt")
    lgipp = run(nvidia_smi, "mig", "-i", "0", "-lgipp", profile="dgx-h100", env_extra=env).stdout
    assert lgipp == fixture("mig", "h100_80gb_lgipp_placements_device_capture.txt")
    for name in ("dgx-h100", "hgx-a100", "hgx-b200"):
        rows = nvidia_smi_parsers.parse_mig_profiles(
            run(nvidia_smi, "mig", "-lgip", profile=name, env_extra=env).stdout
        )
        assert len(rows) == 7 * profile_summary(name)["gpu_count"]
        assert {r["free"] == r["total"] for r in rows} == {True}
    no_mig = run(nvidia_smi, "mig", "-lgip", profile="pcie-l40s", env_extra=env)
    assert no_mig.stdout == "No MIG-capable devices found.\n" and no_mig.returncode != 0
    assert run(nvidia_smi, "-mig", "1", profile="pcie-l40s", env_extra=env).returncode != 0


def test_nvidia_smi_mig_instances_are_kept_and_listed(nvidia_smi, tmp_path):
    """Enable, create GPU and compute instances, list them, run out of slices, destroy."""
    env = {"GPUSIM_MIG_STATE": str(tmp_path / "mig.json"), "GPUSIM_DEV_ROOT": str(tmp_path)}

    def smi(*args):
        return run(nvidia_smi, *args, profile="dgx-h100", env_extra=env)

    nothing = smi("mig", "-lgi")
    assert nothing.stdout == "No MIG-enabled devices found.\n" and nothing.returncode == 6
    assert smi("-i", "0", "-mig", "1").stdout == "Enabled MIG Mode for GPU 00000000:53:00.0\nAll done.\n"
    assert smi("mig", "-lgi").stdout == "No GPU instances found: Not Found\n"
    created = smi("mig", "-i", "0", "-cgi", "9,2g.20gb,19,1g.10gb", "-C")
    assert created.returncode == 0 and created.stdout.count("Successfully created") == 8
    full = smi("mig", "-i", "0", "-cgi", "19")
    assert full.returncode != 0 and "Insufficient Resources" in full.stdout
    # Where a real H100 put the same four (NVIDIA/DCGM#138): 3g at 4:4, the others from slice 0.
    gis = nvidia_smi_parsers.parse_mig_instances(smi("mig", "-lgi").stdout)
    assert [(g["name"], g["placement"]["start"], g["placement"]["size"]) for g in gis] == [
        ("2g.20gb", 0, 2),
        ("1g.10gb", 2, 1),
        ("1g.10gb", 3, 1),
        ("3g.40gb", 4, 4),
    ]
    cis = nvidia_smi_parsers.parse_mig_compute_instances(smi("mig", "-lci").stdout)
    assert sorted(c["gpu_instance_id"] for c in cis) == sorted(g["instance_id"] for g in gis)
    xml = nvidia_smi_parsers.parse_query_xml(smi("-q", "-x").stdout)
    assert (xml["gpus"][0]["mig_mode"], xml["gpus"][0]["mig_devices"]) == ("enabled", 4)
    assert (xml["gpus"][1]["mig_mode"], xml["gpus"][1]["mig_devices"]) == ("disabled", 0)
    assert smi("-L").stdout.count("  MIG ") == 4
    # The caps nodes of each instance, at the minors the driver gives them.
    assert sorted(p.name for p in (tmp_path / "nvidia-caps").iterdir()) == sorted(
        f"nvidia-cap{mig.caps_minor(0, g['instance_id'], ci)}" for g in gis for ci in (None, 0)
    )
    # GPU instances with compute instances are not destroyed; without them they are.
    assert smi("mig", "-dgi").returncode != 0
    assert smi("mig", "-dci").returncode == 0 and smi("mig", "-dgi").returncode == 0
    assert smi("mig", "-lgi").stdout == "No GPU instances found: Not Found\n"


def test_nvidia_smi_mig_mode_waits_for_a_busy_gpu(nvidia_smi, tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"gpu_processes": [{"pid": 7, "gpu": 0}]}))
    env = {"GPUSIM_MIG_STATE": str(tmp_path / "mig.json"), "GPUSIM_FAULTS": str(faults)}

    def modes():
        out = run(
            nvidia_smi,
            "--query-gpu=mig.mode.current,mig.mode.pending",
            "--format=csv,noheader",
            profile="hgx-a100",
            env_extra=env,
        )
        return out.stdout.splitlines()[0]

    result = run(nvidia_smi, "-i", "0", "-mig", "1", profile="hgx-a100", env_extra=env)
    assert "pending enable state" in result.stdout and modes() == "Disabled, Enabled"
    assert run(nvidia_smi, "-i", "0", "-r", profile="hgx-a100", env_extra=env).returncode != 0
    faults.write_text("{}")
    assert run(nvidia_smi, "-i", "0", "-r", profile="hgx-a100", env_extra=env).returncode == 0
    assert modes() == "Enabled, Enabled"


def test_nvidia_smi_without_hardware_fails_like_the_real_one(nvidia_smi):
    result = run(nvidia_smi, "-q", "-x", profile=None)
    assert result.returncode == 9
    assert "couldn't communicate with the NVIDIA driver" in result.stdout


@pytest.fixture(scope="module")
def container_tools(tmp_path_factory, repo_builder, nvidia_smi):
    folder = tmp_path_factory.mktemp("ctk")
    tools = {}
    for name, template, values in (
        ("nvidia-ctk", "nvidia-ctk.py", {"VERSION": "1.18.0"}),
        ("dcgm-exporter", "dcgm-exporter.py", {"VERSION": "4.4.1-4.5.2"}),
        ("dcgmi", "dcgmi.py", {}),
    ):
        tools[name] = folder / name
        tools[name].write_text(repo_builder._template(template, **values))
    # The tools run nvidia-smi (GPUSIM_NVIDIA_SMI); a wrapper runs the stand-in with this Python.
    wrapper = folder / "nvidia-smi"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {nvidia_smi} "$@"\n')
    wrapper.chmod(0o755)
    tools["nvidia-smi"] = wrapper
    return tools


def run_with_smi(tools, name, *args, profile=None):
    return run(tools[name], *args, profile=profile, env_extra={"GPUSIM_NVIDIA_SMI": str(tools["nvidia-smi"])})


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_nvidia_ctk_cdi_spec_has_a_device_per_gpu_index_and_uuid(container_tools, name):
    result = run_with_smi(container_tools, "nvidia-ctk", "cdi", "generate", profile=name)
    assert result.returncode == 0, result.stderr
    uuids = profile_summary(name)["gpu_uuids"]
    names = [line.split('"')[1] for line in result.stdout.splitlines() if line.startswith("- name:")]
    assert names == [n for i, u in enumerate(uuids) for n in (str(i), u)] + ["all"]
    assert "libcuda.so.580.95.05" in result.stdout


def test_nvidia_ctk_fails_without_the_driver_like_the_real_one(container_tools):
    result = run_with_smi(container_tools, "nvidia-ctk", "cdi", "generate", profile=None)
    assert result.returncode == 1
    assert "failed to initialize NVML" in result.stderr


def test_dcgm_exporter_refuses_unknown_fields_and_bad_types(container_tools, tmp_path):
    for line, message in (
        ("DCGM_FI_DEV_NOT_A_FIELD, gauge, x", "could not find DCGM field DCGM_FI_DEV_NOT_A_FIELD"),
        ("DCGM_FI_DEV_GPU_TEMP, histogram, x", "metric type histogram"),
        ("DCGM_FI_DEV_GPU_TEMP gauge", "want 'field, type, help'"),
    ):
        csv = tmp_path / "c.csv"
        csv.write_text(f"# comment\n{line}\n")
        result = run_with_smi(container_tools, "dcgm-exporter", "-f", str(csv), profile="pcie-l40s")
        assert result.returncode == 1
        assert message in result.stderr


def test_dcgm_exporter_refuses_an_unreachable_host_engine(container_tools, tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature\n")
    result = run_with_smi(container_tools, "dcgm-exporter", "-f", str(csv), "-r", "127.0.0.1:1", profile="pcie-l40s")
    assert result.returncode == 1
    assert "cannot connect to the remote host engine" in result.stderr


def test_dcgmi_needs_the_host_engine(container_tools):
    result = run_with_smi(container_tools, "dcgmi", "discovery", "-l", "--host", "127.0.0.1:1")
    assert result.returncode == 255
    assert "Unable to connect to host engine" in result.stdout


def test_dcgmi_mndiag_reads_each_host_engine_and_writes_dcgms_report(container_tools):
    """The stand-in's report of DCGM's multi-node diagnostic reads as dcgmi's does (parse_dcgmi_mndiag):
    a faulted GPU fails on its own node, and a node whose engine does not answer ends the run."""

    def engine(hello):
        server = socket.create_server(("127.0.0.1", 0))

        def answer():
            while True:
                conn, _addr = server.accept()
                conn.sendall((json.dumps(hello) + "\n").encode())
                conn.close()

        threading.Thread(target=answer, daemon=True).start()
        return server

    ok = engine({"hostname": "tray1", "version": "4.4.1", "gpus": 4, "mndiag": {}})
    bad = engine({"hostname": "tray2", "version": "4.4.1", "gpus": 4, "mndiag": {"gpu": 3, "message": "GPU 3 erred"}})
    hosts = f"127.0.0.1:{ok.getsockname()[1]};127.0.0.1:{bad.getsockname()[1]}"
    result = run_with_smi(container_tools, "dcgmi", "mndiag", "--hostList", hosts, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    parsed = dcgm.parse_dcgmi_mndiag(result.stdout)
    assert parsed["status"] == "Fail" and parsed["hosts"] == {0: "tray1", 1: "tray2"}
    failed = [(r["host"], r["entity"], r["messages"]) for r in parsed["results"] if r["status"] == "Fail"]
    assert failed == [("tray2", "GPU 3", ["GPU 3 erred"])]
    lost = run_with_smi(container_tools, "dcgmi", "mndiag", "--hostList", hosts + ";127.0.0.1:1", "--json")
    assert lost.returncode == 255
    assert "(Host engine connection invalid/disconnected) -21" in dcgm.parse_dcgmi_mndiag(lost.stdout)["runtime_error"]


# --- The stand-in nvidia-mig-parted applies a mig-parted config through the stand-in nvidia-smi ---
MIG_CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  mixed:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
"""


@pytest.fixture
def mig_parted(container_tools, repo_builder, nvidia_smi, tmp_path):
    tool = tmp_path / "nvidia-mig-parted"
    tool.write_text(repo_builder._template("nvidia-mig-parted.py", VERSION="0.15.0"))
    (tmp_path / "config.yaml").write_text(MIG_CONFIG)
    log = tmp_path / "hooks.log"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$MIG_PARTED_HOOK" >> {log}\n')
    hook.chmod(0o755)
    hooks = {
        "version": "v1",
        "hooks": {
            n: [{"command": str(hook), "args": [n]}]
            for n in ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
        },
    }
    (tmp_path / "hooks.yaml").write_text(json.dumps(hooks))
    env = {
        "GPUSIM_NVIDIA_SMI": str(container_tools["nvidia-smi"]),
        "GPUSIM_MIG_STATE": str(tmp_path / "mig.json"),
        "GPUSIM_DEV_ROOT": str(tmp_path),
        "GPUSIM_FAULTS": str(tmp_path / "faults.json"),
    }

    def call(*args, profile="hgx-a100"):
        return run(tool, *args, profile=profile, env_extra=env)

    call.tmp, call.log = tmp_path, log
    call.smi = lambda *a: run(nvidia_smi, *a, profile="hgx-a100", env_extra=env)
    return call


def test_mig_parted_applies_a_config_and_asserts_it(mig_parted):
    cfg = ["-f", str(mig_parted.tmp / "config.yaml"), "-c", "mixed"]
    assert mig_parted("assert", *cfg).returncode == 1
    applied = mig_parted("apply", *cfg, "-k", str(mig_parted.tmp / "hooks.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert mig_parted.log.read_text().split() == ["apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit"]
    assert mig_parted("assert", *cfg).returncode == 0
    gis = nvidia_smi_parsers.parse_mig_instances(mig_parted.smi("mig", "-lgi").stdout)
    assert sorted(g["name"] for g in gis if g["gpu"] == 1) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert [g["name"] for g in gis if g["gpu"] == 0] == ["1g.10gb"] * 7
    # Again: nothing to do, only the start and exit hooks run.
    mig_parted.log.write_text("")
    assert mig_parted("apply", *cfg, "-k", str(mig_parted.tmp / "hooks.yaml")).returncode == 0
    assert mig_parted.log.read_text().split() == ["apply-start", "apply-exit"]
    exported = mig_parted("export").stdout
    assert "mig-enabled: true" in exported and "3g.40gb: 1" in exported
    off = mig_parted("apply", "-f", str(mig_parted.tmp / "config.yaml"), "-c", "all-disabled")
    assert off.returncode == 0 and "No MIG-enabled devices found." in mig_parted.smi("mig", "-lgi").stdout


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            MIG_CONFIG.replace("mig-enabled: false", "mig-enabled: false\n      mig-devicez: {}"),
            "unknown field 'mig-devicez'",
        ),
        (MIG_CONFIG.replace("version: v1", "version: v2"), "unknown version"),
        (MIG_CONFIG.replace('      mig-devices: {"1g.10gb": 7}\n', ""), "missing 'mig-devices' field"),
    ],
)
def test_mig_parted_refuses_what_the_real_schema_refuses(mig_parted, config, words):
    (mig_parted.tmp / "config.yaml").write_text(config)
    result = mig_parted("apply", "-f", str(mig_parted.tmp / "config.yaml"), "-c", "mixed")
    assert result.returncode == 1 and words in result.stderr
    assert "No MIG-enabled devices found." in mig_parted.smi("mig", "-lgi").stdout


def test_mig_parted_stops_where_a_busy_gpu_keeps_the_mode_pending(mig_parted):
    (mig_parted.tmp / "faults.json").write_text(json.dumps({"gpu_processes": [{"pid": 9, "gpu": 1}]}))
    result = mig_parted("apply", "-f", str(mig_parted.tmp / "config.yaml"), "-c", "mixed")
    assert result.returncode == 1 and "MIG mode change pending on GPU 1" in result.stderr
    assert "reboot the node" in result.stderr


SYSFS = GPUSIM / "bin" / "gpusim-sysfs"


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_sysfs_infiniband_is_the_profiles_ibstat_as_the_kernel_writes_it(name, tmp_path):
    env = {"GPUSIM_SYSFS": str(tmp_path / "sys"), "GPUSIM_FAULTS": str(tmp_path / "faults.json")}
    assert run(SYSFS, profile=name, env_extra=env).returncode == 0
    cas = ibstat.parse_ibstat(run(IBSTAT, profile=name, env_extra=env).stdout)
    root = tmp_path / "sys" / "class" / "infiniband"
    assert sorted(p.name for p in root.iterdir()) == sorted(ca["name"] for ca in cas)
    states = {"Active": "4: ACTIVE", "Down": "1: DOWN", "Initializing": "2: INIT", "Polling": "1: DOWN"}
    for ca in cas:
        assert (root / ca["name"] / "fw_ver").read_text() == ca["firmware_version"] + "\n"
        port = root / ca["name"] / "ports" / "1"
        assert (port / "state").read_text() == states[ca["ports"][0]["state"]] + "\n"
        assert (port / "link_layer").read_text() == ca["ports"][0]["link_layer"] + "\n"
        if ca["ports"][0]["state"] == "Active":
            assert (port / "rate").read_text().startswith(f"{ca['ports'][0]['rate']} Gb/sec (4X ")
        assert (port / "counters" / "port_xmit_wait").read_text() == "0\n"


def test_sysfs_faults_take_a_port_down_and_make_its_errors_rise(tmp_path):
    env = {"GPUSIM_SYSFS": str(tmp_path / "sys"), "GPUSIM_FAULTS": str(tmp_path / "faults.json")}
    (tmp_path / "faults.json").write_text(json.dumps({"ib_port_down": ["mlx5_4"], "ib_errors": {"mlx5_3": 30}}))
    written = (tmp_path / "faults.json").stat().st_mtime
    os.utime(tmp_path / "faults.json", (written - 120, written - 120))  # written two minutes ago
    assert run(SYSFS, profile="dgx-h100", env_extra=env).returncode == 0
    ports = tmp_path / "sys" / "class" / "infiniband"
    assert (ports / "mlx5_4" / "ports" / "1" / "state").read_text() == "1: DOWN\n"
    assert (ports / "mlx5_4" / "ports" / "1" / "phys_state").read_text() == "2: Polling\n"
    assert (ports / "mlx5_4" / "ports" / "1" / "counters" / "link_downed").read_text() == "1\n"
    assert int((ports / "mlx5_3" / "ports" / "1" / "counters" / "symbol_error").read_text()) >= 60
    (tmp_path / "faults.json").write_text("{}")
    assert run(SYSFS, profile="dgx-h100", env_extra=env).returncode == 0
    assert (ports / "mlx5_4" / "ports" / "1" / "state").read_text() == "4: ACTIVE\n"
    assert (ports / "mlx5_3" / "ports" / "1" / "counters" / "symbol_error").read_text() == "0\n"


def test_a_gb200_tray_registers_in_its_racks_nvlink_domain_and_a_fault_moves_one_gpu(nvidia_smi, tmp_path):
    """The tray's place from /etc/gpusim/fabric.json, read back through the collection's parsers as
    gpu_facts reads it: every GPU in the rack's cluster and clique, the node's nvlink_domain; a fault
    that leaves GPU3 In Progress in another clique is the domain's problem, naming GPU3; without a
    place, the profile's zero UUID is no domain."""
    rack = {"cluster_uuid": "9c6f5af3-53bf-49b5-a436-b66766c413c3", "clique_id": 32766}
    (tmp_path / "fabric.json").write_text(json.dumps(rack))
    env = {"GPUSIM_FABRIC": str(tmp_path / "fabric.json"), "GPUSIM_FAULTS": str(tmp_path / "faults.json")}

    def facts():
        query = nvidia_smi_parsers.parse_query_xml(
            run(nvidia_smi, "-q", "-x", profile="gb200-tray", env_extra=env).stdout
        )
        lspci = pci.classify(pci.parse_lspci(run(LSPCI, "-Dnn", profile="gb200-tray").stdout))
        return build_gpu_facts(lspci, query)

    found = facts()
    assert found["count"] == 4 and found["product"] == "NVIDIA GB200"
    assert found["nvlink_domain"] == dict(rack, gpus=[0, 1, 2, 3], problem=None)
    (tmp_path / "faults.json").write_text(json.dumps({"fabric": [{"gpu": 3, "state": "In Progress", "clique_id": 7}]}))
    problem = facts()["nvlink_domain"]["problem"]
    assert problem.startswith(f"not every GPU is registered in cluster {rack['cluster_uuid']} clique 32766: ")
    assert "GPU3" in problem and "GPU2" not in problem
    (tmp_path / "fabric.json").unlink()
    (tmp_path / "faults.json").unlink()
    assert facts()["nvlink_domain"] is None
