# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the air-gap manifest (module_utils/bundle.py) over fleets of declared hosts.

    python bench/bundle.py [--hosts 10,100,1000] [--stanzas 20000]

A CUDA-like Packages index of --stanzas stanzas (NVIDIA's CUDA repository for one distribution holds
thousands of packages, most in many versions), read once; then, for each fleet size, every host with
the requests of a GPU node (driver, Fabric Manager following it, CUDA, cuDNN, NCCL, DCGM) and
a checksum-listed download, planned into a manifest. Prints the parse time and, per fleet size,
the planning time and the manifest's size. The repositories are grouped across hosts, so the work
grows with the fleet only through the grouping (linear), not through the index (once per
repository). A benchmark prints numbers; it is never a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.gpuops.cluster.plugins.module_utils import apt_index, bundle  # noqa: E402

REPO = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
SHA = "ab" * 32


def stanza(name, version, depends=""):
    lines = [
        f"Package: {name}",
        f"Version: {version}",
        "Architecture: amd64",
        f"Filename: ./{name}_{version}_amd64.deb",
        "Size: 123456",
        f"SHA256: {SHA}",
    ]
    if depends:
        lines.append(f"Depends: {depends}")
    return "\n".join(lines) + "\n"


def index_text(count):
    """Driver, Fabric Manager, toolkit, cuDNN and NCCL packages in many versions, then filler."""
    out = []
    for patch in range(40):
        version = f"580.{patch:02d}.05-0ubuntu1"
        out.append(stanza("nvidia-open-580", version, f"nvidia-driver-580-open (= {version}), libc6 (>= 2.34)"))
        out.append(stanza("nvidia-driver-580-open", version, "dkms, libc6 (>= 2.34)"))
        out.append(stanza("nvidia-fabricmanager-580", f"580.{patch:02d}.05-1"))
    for minor in range(10):
        out.append(stanza(f"cuda-toolkit-12-{minor}", f"12.{minor}.1-1", f"cuda-compiler-12-{minor} (>= 12.{minor}.1)"))
        out.append(stanza(f"cuda-compiler-12-{minor}", f"12.{minor}.1-1"))
    out.append(stanza("libnccl2", "2.26.5-1+cuda12.8"))
    out.append(stanza("libcudnn9-cuda-12", "9.10.2.21-1"))
    while len(out) < count:
        out.append(stanza(f"filler-{len(out)}", "1.0-1", "libc6"))
    return "\n".join(out)


def hosts(count):
    request = {
        "kind": "apt",
        "role": "nvidia_driver",
        "variable": "cuda_repository_url",
        "base": "https://developer.download.nvidia.com/compute/cuda/repos",
        "repository": REPO,
        "key_url": REPO + "3bf863cc.pub",
        "key_fingerprint": ["EB693B3035CD5710E231E123A4B469963BF863CC"],
        "fingerprint_variable": "cuda_repository_key_fingerprint",
        "recommends": True,
        "packages": [
            "nvidia-open-580=580.39.05-*",
            {"name": "nvidia-fabricmanager-580", "version": None, "same_version_as": "nvidia-open-580"},
            "cuda-toolkit-12-8",
            "libnccl2=2.26.5-1+cuda12.8",
            "libcudnn9-cuda-12=9.10.2.21-1",
        ],
    }
    download = {
        "kind": "file",
        "role": "nccl",
        "variable": "nccl_tests_url",
        "url": "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.16.8.tar.gz",
        "checksum": "sha256:" + SHA,
        "checksum_variable": "nccl_tests_checksum",
    }
    return {
        f"gpu{number:04d}": {"platform": "ubuntu2404", "arch": "amd64", "requests": [dict(request), download]}
        for number in range(count)
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="10,100,1000")
    parser.add_argument("--stanzas", type=int, default=20000)
    args = parser.parse_args()
    text = index_text(args.stanzas)
    start = time.perf_counter()
    apt_index.parse_packages(text)
    print(
        f"Packages index: {args.stanzas} stanzas, {len(text) / 1048576:.1f} MiB, read in "
        f"{time.perf_counter() - start:.2f} s"
    )
    print(f"{'hosts':>6} {'plan (s)':>9} {'packages':>9} {'manifest (KiB)':>15}")
    for count in (int(n) for n in args.hosts.split(",")):
        fleet = hosts(count)
        start = time.perf_counter()
        repos, problems = bundle.plan(fleet, lambda url: text)
        files, file_problems = bundle.files(fleet, lambda url: "")
        doc = bundle.manifest(fleet, repos, files, "1.0.0")
        elapsed = time.perf_counter() - start
        assert not problems and not file_problems, problems + file_problems
        size = len(json.dumps(doc)) / 1024
        print(f"{count:>6} {elapsed:>9.2f} {doc['totals']['packages']:>9} {size:>15.0f}")


if __name__ == "__main__":
    main()
