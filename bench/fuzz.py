# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fuzzing campaign over the readers: mutations of the real captures (tests/unit/fixtures) and of
the stand-in repository's signing key (openpgp's check), for a number of seconds.

    python bench/fuzz.py [SECONDS] [SEED]

Prints the runs (in all and per reader), the outcomes by exception type, every exception that is
not the reader's own refusal (ParseError; the chart readers' BundleError, the fleet loader's
FleetError, the containerd plan's ValueError), and the inputs that took longer than half a second.
It is never a pass/fail test; the unit tests hold the cases it found.
"""

from __future__ import annotations

import collections
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.gpuops.cluster.plugins.module_utils import (  # noqa: E402
    apt_index,
    bundle,
    chart,
    dcgm,
    fleet,
    health,
    ib_fabric,
    ibstat,
    imex,
    k8s,
    nccl_tests,
    node_state,
    nvidia_smi,
    openpgp,
    pci,
    secureboot,
    slurm,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError  # noqa: E402

FIXTURES = ROOT / "tests" / "unit" / "fixtures"
# The stand-in repository's armoured key (make gpusim-repo builds it); without it, no key is fuzzed.
KEY = ROOT / ".cache" / "gpusim" / "www" / "keys" / "gpusim-archive-keyring.asc"
ARCHIVE_FPR = "DDD2F499504D61685FB2FDC94B9F49872D40B3F2"
DEBIAN_CONTAINERD = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"


def health_state(text):
    state, _seen, _lost = health.load_state(text, "boot-1")
    state = node_state.advance(state, [], [], boot_id="boot-2", now=1.0)
    return node_state.decide(state, True, node_state.reason(state, health.PREFIX), health.PREFIX)


def chart_values(text):
    """A chart's values.yaml (the GPU Operator's, mutated), through what the bundle takes from it."""
    values = chart.load_yaml(text, "gpu-operator values.yaml")
    parsed = {"name": "gpu-operator", "version": "v26.7.0", "appVersion": "v26.7.0", "dependencies": [],
              "values": values if isinstance(values, dict) else {}, "subcharts": {}}  # fmt: skip
    return chart.images(parsed, {}, "gpu-operator")


def chart_index(text):
    """A Helm repository's index.yaml (one made from the values file's text: YAML of that shape)."""
    return chart.chart_entry(text, "https://helm.example/nvidia", "gpu-operator", "v26.7.0", "k8s_helm_repository")


def release(text):
    """An InRelease file, through what bundle_fetch takes from it: its signed text's checksums."""
    return bundle.release_checksums(bundle.release_text(text, clear_signed=True))


def fleet_record(text):
    return fleet.parse_record(text, "gpu01", "/var/lib/gpuops/fleet/gpu01.json")


# Each reader, the fixtures folder its inputs are mutated from, and the exception that is its own
# refusal (ParseError where it says nothing else).
READERS = {
    "topo": (nvidia_smi.parse_topo, "topo"),
    "smi_xml": (nvidia_smi.parse_query_xml, "smi_xml"),
    "smi_csv": (nvidia_smi.parse_query_csv, "smi_csv"),
    "nvlink": (nvidia_smi.parse_nvlink_status, "nvlink"),
    "compute_apps": (nvidia_smi.parse_compute_apps, "compute_apps"),
    "mig_profiles": (nvidia_smi.parse_mig_profiles, "mig"),
    "mig_instances": (nvidia_smi.parse_mig_instances, "mig"),
    "mig_compute": (nvidia_smi.parse_mig_compute_instances, "mig"),
    "mig_placements": (nvidia_smi.parse_mig_placements, "mig"),
    "ibstat": (ibstat.parse_ibstat, "ibstat"),
    "ibstatus": (ibstat.parse_ibstatus, "ibstatus"),
    "ibdev2netdev": (ibstat.parse_ibdev2netdev, "ibdev2netdev"),
    "ibv_devinfo": (ibstat.parse_ibv_devinfo, "ibv_devinfo"),
    "lspci": (pci.parse_lspci, "lspci"),
    "lscpu": (slurm.parse_lscpu, "lscpu"),
    "slurmd_C": (slurm.parse_slurmd_config, "slurmd_C"),
    "sacctmgr": (slurm.parse_qos, "sacctmgr"),
    "nccl_tests": (nccl_tests.parse_nccl_tests, "nccl_tests"),
    "dcgmi_diag": (dcgm.parse_dcgmi_diag, "dcgmi_diag"),
    "dcgmi_health": (dcgm.parse_dcgmi_health, "dcgmi_health"),
    # gpuops-health's state file, through what a check does with it (never an exception: a state it
    # cannot read is a lost one, which keeps a node it drained out).
    "health_state": (health_state, "health_state"),
    "containerd_plan": (lambda text: k8s.containerd_plan(DEBIAN_CONTAINERD, text), "containerd"),
    # A repository's Packages index, through what the air-gap manifest takes from it.
    "packages_index": (
        lambda text: apt_index.closure(
            [("linux-modules-nvidia-580-server-open-6.8.0-149-generic", None)], apt_index.parse_packages(text)
        ),
        "ubuntu_archive",
    ),
    "modinfo": (secureboot.parse_modinfo, "modinfo"),
    "openssl_x509": (secureboot.parse_openssl_x509, "openssl_x509"),
    "mokutil_test_key": (secureboot.parse_mokutil_test_key, "mokutil_test_key"),
    "release": (release, "release"),
    "chart_values": (chart_values, "upstream", bundle.BundleError),
    "chart_index": (chart_index, "upstream", bundle.BundleError),
    "fleet_record": (fleet_record, "fleet_record", fleet.FleetError),
    "imex_domain": (imex.parse_domain_status, "imex"),
    # The validate role's imex check: what it makes of the tool's output (a record, never an exception).
    "imex_check": (lambda text: imex.check_records("127.0.0.1\n127.0.0.2\n", text), "imex"),
    "imex_node_list": (imex.parse_node_list, "imex"),
    # A port's neighbour as ib_facts reads it (smpquery's nodeinfo, its own nodedesc beside it).
    "smpquery": (lambda text: ib_fabric.neighbour(text, "Node Description:....MF0;leaf01:Q/U1"), "ibstat"),
}


