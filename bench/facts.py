# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the hardware facts: parse time per captured output, and module wall time.

    python bench/facts.py [--repeat N]

Prints numbers; it is never a pass/fail test. The target (issue: hardware facts) is parsing a
whole 8-GPU, 12-NIC node (lspci + nvidia-smi -q -x + topo -m + ibstat) in under 5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.gpuops.cluster.plugins.module_utils import (  # noqa: E402
    apt_index,
    bundle,
    canonical,
    dcgm,
    gpu_inventory,
    host,
    hostlist,
    ibstat,
    k8s,
    nccl_tests,
    nvidia_smi,
    pci,
    secureboot,
    slurm,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError  # noqa: E402

GPUSIM = ROOT / "tests" / "gpusim"
FIXTURES = ROOT / "tests" / "unit" / "fixtures"
PARSERS = {
    "topo": nvidia_smi.parse_topo,
    "smi_xml": nvidia_smi.parse_query_xml,
    "ibstat": ibstat.parse_ibstat,
    "ibdev2netdev": ibstat.parse_ibdev2netdev,
    "lspci": pci.parse_lspci,
    "lspci_vvv": pci.parse_lspci_verbose,
    "nvlink": nvidia_smi.parse_nvlink_status,
    "smi_csv": nvidia_smi.parse_query_csv,
    "nccl_tests": nccl_tests.parse_nccl_tests,
    "dcgmi_diag": dcgm.parse_dcgmi_diag,
    "slurmd_C": slurm.parse_slurmd_config,
    "ibv_devinfo": ibstat.parse_ibv_devinfo,
    "ibstatus": ibstat.parse_ibstatus,
}
# Hostile input for the validation parsers: 100k-character lines of what their patterns repeat.
# Each must stay linear (a few ms), never backtrack.
HOSTILE = {
    "nvlink: a 100k-digit link speed": (nvidia_smi.parse_nvlink_status, "GPU 0: x (UUID: a)\n Link 0: " + "1" * 100000),
    "query csv: 100k unit brackets": (nvidia_smi.parse_query_csv, "a\n" + "[" * 100000),
    "nccl-tests: 50k-column row": (nccl_tests.parse_nccl_tests, "#  size count type busbw time time\n" + "1 " * 50000),
    "nccl-tests: 100k-digit Avg line": (nccl_tests.parse_nccl_tests, "# Avg bus bandwidth : " + "1" * 100000 + "x"),
    "nccl-tests: 20k launcher prefixes without their pid": (nccl_tests.parse_nccl_tests, "(head, rank=0, " * 20000),
    "dcgmi diag: a 200k-space row": (dcgm.parse_dcgmi_diag, "|" + " " * 100000 + "|" + " " * 100000),
    "dcgmi diag: a 100k-dash section border": (dcgm.parse_dcgmi_diag, "|-" + "-" * 100000 + " a " + "-" * 1000),
    # 10 s before (issue: trust, item 3): a lazy section pattern backtracked over the spaces.
    "dcgmi diag: a section border with 60k spaces": (dcgm.parse_dcgmi_diag, "+-+\n|- x" + " " * 60000 + "y"),
    "slurmd -C: 100k 'a=' words": (slurm.parse_slurmd_config, "NodeName=" + "a=" * 100000),
    "ibv_devinfo: 20k PORT_ in a state": (ibstat.parse_ibv_devinfo, "hca_id: a\nport: 1\nstate: " + "PORT_A" * 20000),
    # The inputs a review found quadratic or unbounded (issue: reliability and security, item 4).
    "ibstat: a 32k-space line without a colon": (ibstat.parse_ibstat, "CA 'a'\n" + "a" + " " * 32000 + "x"),
    "lspci: 4,000 '[0300]: ' groups on one line": (pci.parse_lspci, "0000:00:00.0 " + "[0300]: x " * 4000),
    "lspci -vvv: a 200k-bit ACSCtl line": (
        pci.parse_lspci_verbose,
        "00:01.0 PCI bridge: x\n\t\tACSCtl:\t" + "SrcValid+ " * 200000,
    ),
    "lspci -vvv: 100k bridges' Bus: lines under one device": (
        pci.parse_lspci_verbose,
        "00:01.0 PCI bridge: x\n" + "\tBus: primary=00, secondary=01, subordinate=02\n" * 100000,
    ),
    "apt-cache policy: 200k blank lines": (host.apt_candidate, "\n" * 200000),
    "modinfo: a 200k-letter line without a colon": (secureboot.parse_modinfo, "filename: x\n" + "a" * 200000),
    "dkms.conf: 100k different BUILT_MODULE_NAME lines": (
        secureboot.dkms_module_names,
        "".join(f'BUILT_MODULE_NAME[{i}]="m{i}"\n' for i in range(100000)),
    ),
    "openssl x509: a 200k-digit serial": (secureboot.parse_openssl_x509, "serial=" + "0F" * 100000 + "\n"),
    "apt-cache show: a 200k-alternative Depends, then module_driver": (
        lambda text: canonical.module_driver(canonical.parse_index(text)["p"][0], "580"),
        "Package: p\nVersion: 1\nDepends: " + "a (>= 1) | " * 200000 + "\n",
    ),
    "Packages: a 200k-alternative Depends, then the closure": (
        lambda text: apt_index.closure([("p", None)], apt_index.parse_packages(text)),
        "Package: p\nVersion: 1\nArchitecture: amd64\nFilename: p.deb\nSize: 1\nSHA256: "
        + "0" * 64
        + "\nDepends: "
        + "a (>= 1) | " * 200000
        + "b\n",
    ),
    "Release: a SHA256 section of 200k lines": (
        lambda text: bundle.release_checksums(bundle.release_text(text)),
        "SHA256:\n" + (" " + "0" * 64 + " 1 Packages\n") * 200000,
    ),
    "InRelease: 200k dash-escaped lines, no signature (refused)": (
        bundle.release_text,
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n" + "- x\n" * 200000,
    ),
    "Debian versions: two 100k-character upstream parts": (
        lambda text: apt_index.compare_versions(text + "a", text + "b"),
        "1" + "0.a~" * 25000,
    ),
    "hostlist_expand: n[1-100000]": (hostlist.hostlist_expand, "n[1-100000]"),
    "hostlist_expand: a[1-1000]b[1-1000] (refused)": (hostlist.hostlist_expand, "a[1-1000]b[1-1000]"),
    "mig -lgip: a row of 50k 'MIG ' words": (nvidia_smi.parse_mig_profiles, "|   0 " + "MIG " * 50000 + "|"),
    "mig -lgi: a 100k-digit placement": (nvidia_smi.parse_mig_instances, "|  0  MIG a  1  2  " + "1" * 100000 + ":"),
    "mig -lci: 50k numbers before the MIG word": (
        nvidia_smi.parse_mig_compute_instances,
        "|  0  " + "1 " * 50000 + "MIG a  1  2  " + "1" * 1000 + ":x |",
    ),
    "mig -lgipp: 50k starts in the braces": (
        nvidia_smi.parse_mig_placements,
        "GPU 0 Profile ID 1 Placements: {" + "0," * 50000 + "}:",
    ),
    "ibstatus: 50k words before a colon": (
        ibstat.parse_ibstatus,
        "Infiniband device 'a' port 1 status:\n" + "a " * 50000 + ":x",
    ),
    "kubeadm join command: 200k '--token' words": (k8s.parse_join_command, "kubeadm join x " + "--token " * 200000),
    "node labels: a 100k-character key and value": (k8s.label_problems, {"a" * 100000: "b" * 100000}),
}
PROFILE_FILES = {
    "lspci": "lspci-Dnn.txt",
    "smi_xml": "nvidia-smi-q-x.xml",
    "topo": "nvidia-smi-topo-m.txt",
    "ibstat": "ibstat.txt",
}


def best_ms(function, repeat):
    """Median of ``repeat`` runs, in milliseconds."""
    times = []
    for _run in range(repeat):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def parse_fixtures(repeat):
    print(f"{'parse (median of ' + str(repeat) + ')':<72} {'ms':>8}")
    for kind, parser in PARSERS.items():
        for path in sorted((FIXTURES / kind.removesuffix("_vvv")).iterdir()):
            other_lspci = kind.startswith("lspci") and ("_vvv_" in path.name) != kind.endswith("_vvv")
            if "noheader" in path.name or other_lspci:
                continue  # needs its field list; lspci -Dnn and -vvv captures share a folder
            text = path.read_text()
            print(f"  {kind + '/' + path.name:<70} {best_ms(lambda t=text, p=parser: p(t), repeat):8.3f}")


def big_node_facts():
    """The facts of a 512-GPU node (one NVLink domain, 16 NICs): lspci, topology, build."""
    lines = [
        f"0000:{b // 256:02x}:{b % 256:02x}.0 3D controller [0302]: NVIDIA Corporation GH100 [10de:2330] (rev a1)"
        for b in range(512)
    ]
    found = pci.classify(pci.parse_lspci("\n".join(lines)))
    gpus = [f"GPU{i}" for i in range(512)]
    nics = [f"mlx5_{i}" for i in range(16)]
    links = {g: {**{o: "NV18" for o in gpus if o != g}, **{n: "SYS" for n in nics}} for g in gpus}
    topology = {"gpus": gpus, "nics": nics, "links": links, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}}
    return gpu_inventory.build_gpu_facts(found, None, topology)


