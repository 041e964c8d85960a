# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's published compatibility tables, as data, with lookups.

Every row names its source by a key of ``SOURCES``. Rows NVIDIA has not confirmed in a primary
source carry ``certain=False``; rules built on them give warnings, never errors. ``SOURCES``
is the one list of where the tables come from; comments elsewhere cite its keys.

Versions are compared as tuples of integers (:func:`vtuple`): ``"570.133.20" -> (570, 133, 20)``.
A bare branch ``"570"`` is ``(570,)``, which sorts below every ``570.x`` version.
"""

from __future__ import annotations

import re

SOURCES = {
    "cuda_release_notes": "CUDA Toolkit Release Notes, table 'CUDA Toolkit and Corresponding Driver Versions' "
    "(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html)",
    "cuda_branch_per_toolkit": "CUDA 13.3/13.4 release notes: one driver branch per toolkit "
    "(13.3 -> R610, 13.4 -> R615)",
    "minor_compat": "CUDA minor version compatibility "
    "(https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html)",
    "forward_compat": "CUDA forward compatibility "
    "(https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html)",
    "datacenter_drivers": "Supported drivers and CUDA toolkit versions "
    "(https://docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html)",
    "cuda_gpus": "CUDA GPUs compute capability list (https://developer.nvidia.com/cuda-gpus)",
    "first_cuda": "CMake Modules/CUDA/architectures.cmake and NVIDIA/nccl makefiles/common.mk",
    "open_modules": "NVIDIA Driver Installation Guide, 'Kernel Modules', and the NVIDIA blog "
    "'NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules'",
    "gpu_operator": "NVIDIA GPU Operator platform support (https://docs.nvidia.com/datacenter/cloud-native/)",
    "cuda13_deprecated": "CUDA 13.0 release notes, 'Deprecated Architectures'",
    "cuda_repo": "CUDA network repository (https://developer.download.nvidia.com/compute/cuda/repos/)",
    "cudnn_matrix": "cuDNN Support Matrix (https://docs.nvidia.com/deeplearning/cudnn/latest/support-matrix/index.html)",
    "cudnn_install": "cuDNN Linux installation (https://docs.nvidia.com/deeplearning/cudnn/installation/latest/linux.html)",
    "nccl_packaging": "NVIDIA/nccl pkg/debian/changelog.in and the NCCL release notes "
    "(https://docs.nvidia.com/deeplearning/nccl/)",
    "dcgm": "DCGM installation guide (https://docs.nvidia.com/datacenter/dcgm/latest/)",
    "dcgm_exporter": "NVIDIA dcgm-exporter image tags <dcgm>-<exporter> (nvcr.io/nvidia/k8s/dcgm-exporter, "
    "github.com/NVIDIA/dcgm-exporter releases): 4.2.3-4.1.3, 4.4.1-4.5.2, 4.4.1-4.6.0",
    "fabric_manager": "Fabric Manager User Guide (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/)",
    "driver_install": "NVIDIA Driver Installation Guide (https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/)",
    "gpudirect": "GPU Operator 'GPUDirect RDMA' and the nvidia-peermem notes of the driver README",
    "ofed": "MLNX_OFED 24.10 LTS release notes and the DOCA-Host transition guide (https://docs.nvidia.com/doca/sdk/)",
}


class Row:
    """One table row: its values, its source key and whether NVIDIA confirmed it."""

    __slots__ = ("certain", "source", "values")

    def __init__(self, source, certain=True, **values):
        if source not in SOURCES:
            raise KeyError(source)
        self.values = values
        self.source = source
        self.certain = certain

    def __getattr__(self, name):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return f"Row({self.source}, {self.values})"


def vtuple(version):
    """``"570.133.20" -> (570, 133, 20)``; ``"1:4.2.3-1"`` keeps the numbers of the upstream part."""
    upstream = str(version).split(":", 1)[-1].split("-", 1)[0].split("+", 1)[0]
    return tuple(int(part) for part in re.findall(r"\d+", upstream))


# --- 1. CUDA toolkit -> minimum Linux x86_64 driver --------------------------------------------
# (first release it applies to, label, minimum driver). A row holds from its release up to the
# next row of the same minor. 13.3 and 13.4 are published as branches, not versions.
_CUDA_RELEASE_ROWS = tuple(
    Row("cuda_release_notes", release=release, label=label, driver=driver)
    for release, label, driver in (
        ("13.2.2", "13.2 Update 2", "595.71.05"),
        ("13.2.1", "13.2 Update 1", "595.58.03"),
        ("13.2.0", "13.2 GA", "595.45.04"),
        ("13.1.1", "13.1 Update 1", "590.48.01"),
        ("13.1.0", "13.1 GA", "590.44.01"),
        ("13.0.2", "13.0 Update 2", "580.95.05"),
        ("13.0.1", "13.0 Update 1", "580.82.07"),
        ("13.0.0", "13.0 GA", "580.65.06"),
        ("12.9.1", "12.9 Update 1", "575.57.08"),
        ("12.9.0", "12.9 GA", "575.51.03"),
        ("12.8.1", "12.8 Update 1", "570.124.06"),
        ("12.8.0", "12.8 GA", "570.26"),
        ("12.6.3", "12.6 Update 3", "560.35.05"),
        ("12.6.1", "12.6 Update 1/2", "560.35.03"),
        ("12.6.0", "12.6 GA", "560.28.03"),
        ("12.5.1", "12.5 Update 1", "555.42.06"),
        ("12.5.0", "12.5 GA", "555.42.02"),
        ("12.4.1", "12.4 Update 1", "550.54.15"),
        ("12.4.0", "12.4 GA", "550.54.14"),
        ("12.3.1", "12.3 Update 1", "545.23.08"),
        ("12.3.0", "12.3 GA", "545.23.06"),
        ("12.2.2", "12.2 Update 2", "535.104.05"),
        ("12.2.1", "12.2 Update 1", "535.86.09"),
        ("12.2.0", "12.2 GA", "535.54.03"),
        ("12.1.0", "12.1 GA/Update 1", "530.30.02"),
        ("12.0.1", "12.0 Update 1", "525.85.12"),
        ("12.0.0", "12.0 GA", "525.60.13"),
        ("11.8.0", "11.8 GA", "520.61.05"),
        ("11.7.1", "11.7 Update 1", "515.48.07"),
        ("11.7.0", "11.7 GA", "515.43.04"),
        ("11.6.1", "11.6 Update 1/2", "510.47.03"),
        ("11.6.0", "11.6 GA", "510.39.01"),
        ("11.5.0", "11.5 GA/Update 1/2", "495.29.05"),
        ("11.4.3", "11.4 Update 3/4", "470.82.01"),
        ("11.4.1", "11.4 Update 1/2", "470.57.02"),
        ("11.4.0", "11.4 GA", "470.42.01"),
        ("11.3.0", "11.3.x", "465.19.01"),
        ("11.2.1", "11.2 Update 1/2", "460.32.03"),
        ("11.2.0", "11.2 GA", "460.27.03"),
        ("11.1.1", "11.1 Update 1", "455.32"),
        ("11.1.0", "11.1 GA", "455.23"),
        ("11.0.3", "11.0 Update 1", "450.51.06"),
        ("11.0.2", "11.0 GA", "450.51.05"),
    )
)
CUDA_DRIVER_ROWS = (
    *_CUDA_RELEASE_ROWS,
    Row("cuda_branch_per_toolkit", release="13.4.0", label="13.4", driver="615"),
    Row("cuda_branch_per_toolkit", release="13.3.0", label="13.3", driver="610"),
)

# Forward compatibility (cuda-compat) runs on the long-lived datacenter branches.
FORWARD_COMPAT_BRANCH_KINDS = ("LTSB", "PB")

# --- Minor-version compatibility families: CUDA major -> (minimum driver, first driver past the range)
CUDA_FAMILIES = {
    11: Row("minor_compat", driver="450.80.02", upper="525"),
    12: Row("minor_compat", driver="525.60.13", upper="580"),
    13: Row("minor_compat", driver="580.65.06", upper=None),
}

# --- Datacenter driver branches: type and end of life (last day of the month NVIDIA names).
# R580's end of life differs between two editions of the page (Aug 2028 / June 2028): the earlier.
BRANCHES = {
    "535": Row("datacenter_drivers", kind="LTSB", eol="2026-06-30"),
    "570": Row("datacenter_drivers", kind="PB", eol="2026-02-28"),
    "580": Row("datacenter_drivers", kind="LTSB", eol="2028-06-30"),
    "595": Row("datacenter_drivers", kind="PB", eol="2027-03-31"),
    "610": Row("datacenter_drivers", kind="NFB", eol="2026-08-31"),
}
# Branches the same page lists as end of life, without a date (R550 among them).
EOL_BRANCHES = ("575", "565", "560", "550", "525", "515", "510", "495", "465", "460", "455", "450", "440", "418", "410")
# Branches NVIDIA names elsewhere (CUDA release notes, driver guides) without a lifecycle entry.
OTHER_BRANCHES = ("545", "555", "590", "615", "620")

# --- Kernel modules -------------------------------------------------------------------------------
OPEN_MODULES_SINCE = Row("open_modules", branch=515)  # open kernel modules exist from R515
OPEN_DEFAULT_SINCE = Row("open_modules", branch=560)  # and are the default from R560
OPEN_ONLY_FROM = Row("open_modules", branch=620)  # the R620 guide lists open modules only

# --- 2. Compute capability -> architecture, first CUDA, driver floor, kernel-module flavour -------
# modules: "proprietary" (open not supported), "either", "open" (proprietary not supported).
# last_cuda_major: the newest CUDA major that still builds for it; last_branch: newest driver branch.
ARCHITECTURES = {
    "7.0": Row("cuda_gpus", arch="volta", first_cuda="9.0", driver="384.81", modules="proprietary", last_cuda_major=12),
    "7.5": Row("cuda_gpus", arch="turing", first_cuda="10.0", driver="410.48", modules="either", last_cuda_major=None),
    "8.0": Row(
        "cuda_gpus", arch="ampere", first_cuda="11.0", driver="450.51.05", modules="either", last_cuda_major=None
    ),
    "8.6": Row("cuda_gpus", arch="ampere", first_cuda="11.1", driver="455.23", modules="either", last_cuda_major=None),
    "8.9": Row("cuda_gpus", arch="ada", first_cuda="11.8", driver="520.61.05", modules="either", last_cuda_major=None),
    "9.0": Row(
        "cuda_gpus", arch="hopper", first_cuda="11.8", driver="520.61.05", modules="either", last_cuda_major=None
    ),
    "10.0": Row(
        "first_cuda", arch="blackwell", first_cuda="12.8", driver="570.26", modules="open", last_cuda_major=None
    ),
    "10.3": Row(
        "cuda_gpus",
        certain=False,
        arch="blackwell",
        first_cuda="12.9",
        driver="575.51.03",
        modules="open",
        last_cuda_major=None,
    ),
    "12.0": Row(
        "first_cuda", arch="blackwell", first_cuda="12.8", driver="570.26", modules="open", last_cuda_major=None
    ),
    "12.1": Row(
        "cuda_gpus",
        certain=False,
        arch="blackwell",
        first_cuda="13.0",
        driver="580",
        modules="open",
        last_cuda_major=None,
    ),
}
# Driver branch R580 appears to be the last for Maxwell, Pascal and Volta (not confirmed by NVIDIA).
PRE_TURING_LAST_BRANCH = Row("datacenter_drivers", certain=False, branch=580)
# Models with a rule of their own (slug -> row).
MODEL_RULES = {
    "gh200": Row("open_modules", modules="open"),
    "b200": Row("gpu_operator", driver="570.133.20", note="HGX B200 through the GPU Operator"),
    "rtx_pro_6000": Row("gpu_operator", driver="575.57.08", note="RTX PRO 6000 Blackwell Server Edition"),
}
# Consumer GPUs: no forward compatibility (cuda-compat) there.
CONSUMER_NAME = re.compile(r"GeForce|TITAN|\bRTX [2345]0[5-9]0\b", re.IGNORECASE)

# --- Operating systems: CUDA repository directory names and what this collection has tested -------
# (ansible_distribution, major version) -> (repository name, tested). tested: True where make test
# runs every role there (Debian 12, and Ubuntu 24.04 but for the mig role, which passes there by
# hand); a string naming what make test runs there where it runs part of them (the Makefile's
# CI_PLATFORMS); False where nothing runs there.
DISTRIBUTIONS = {
    ("Debian", "12"): ("debian12", True),
    ("Debian", "13"): ("debian13", "molecule/fleet (preflight, the driver, Slurm 24.11, validation, the fleet)"),
    ("Ubuntu", "22"): (
        "ubuntu2204",
        "molecule/slurm_cluster (preflight, the driver, Slurm 21.08, the rolling upgrade)",
    ),
    ("Ubuntu", "24"): ("ubuntu2404", True),
    ("Ubuntu", "20"): ("ubuntu2004", False),
    ("Amazon", "2023"): ("amzn2023", False),
}
RHEL_FAMILY = ("RedHat", "Rocky", "AlmaLinux", "OracleLinux", "CentOS")
RHEL_MAJORS = ("8", "9", "10")
NO_CUDA13 = Row("cuda_repo", distributions=("ubuntu2004",))
# The one table of CPU architectures: each vendor's name for it, by the kernel's (ansible_facts.architecture).
# debian: dpkg's architecture (packages, the container toolkit's and the MIG manager's .deb assets,
# deepops#1399 for the latter's amd64/arm64 assets); cuda: the CUDA repository's folder (SOURCES
# cuda_repo; arm64 servers are sbsa); doca: DOCA-Host's folder (x86_64, arm64-sbsa); ubuntu_archive:
# where Canonical publishes the architecture (amd64 on archive.ubuntu.com, arm64 on the ports archive).
CPU_ARCHITECTURES = {
    "x86_64": {
        "debian": "amd64",
        "cuda": "x86_64",
        "doca": "x86_64",
        "rpm": "x86_64",
        "ubuntu_archive": "http://archive.ubuntu.com/ubuntu",
    },
    "aarch64": {
        "debian": "arm64",
        "cuda": "sbsa",
        "doca": "arm64-sbsa",
        "rpm": "aarch64",
        "ubuntu_archive": "http://ports.ubuntu.com/ubuntu-ports",
    },
}
# The names other tools give the same architectures.
CPU_ARCHITECTURE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def architecture_names(machine):
    """Each vendor's name for a CPU architecture (:data:`CPU_ARCHITECTURES`), from the kernel's name
    (``x86_64``, ``aarch64``) or dpkg's (``amd64``, ``arm64``); ``ValueError`` naming the supported ones."""
    key = CPU_ARCHITECTURE_ALIASES.get(machine, machine)
    if key not in CPU_ARCHITECTURES:
        raise ValueError(
            f"CPU architecture {machine!r} has no NVIDIA datacenter packages this collection installs; "
            f"the supported ones are {', '.join(CPU_ARCHITECTURES)} (arm64 servers: aarch64)."
        )
    return CPU_ARCHITECTURES[key]


