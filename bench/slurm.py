# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the Slurm node description: one node's spec, and grouping a large cluster.

    python bench/slurm.py [--repeat N]

Prints numbers; it is never a pass/fail test. Targets: describing a DGX H100 (224 CPUs, 8 GPUs)
in under 10 ms, and grouping 4,096 nodes of four hardware types into slurm.conf lines in under
1 s, so that a large site's run spends its time on the nodes, not on the controller.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import (  # noqa: E402
    parse_query_xml,
    parse_topo,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import group_nodes, node_spec  # noqa: E402

PROFILES = ROOT / "tests" / "gpusim" / "profiles"


def profile_inputs(name):
    folder = PROFILES / name
    facts = build_gpu_facts(
        classify(parse_lspci((folder / "lspci-Dnn.txt").read_text())),
        parse_query_xml((folder / "nvidia-smi-q-x.xml").read_text()),
        parse_topo((folder / "nvidia-smi-topo-m.txt").read_text()),
    )
    return (folder / "lscpu-p.txt").read_text(), facts


def timed(func, repeat):
    samples = []
    for _round in range(repeat):
        start = time.perf_counter()
        result = func()
        samples.append(time.perf_counter() - start)
    return result, statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    specs = {}
    for name in ("dgx-h100", "hgx-b200", "pcie-l40s", "dgx1-v100"):
        lscpu, facts = profile_inputs(name)
        spec, seconds = timed(partial(node_spec, lscpu, facts, 2063937), args.repeat)
        specs[name] = spec
        print(f"node_spec {name:10s} {spec['cpus']:4d} CPUs {len(spec['gres_devices'])} GPUs: {seconds * 1000:7.2f} ms")

    for count in (512, 4096):
        types = list(specs.values())
        cluster = {f"gpu{n:05d}": types[n % len(types)] for n in range(count)}
        groups, seconds = timed(partial(group_nodes, cluster), max(1, args.repeat // 5))
        print(f"group_nodes {count:5d} nodes -> {len(groups)} NodeName lines: {seconds * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