def hostile(repeat):
    print(f"\n{'hostile input (median of ' + str(repeat // 10) + ')':<72} {'ms':>8}")
    for label, (parser, text) in HOSTILE.items():

        def run(parser=parser, text=text):
            try:
                parser(text)
            except (ParseError, ValueError):  # the refusal is the expected answer to some of them
                pass

        print(f"  {label:<70} {best_ms(run, max(3, repeat // 10)):8.3f}")
    print(f"  {'gpu_inventory: the facts of a 512-GPU node':<70} {best_ms(big_node_facts, 3):8.3f}")


def whole_node(repeat):
    print(f"\n{'whole node: parse all four outputs and build the facts':<72} {'ms':>8}")
    for profile in sorted(p.name for p in (GPUSIM / "profiles").iterdir() if p.is_dir()):
        texts = {kind: (GPUSIM / "profiles" / profile / name).read_text() for kind, name in PROFILE_FILES.items()}

        def run(texts=texts):
            found = pci.classify(pci.parse_lspci(texts["lspci"]))
            query = nvidia_smi.parse_query_xml(texts["smi_xml"])
            topo = nvidia_smi.parse_topo(texts["topo"])
            ibstat.parse_ibstat(texts["ibstat"])
            return gpu_inventory.build_gpu_facts(found, query, topo)

        facts = run()
        label = f"{profile} ({facts['count']} GPUs, {len(facts['topology']['nics'])} NICs)"
        print(f"  {label:<70} {best_ms(run, repeat):8.3f}")