REPO_ARCH = {
    **{name: names["cuda"] for name, names in CPU_ARCHITECTURES.items()},
    **{alias: CPU_ARCHITECTURES[name]["cuda"] for alias, name in CPU_ARCHITECTURE_ALIASES.items()},
}

# --- 3. cuDNN ----------------------------------------------------------------------------------------
# (first release, last release) -> CUDA majors with a build, compute capability range.
CUDNN_RELEASES = (
    Row("cudnn_matrix", first="8.9.0", last="8.9.99", cuda_majors=(11, 12), min_cc="5.0", max_cc="9.0"),
    Row("cudnn_matrix", first="9.0.0", last="9.10.99", cuda_majors=(11, 12), min_cc="5.0", max_cc="12.0"),
    # The release that dropped CUDA 11 and pre-Turing lies between 9.11 and 9.17: not confirmed.
    Row(
        "cudnn_matrix", certain=False, first="9.11.0", last="9.16.99", cuda_majors=(12, 13), min_cc="7.5", max_cc="12.0"
    ),
    Row("cudnn_matrix", first="9.17.0", last="9.99.99", cuda_majors=(12, 13), min_cc="7.5", max_cc="12.1"),
)
CUDNN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
CUDNN_BLACKWELL_DRIVER = Row("cudnn_matrix", driver="570.26")  # CUDA 12.8/12.9 builds on Blackwell