# What the mutations splice in: the readers' own separators, huge and odd numbers, characters that
# str.isdigit() takes and int() refuses, lone surrogates, launcher prefixes.
PIECES = ["|", "+", ":", " ", "\t", "\n", "-", "#", "0", "9" * 40, "N/A", "<", ">", '"', "\\", "\u00b2",
          "\U0001f600", "\ud800", "GPU", "Link", "MIG", "(", ")", "[", "]", "=", "<stdout>:",
          "(head, rank=0, pid=1) "]  # fmt: skip


def mutate(text, rng):
    for _step in range(rng.randint(1, 6)):
        cut = rng.randint(0, len(text))
        op = rng.random()
        if op < 0.3:
            text = text[:cut] + rng.choice(PIECES) * rng.randint(1, 50) + text[cut:]
        elif op < 0.5:
            text = text[:cut] + text[cut + rng.randint(1, 200) :]
        elif op < 0.7:
            lines = text.split("\n")
            lines.insert(rng.randint(0, len(lines)), rng.choice(lines))
            text = "\n".join(lines)
        elif op < 0.85:
            end = cut + rng.randint(1, 50)
            text = text[:cut] + text[cut:end][::-1] + text[end:]
        else:
            text = text[:cut]
    return text


def mutate_bytes(data, rng):
    data = bytearray(data)
    for _step in range(rng.randint(1, 8)):
        at = rng.randrange(len(data))
        op = rng.random()
        if op < 0.4:
            data[at] = rng.randrange(256)
        elif op < 0.7:
            data[at:at] = bytes(rng.randrange(256) for _byte in range(rng.randint(1, 40)))
        else:
            del data[at : at + rng.randint(1, 40)]
    return bytes(data)


def main():
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    corpora = {
        name: [p.read_text(errors="replace") for p in sorted((FIXTURES / folder).iterdir()) if p.is_file()]
        for name, (_reader, folder, *_refusal) in READERS.items()
    }
    key = KEY.read_bytes() if KEY.is_file() else None
    outcomes, unexpected, slow, per_reader = collections.Counter(), collections.Counter(), [], collections.Counter()
    runs, start = 0, time.monotonic()
    while time.monotonic() - start < budget:
        name = rng.choice([*READERS, "openpgp"] if key else list(READERS))
        if name == "openpgp":
            given = mutate_bytes(key, rng)

            def read(data):
                return openpgp.pinned_keyring(data, [ARCHIVE_FPR])
        else:
            read, given = READERS[name][0], mutate(rng.choice(corpora[name]), rng)
        refusal = (READERS[name][2:] or (ParseError,))[0] if name in READERS else ParseError
        began = time.monotonic()
        per_reader[name] += 1
        try:
            read(given)
            outcomes["ok"] += 1
        except Exception as exc:  # counting what escapes is the point
            outcomes[type(exc).__name__] += 1
            expected = isinstance(exc, (ParseError, refusal))
            if not expected and not (name == "containerd_plan" and isinstance(exc, ValueError)):
                unexpected[(name, type(exc).__name__, str(exc)[:80])] += 1
        took = time.monotonic() - began
        if took > 0.5:
            slow.append((name, round(took, 2), len(given)))
        runs += 1
    print(f"{runs} runs over {len(READERS) + bool(key)} readers in {budget:.0f} s")
    print("outcomes:", dict(outcomes))
    print("runs per reader:", dict(sorted(per_reader.items())))
    print(f"exceptions other than the readers' own refusals: {sum(unexpected.values())}")
    for (name, kind, text), count in unexpected.most_common(30):
        print(f"  {count:5d}  {name}: {kind}: {text}")
    print("inputs that took more than 0.5 s:", slow[:10] or "none")


if __name__ == "__main__":
    main()
