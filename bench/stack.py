# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the stack check: one evaluation per gpusim profile, and a whole cluster's worth.

    python bench/stack.py [--repeat N] [--hosts N]

Prints numbers; it is never a pass/fail test. Preflight runs stack_check once per host, so the
evaluation must stay far below a module's start-up cost (about 100 ms): the target is under
1 ms per host.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.module_utils.stack import check_stack  # noqa: E402

STACK = {
    "nvidia_driver_branch": "580",
    "cuda_versions": ["12.8", "13.0"],
    "cuda_default_version": "12.8",
    "cudnn_version": "9.10.2.21",
    "nccl_version": "2.26.5",
    "ofed_flavour": "doca",
    "dcgm_major": 4,
    "kernel": "6.1.0-28-amd64",
    "distribution": "Debian",
    "distribution_major_version": "12",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=1000)
    args = parser.parse_args()
    profiles = sorted(p.parent.name for p in (ROOT / "tests" / "gpusim" / "profiles").glob("*/lspci-Dnn.txt"))
    facts = {}
    for name in profiles:
        text = (ROOT / "tests" / "gpusim" / "profiles" / name / "lspci-Dnn.txt").read_text()
        facts[name] = build_gpu_facts(classify(parse_lspci(text)))
    print(f"check_stack, {args.repeat} runs each (median, p95):")
    for name, gpu in facts.items():
        times = []
        for _i in range(args.repeat):
            start = time.perf_counter()
            check_stack(STACK, gpu, today="2026-11-21")
            times.append(time.perf_counter() - start)
        times.sort()
        p95 = times[int(len(times) * 0.95)]
        print(f"  {name:<12} {statistics.median(times) * 1e3:7.3f} ms  {p95 * 1e3:7.3f} ms")
    start = time.perf_counter()
    for i in range(args.hosts):
        check_stack(STACK, facts[profiles[i % len(profiles)]], today="2026-11-21")
    total = time.perf_counter() - start
    print(
        f"{args.hosts} hosts, mixed profiles: {total * 1e3:.1f} ms in all, {total / args.hosts * 1e3:.3f} ms per host"
    )


if __name__ == "__main__":
    main()