# --- 4. NCCL -----------------------------------------------------------------------------------------
NCCL_LATEST = Row("nccl_packaging", version="2.31.2")
NCCL_BUILD_FLOOR = {  # architecture -> the oldest CUDA build with code for it
    "hopper": Row("nccl_packaging", cuda="11.8"),
    "blackwell": Row("nccl_packaging", cuda="12.8"),
}

# --- 5. DCGM, Fabric Manager, GPUDirect, OFED ------------------------------------------------------
DCGM_MAJORS = {3: Row("dcgm", monolithic=True), 4: Row("dcgm", monolithic=False)}
DCGM_PRE_TURING_CUDA = Row("dcgm", cuda_major=12)  # Volta and older on R580 use the -cuda12 packages
# Each dcgm-exporter release and the DCGM it was built and tested with.
DCGM_EXPORTER_BUILT_FOR = Row("dcgm_exporter", pairs={"4.1.3": "4.2.3", "4.5.2": "4.4.1", "4.6.0": "4.4.1"})
NVLINK5_CAPABILITIES = Row("fabric_manager", capabilities=("10.0", "10.3"))  # HGX B200/B300 need nvlsm
# DCGM's multi-node diagnostic (dcgmi mndiag, mnubergemm): the GPUs it runs on, by PCI device, and
# the first DCGM release for each (DCGM's mnubergemm reference: GB200 NVL from 4.3, GB300 NVL from 4.4).
DCGM_MNDIAG = Row("dcgm", first_release={"2941": "4.3", "31c2": "4.4"})
DMABUF = Row("gpudirect", kernel="5.12", cuda="11.7")
PEERMEM_OFED = Row("gpudirect", flavours=("doca", "mlnx_ofed"))
MLNX_OFED_UNSUPPORTED = Row("ofed", models=("ConnectX-8", "BlueField-3"))