def stand_in_bin(directory, driver_version="570.133.20", cuda_version="12.8"):
    template = (GPUSIM / "repo" / "nvidia-smi.py").read_text()
    smi = directory / "nvidia-smi"
    smi.write_text(template.replace("@DRIVER_VERSION@", driver_version).replace("@CUDA_VERSION@", cuda_version))
    for tool in ("lspci", "ibstat", "ibdev2netdev"):
        shutil.copy(GPUSIM / "bin" / tool, directory / tool)
    for tool in directory.iterdir():
        tool.chmod(0o755)


def run_module(argv, env):
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if '"failed": true' in result.stdout or result.returncode:
        raise SystemExit(f"{argv[2]} failed: {result.stdout}{result.stderr}")


def module_wall(repeat):
    print(f"\n{'module wall time with the stand-in tools (python start included)':<72} {'ms':>8}")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        (tmp / "bin").mkdir()
        stand_in_bin(tmp / "bin")
        args = tmp / "args.json"
        for profile in ("dgx-h100", "hgx-b200"):
            env = dict(
                os.environ,
                PATH=f"{tmp / 'bin'}:{os.environ['PATH']}",
                GPUSIM_PROFILE_DIR=str(GPUSIM / "profiles" / profile),
                PYTHONPATH=str(ROOT / ".collections"),
            )
            for module, options in (("gpu_facts", {}), ("gpu_facts", {"topology": False}), ("ib_facts", {})):
                args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": options}))
                argv = [sys.executable, "-m", f"ansible_collections.gpuops.cluster.plugins.modules.{module}", str(args)]

                label = f"{profile} {module} {json.dumps(options) if options else ''}"
                print(f"  {label:<70} {best_ms(partial(run_module, argv, env), max(3, repeat // 20)):8.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    parse_fixtures(args.repeat)
    hostile(args.repeat)
    whole_node(args.repeat)
    module_wall(args.repeat)


if __name__ == "__main__":
    main()
