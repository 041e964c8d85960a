# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mutations of real outputs never make a parser raise anything but its own ParseError."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import (
    apt_index,
    bundle,
    canonical,
    dcgm,
    ibstat,
    nccl_tests,
    nvidia_smi,
    pci,
    secureboot,
    slurm,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from conftest import GPUSIM, PROFILE_NAMES, fixtures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PARSERS = {
    "topo": (nvidia_smi.parse_topo, "nvidia-smi-topo-m.txt"),
    "smi_xml": (nvidia_smi.parse_query_xml, "nvidia-smi-q-x.xml"),
    "ibstat": (ibstat.parse_ibstat, "ibstat.txt"),
    "ibdev2netdev": (ibstat.parse_ibdev2netdev, "ibdev2netdev.txt"),
    "lspci": (pci.parse_lspci, "lspci-Dnn.txt"),
    "lspci_vvv": (pci.parse_lspci_verbose, "lspci-Dvvv.txt"),
    # The validation parsers: real captures only (the gpusim outputs of these are generated).
    "nvlink": (nvidia_smi.parse_nvlink_status, None),
    "smi_csv": (nvidia_smi.parse_query_csv, None),
    "nccl_tests": (nccl_tests.parse_nccl_tests, None),
    "dcgmi_diag": (dcgm.parse_dcgmi_diag, None),
    "dcgmi_health": (dcgm.parse_dcgmi_health, None),
    "dcgmi_mndiag": (dcgm.parse_dcgmi_mndiag, None),
    "slurmd_C": (slurm.parse_slurmd_config, None),
    "sacctmgr": (slurm.parse_qos, None),
    "ibv_devinfo": (ibstat.parse_ibv_devinfo, None),
    "ibstatus": (ibstat.parse_ibstatus, None),
    "compute_apps": (nvidia_smi.parse_compute_apps, None),
    "mig": (nvidia_smi.parse_mig_profiles, None),
    "mig_instances": (nvidia_smi.parse_mig_instances, None),
    "mig_placements": (nvidia_smi.parse_mig_placements, None),
    "mig_compute": (nvidia_smi.parse_mig_compute_instances, None),
    # Module signing: modinfo of a signed module, the certificate's serial and subject, mokutil.
    "modinfo": (secureboot.parse_modinfo, None),
    "openssl_x509": (secureboot.parse_openssl_x509, None),
    "mokutil_test_key": (secureboot.parse_mokutil_test_key, None),
    # Ubuntu's package index (apt-cache show) through the Canonical driver plan that reads it.
    "ubuntu_archive": (
        lambda text: canonical.plan(
            branch="580",
            flavour="open",
            kernel="6.8.0-149-generic",
            exact=None,
            index=canonical.parse_index(text),
            fabricmanager=True,
            distribution="Ubuntu 24",
        ),
        None,
    ),
    # The same captures as a Packages index, through what the air-gap manifest takes from it.
    "packages_index": (
        lambda text: apt_index.closure(
            [("linux-modules-nvidia-580-server-open-6.8.0-149-generic", None)], apt_index.parse_packages(text)
        ),
        None,
    ),
    # A repository's signed Release (InRelease), whose SHA256 section the bundle's fetch checks Packages against.
    "release": (lambda text: bundle.release_checksums(bundle.release_text(text)), None),
}
# Parsers that read another parser's captures.
FOLDERS = {"packages_index": "ubuntu_archive", "lspci_vvv": "lspci"}


def corpus(kind):
    # The MIG captures share one folder; each parser is fuzzed on all of them (the others' tables
    # are hostile input to it).
    texts = [path.read_text() for path in fixtures("mig" if kind.startswith("mig") else FOLDERS.get(kind, kind))]
    if PARSERS[kind][1]:
        texts += [(GPUSIM / "profiles" / name / PARSERS[kind][1]).read_text() for name in PROFILE_NAMES]
    return texts


@st.composite
def mutated(draw, texts):
    lines = draw(st.sampled_from(texts)).split("\n")
    for _step in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, max(len(lines) - 1, 0)))
        action = draw(st.sampled_from(["drop", "duplicate", "truncate", "bytes", "swap", "tabs", "spaces"]))
        if action == "drop" and lines:
            del lines[where]
        elif action == "duplicate" and lines:
            lines.insert(where, lines[where])
        elif action == "truncate" and lines:
            lines[where] = lines[where][: draw(st.integers(0, len(lines[where])))]
        elif action == "bytes" and lines:
            cut = draw(st.integers(0, len(lines[where])))
            noise = draw(st.text(min_size=1, max_size=8))
            lines[where] = lines[where][:cut] + noise + lines[where][cut:]
        elif action == "swap" and len(lines) > 1:
            other = draw(st.integers(0, len(lines) - 1))
            lines[where], lines[other] = lines[other], lines[where]
        elif action == "tabs":
            lines = [line.replace("    ", "\t") for line in lines]
        elif action == "spaces":
            lines = [line.expandtabs(draw(st.sampled_from([1, 4, 8]))) for line in lines]
    return "\n".join(lines)


def check(parser, text):
    try:
        parser(text)
    except ParseError as exc:
        # Anything else (IndexError, KeyError, a bare ValueError...) is not caught and fails the test.
        assert str(exc)


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_mutations_raise_only_parse_error(kind):
    parser = PARSERS[kind][0]

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutated(corpus(kind)))
    def run(text):
        check(parser, text)

    run()


@pytest.mark.parametrize("kind", sorted(PARSERS))
@settings(max_examples=100, deadline=None)
@given(junk=st.text(max_size=300))
def test_random_text_raises_only_parse_error(kind, junk):
    check(PARSERS[kind][0], junk)


@pytest.mark.parametrize("kind", sorted(PARSERS))
@settings(max_examples=50, deadline=None)
@given(junk=st.binary(max_size=200))
def test_random_bytes_decoded_raise_only_parse_error(kind, junk):
    check(PARSERS[kind][0], junk.decode("utf-8", "surrogateescape"))