def cuda_rows(minor):
    """Rows of one CUDA minor (``"12.8"``), oldest first; empty when there is no such release."""
    rows = [row for row in CUDA_DRIVER_ROWS if row.release.rsplit(".", 1)[0] == minor]
    return sorted(rows, key=lambda row: vtuple(row.release))


def cuda_minors(major=None):
    """Every CUDA minor the table knows, oldest first (``["11.0", ...]``)."""
    minors = {row.release.rsplit(".", 1)[0] for row in CUDA_DRIVER_ROWS}
    return sorted((m for m in minors if major is None or vtuple(m)[0] == major), key=vtuple)


def native_cuda(driver):
    """The newest CUDA minor a driver (``"570.133.20"`` or branch ``"570"``) runs natively.

    A bare branch is taken at its newest release, so any row of that branch counts.
    """
    have = vtuple(driver)
    best = None
    for row in CUDA_DRIVER_ROWS:
        need = vtuple(row.driver)
        ok = need[0] <= have[0] if len(have) == 1 else need <= have
        if ok and (best is None or vtuple(row.release) > vtuple(best)):
            best = row.release
    return None if best is None else best.rsplit(".", 1)[0]


def driver_meets(driver, minimum):
    """Whether ``driver`` (exact or a bare branch, taken at its newest) is at least ``minimum``."""
    have, need = vtuple(driver), vtuple(minimum)
    if len(have) == 1:
        return have[0] >= need[0]
    return have >= need


def branch_info(branch, today):
    """``{"kind", "eol", "ended", "source"}`` for a branch, or None when no table lists it."""
    row = BRANCHES.get(branch)
    if row is not None:
        return {"kind": row.kind, "eol": row.eol, "ended": row.eol < today, "source": row.source}
    if branch in EOL_BRANCHES:
        return {"kind": "EOL", "eol": None, "ended": True, "source": "datacenter_drivers"}
    if branch in OTHER_BRANCHES or any(vtuple(row.driver)[0] == int(branch) for row in CUDA_DRIVER_ROWS):
        return {"kind": "unlisted", "eol": None, "ended": False, "source": "cuda_release_notes"}
    return None


def architecture(capability):
    return ARCHITECTURES.get(capability)


def cudnn_release(version):
    """The cuDNN row a version (``"9.10.2.21"``) falls in, or None."""
    have = vtuple(version)[:3]
    for row in CUDNN_RELEASES:
        if vtuple(row.first) <= have <= vtuple(row.last):
            return row
    return None


def suffixed_scheme(branch):
    """Up to R580 the Debian/Ubuntu driver packages carry the branch; from R590 they do not."""
    return int(branch) <= 580


def driver_packages(family, branch, flavour, compute_only=False):
    """Package names of the driver for a package family (``apt``/``dnf``), branch and flavour.

    Source: the NVIDIA Driver Installation Guide (branch-suffixed names up to R580, unsuffixed
    from R590, where the branch is held by ``nvidia-driver-pinning-<branch>``).
    """
    if family == "dnf":
        return ["nvidia-open"] if flavour == "open" else ["cuda-drivers"]
    suffix = "-" + branch if suffixed_scheme(branch) else ""
    if compute_only:
        dkms = "nvidia-dkms{}{}".format(suffix, "-open" if flavour == "open" else "")
        return ["libnvidia-compute" + suffix, dkms]
    if flavour == "open":
        return ["nvidia-open" + suffix]
    return ["cuda-drivers" + suffix]


def dnf_module_stream(branch, flavour):
    """``dnf module`` stream of a branch on RHEL 8/9: ``580-open`` or ``580-dkms``."""
    return "{}-{}".format(branch, "open" if flavour == "open" else "dkms")
