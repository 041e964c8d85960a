# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the gpusim stand-in repository: signed apt repositories of small packages that carry
NVIDIA's and Mellanox's real package names and version strings.

The layout mirrors the upstream URLs, so a role's mirror variable points at it the way it would
point at a site mirror:

    compute/cuda/repos/debian12/x86_64/        NVIDIA's CUDA repository (driver, FM, CUDA,
                                               cuDNN, NCCL, DCGM); the same under debian13,
                                               ubuntu2204 and ubuntu2404 (Ubuntu revisions)
    libnvidia-container/stable/deb/amd64/      the container toolkit repository
    doca/2.9.1/{debian12,ubuntu22.04,ubuntu24.04}/x86_64/  the DOCA-Host repository (doca-ofed), per OS
    compute/cuda/repos/ubuntu2404/sbsa/, libnvidia-container/stable/deb/arm64/,
    doca/2.9.1/ubuntu24.04/arm64-sbsa/         the same for arm64 (Grace): NVIDIA's layouts for it,
                                               the packages built for arm64
    slurm-smd/<os>/                            SchedMD-built Slurm (slurm-smd-*) as a site would
                                               mirror its own debuild output
    hpcx/v2.21/hpcx-v2.21-...-x86_64.tbz       HPC-X archives (SHARP, its NCCL plugin, UCX) for
                                               debian12, ubuntu22.04 and ubuntu24.04 (.sha256
                                               each, and SHA256SUMS), and ubuntu24.04's aarch64
    dcgm-exporter/v4.5.2/dcgm-exporter         dcgm-exporter as a bare binary (and .sha256)
    NVIDIA/mig-parted/releases/download/v0.15.0/nvidia-mig-manager_0.15.0-1_amd64.deb
                                               the MIG manager package as GitHub releases
                                               publish it (and .sha256); no apt repository
    nccl-tests/v2.16.8.tar.gz                  a source archive with nccl-tests' name (and .sha256)
    core:/stable:/v1.36/deb/                   pkgs.k8s.io's repository of a Kubernetes minor
                                               (kubeadm, kubelet, kubectl, cri-tools; and v1.35)
    keys/gpusim-archive-keyring.gpg            the signing key (binary keyring for signed-by)
    keys/gpusim-archive-keyring.asc            the same, ASCII-armoured
    keys/gpusim-wrong-keyring.gpg              another key, for tests that expect a refusal
    keys/gpusim-two-blocks.asc                 the archive key's armour block, then the wrong key's
    wrong-signed/                              an empty flat repository signed by the wrong key
    compute/cuda/repos/<distribution>/x86_64/3bf863cc.pub, libnvidia-container/gpgkey,
    doca/GPG-KEY-Mellanox.pub,
    core:/stable:/v1.36/deb/Release.key        the signing key again, at the vendors' key paths

Each is a flat repository (``deb [signed-by=...] URL /``) with Packages, Release, InRelease and
Release.gpg. Packages are written in pure Python (ar + tar), reproducibly. The signing keys are
test keys committed in tests/gpusim/keys (no passphrase, trusted by nothing but these tests), so
their fingerprints are fixed and the inventories can check them as a site checks NVIDIA's:
archive DDD2F499504D61685FB2FDC94B9F49872D40B3F2, wrong 88A16F1370CB253F6D3BDAACBB42F09FF42E283A.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEYS = HERE.parent / "keys"
EPOCH = 1767225600  # 2026-01-01, every file's mtime: the same inputs give the same bytes
MAINTAINER = "gpuops.cluster gpusim <gpusim@gpuops.invalid>"

# NVIDIA's CUDA repository has one folder per distribution with the same package names. The
# stand-in builds Debian 12's and copies it into the others; the Ubuntu folders carry NVIDIA's
# Ubuntu revision "-0ubuntu1" on the packages built from the driver's user-mode components (a
# lent Ubuntu 24.04 machine has cuda-compat-13-0 580.95.05-0ubuntu1 from NVIDIA's ubuntu2404
# folder, tests/unit/fixtures/SOURCES.md), so that pins never assume "-1".
CUDA_DISTRIBUTIONS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404")
CUDA_REPOS = {distro: f"compute/cuda/repos/{distro}/x86_64" for distro in CUDA_DISTRIBUTIONS}
CUDA_REPO = CUDA_REPOS["debian12"]
UBUNTU_REVISION = "0ubuntu1"
UBUNTU_REVISED = re.compile(
    r"(cuda-compat-[0-9-]+|libnvidia-compute(-[0-9]+)?|nvidia-(compute-)?utils-[0-9]+|nvidia-dkms(-[0-9]+)?-open"
    r"|nvidia-dkms-[0-9]+|nvidia-driver-[0-9]+(-open)?|nvidia-open(-[0-9]+)?)"
)
TOOLKIT_REPO = "libnvidia-container/stable/deb/amd64"
# DOCA-Host's folder per OS (linux.mellanox.com/public/repo/doca/<version>/<os>/<arch>/, the pattern
# in the shared NVIDIA facts): the same packages in each.
DOCA_OSES = ("debian12", "ubuntu22.04", "ubuntu24.04")
DOCA_REPOS = {os_name: f"doca/2.9.1/{os_name}/x86_64" for os_name in DOCA_OSES}
DOCA_REPO = DOCA_REPOS["debian12"]
# arm64 (Grace) where this project resolves it and tests its manifest: Ubuntu 24.04's folders, in
# NVIDIA's layouts (the CUDA repository's sbsa, DOCA-Host's arm64-sbsa, the toolkit's arm64), each
# the copy of its amd64 folder built for arm64.
ARM64_REPOS = {
    CUDA_REPOS["ubuntu2404"]: "compute/cuda/repos/ubuntu2404/sbsa",
    "libnvidia-container/stable/deb/amd64": "libnvidia-container/stable/deb/arm64",
    DOCA_REPOS["ubuntu24.04"]: "doca/2.9.1/ubuntu24.04/arm64-sbsa",
}
# SchedMD-built Slurm as a site builds it for each OS, at the release of that OS's own Slurm
# (the stand-ins wrap the distribution's daemons): a folder per OS.
SLURM_SMD_RELEASES = {"debian12": "22.05.8", "debian13": "24.11.5", "ubuntu2204": "21.08.5", "ubuntu2404": "23.11.4"}
SLURM_SMD_REPOS = {os_name: f"slurm-smd/{os_name}" for os_name in SLURM_SMD_RELEASES}
# A repository signed by the wrong key: what a key file that smuggles that key in would open.
WRONG_SIGNED_REPO = "wrong-signed"
# pkgs.k8s.io: one repository per Kubernetes minor (core:/stable:/v1.36/deb/, key Release.key
# beside it), packages versioned <release>-1.1. Two minors and two releases of one, so that a
# pinned install is told apart from "the newest" and a minor's repository from another's.
K8S_RELEASES = {"1.35": ["1.35.6-1.1"], "1.36": ["1.36.3-1.1", "1.36.4-1.1"]}
K8S_REPOS = {minor: f"core:/stable:/v{minor}/deb" for minor in K8S_RELEASES}
REPOS = {
    **{repo: ("NVIDIA", "NVIDIA CUDA (gpusim stand-in)") for repo in CUDA_REPOS.values()},
    TOOLKIT_REPO: ("NVIDIA", "libnvidia-container (gpusim stand-in)"),
    **{repo: ("NVIDIA", "DOCA-Host (gpusim stand-in)") for repo in DOCA_REPOS.values()},
    ARM64_REPOS[CUDA_REPOS["ubuntu2404"]]: ("NVIDIA", "NVIDIA CUDA (gpusim stand-in)"),
    ARM64_REPOS["libnvidia-container/stable/deb/amd64"]: ("NVIDIA", "libnvidia-container (gpusim stand-in)"),
    ARM64_REPOS[DOCA_REPOS["ubuntu24.04"]]: ("NVIDIA", "DOCA-Host (gpusim stand-in)"),
    **{repo: ("gpuops", "SchedMD-built Slurm, a site's mirror (gpusim stand-in)") for repo in SLURM_SMD_REPOS.values()},
    WRONG_SIGNED_REPO: ("gpuops", "signed by the wrong key (gpusim stand-in)"),
    **{
        repo: (
            f"obs://build.opensuse.org/isv:kubernetes:core:stable:v{minor}/deb",
            f"isv:kubernetes:core:stable:v{minor}",
        )
        for minor, repo in K8S_REPOS.items()
    },
}

# Driver versions: two per branch. CUDA version is what each driver reports (the highest CUDA
# it supports natively): R570 -> 12.8, R580 -> 13.0 (CUDA release notes, compat.SOURCES['datacenter_drivers']).
DRIVERS = {
    "570": (["570.133.20", "570.172.08"], "12.8"),
    "580": (["580.65.06", "580.95.05"], "13.0"),
}
CUDA_TOOLKITS = {"12-4": "12.4.1-1", "12-8": "12.8.1-1", "13-0": "13.0.2-1"}
# cuda-compat-X-Y is built from the user-mode driver of the branch that ships CUDA X.Y.
CUDA_COMPAT = {"12-8": "570.172.08-1", "13-0": "580.95.05-1"}
CUDNN = ["9.8.0.87-1", "9.10.2.21-1"]
CUDNN8 = "8.9.7.29-1+cuda12.2"
NCCL = ["2.21.5-1+cuda12.4", "2.26.5-1+cuda12.8"]
DCGM4 = ["1:4.2.3-1", "1:4.4.1-1"]
DCGM3 = "1:3.3.9"
# dcgm-exporter releases pair an exporter version with the DCGM it was tested with (image tags
# <dcgm>-<exporter>: 4.2.3-4.1.3, 4.4.1-4.5.2); the package carries the exporter's version.
DCGM_EXPORTER = {"4.1.3-1": "1:4.2.3-1", "4.5.2-1": "1:4.4.1-1"}
CONTAINER_TOOLKIT = ["1.17.8-1", "1.18.0-1"]
# nvidia-cdi-refresh.path/.service ship from 1.18.0 on.
CDI_REFRESH_FROM = (1, 18)
NVIDIA_DOCKER2 = "2.14.0-1"
# DOCA-Host's package versions name the OS they were built for (doca-host_2.9.1-018000-24.10-ubuntu2404).
DOCA = "2.9.1-018000-24.10-debian12"
MLNX_OFED_KERNEL = "24.10.OFED.24.10.2.1.8.1-1"
HPCX = "2.21"
NCCL_TESTS = "2.16.8"
# One archive per OS NVIDIA builds HPC-X for (its names: debian12, ubuntu22.04, ubuntu24.04), with
# a .sha256 each and one SHA256SUMS over them all, which a site's mirror may keep.
HPCX_OSES = ("debian12", "ubuntu22.04", "ubuntu24.04")
HPCX_NAMES = [f"hpcx-v{HPCX}-gcc-doca_ofed-{os_name}-cuda12-x86_64" for os_name in HPCX_OSES]
HPCX_NAMES.append(f"hpcx-v{HPCX}-gcc-doca_ofed-ubuntu24.04-cuda12-aarch64")
HPCX_NAME = HPCX_NAMES[0]
HPCX_PATH = f"hpcx/v{HPCX}/{HPCX_NAME}.tbz"
NVLSM = "2025.06.5-1"
# SchedMD-built packages (source package slurm-smd; names from packages.microsoft.com's
# slurm-ubuntu-* mirrors). The stand-ins carry no Slurm of their own: each depends on the
# distribution's package with the same daemon at its release (SLURM_SMD_RELEASES), so a node runs
# the real daemons either way. Two revisions, so that a pinned install is told apart from "the
# newest".
SLURM_SMD_REVISIONS = ("-1", "-2")
# The only packages the stand-ins take from Debian itself (not pinned exactly).
DEBIAN_DEPENDENCIES = {
    "munge",
    "slurm-wlm-basic-plugins",
    "slurm-client",
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "python3-yaml",
    "openssl",
}
SLURM_SMD_PARTS = {
    "slurm-smd-client": ("slurm-client", "Slurm client commands"),
    "slurm-smd-slurmctld": ("slurmctld", "Slurm controller daemon"),
    "slurm-smd-slurmd": ("slurmd", "Slurm compute node daemon"),
    "slurm-smd-slurmdbd": ("slurmdbd", "Slurm database daemon"),
}


@dataclass
class Package:
    name: str
    version: str
    repo: str
    description: str
    depends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    postinst: str = ""
    prerm: str = ""
    arch: str = "amd64"

    @property
    def filename(self) -> str:
        version = self.version.split(":", 1)[-1]
        return f"{self.name}_{version}_{self.arch}.deb"


def node_program(text: str) -> str:
    """A stand-in program as installed on a node. The source says #!/usr/bin/env python, the one
    Python shebang ansible-test's sanity allows outside modules; the test nodes have python3 and no
    python, so the installed copy names the node's interpreter."""
    return re.sub(r"\A#!/usr/bin/env python\n", "#!/usr/bin/python3\n", text)


def _template(name: str, **values: str) -> str:
    text = node_program((HERE / name).read_text())
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text


DAEMON_RELOAD = "if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi\n"


def service(
    pkg: Package, unit: str, binary: str, exec_args: str, *, listen: str = "", needs_driver: str = "", after: str = ""
) -> None:
    """Add a stand-in daemon and its real systemd unit to a package."""
    pkg.files[binary] = (
        _template(
            "standin-daemon.py",
            NAME=os.path.basename(binary),
            VERSION=pkg.version.split(":")[-1].split("-", maxsplit=1)[0],
            LISTEN=listen,
            NEEDS_DRIVER=needs_driver,
        ),
        0o755,
    )
    pkg.files[f"/lib/systemd/system/{unit}"] = (
        "[Unit]\n"
        f"Description={pkg.description} (gpusim stand-in)\n"
        f"After=network.target{(' ' + after) if after else ''}\n\n"
        "[Service]\n"
        f"ExecStart={binary}{(' ' + exec_args) if exec_args else ''}\n"
        "Restart=no\n\n"
        "[Install]\nWantedBy=multi-user.target\n",
        0o644,
    )
    pkg.postinst += DAEMON_RELOAD


# The modules NVIDIA's dkms.conf builds (R580, open and proprietary alike), in its order.
NVIDIA_MODULES = ("nvidia", "nvidia-uvm", "nvidia-modeset", "nvidia-drm", "nvidia-peermem")
MODULE_C = """\
// gpusim stand-in for NVIDIA's {name} kernel module, driver {version}: a real out-of-tree module
// that DKMS builds and signs for a kernel; loaded, it refuses (-ENODEV) and registers nothing.
#include <linux/module.h>
#include <linux/errno.h>

static int __init gpusim_init(void)
{{
\treturn -ENODEV;
}}
module_init(gpusim_init);

MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION("{version}");
MODULE_DESCRIPTION("gpusim stand-in for NVIDIA's {name} kernel module");
"""


def dkms_source(pkg: Package, version: str) -> None:
    """The driver's module source under /usr/src/nvidia-<version>, as NVIDIA's nvidia-dkms packages
    lay it out (dkms.conf with NVIDIA's module names), and dh_dkms's maintainer scripts: add the
    source to DKMS and build and install it for every kernel with headers, where DKMS is installed
    (NVIDIA's packages depend on it; the stand-in does not, so that scenarios without a compiler
    install as before)."""
    src = f"/usr/src/nvidia-{version}"
    conf = [
        'PACKAGE_NAME="nvidia"',
        f'PACKAGE_VERSION="{version}"',
        'AUTOINSTALL="yes"',
        'MAKE[0]="make -C ${kernel_source_dir} M=${dkms_tree}/${PACKAGE_NAME}/${PACKAGE_VERSION}/build modules"',
        'CLEAN="make -C ${kernel_source_dir} M=${dkms_tree}/${PACKAGE_NAME}/${PACKAGE_VERSION}/build clean"',
    ]
    for index, name in enumerate(NVIDIA_MODULES):
        conf += [f'BUILT_MODULE_NAME[{index}]="{name}"', f'DEST_MODULE_LOCATION[{index}]="/kernel/drivers/video"']
        pkg.files[f"{src}/{name}.c"] = (MODULE_C.format(name=name, version=version), 0o644)
    pkg.files[f"{src}/dkms.conf"] = ("\n".join(conf) + "\n", 0o644)
    pkg.files[f"{src}/Kbuild"] = ("obj-m := " + " ".join(f"{name}.o" for name in NVIDIA_MODULES) + "\n", 0o644)
    pkg.postinst += (
        "if command -v dkms >/dev/null 2>&1; then\n"
        f"  [ -e /var/lib/dkms/nvidia/{version}/source ] || dkms add nvidia/{version}\n"
        "  for build in /lib/modules/*/build; do\n"
        '    [ -d "$build" ] || continue\n'
        '    kernel=$(basename "$(dirname "$build")")\n'
        f'    dkms install nvidia/{version} -k "$kernel"\n'
        "  done\n"
        "fi\n"
    )
    pkg.prerm += (
        f"if command -v dkms >/dev/null 2>&1 && [ -e /var/lib/dkms/nvidia/{version} ]; then\n"
        f"  dkms remove nvidia/{version} --all\n"
        "fi\n"
    )


# The IMEX package's config.cfg: the keys the stand-in reads, at the values of Canonical's
# nvidia-imex-580 (580.196.07), whose unit the stand-in's is too.
IMEX_CONFIG = """\
LOG_LEVEL=4
LOG_FILE_NAME=/var/log/nvidia-imex.log
DAEMONIZE=1
BIND_INTERFACE_IP=
SERVER_PORT=50000
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
IMEX_WAIT_FOR_QUORUM=RECOVERY
IMEX_CMD_ENABLED=1
IMEX_CMD_BIND_INTERFACE_IP=
IMEX_CMD_PORT=50005
"""
IMEX_UNIT = """\
[Unit]
Description=NVIDIA IMEX service (gpusim stand-in)
After=network-online.target

[Service]
User=root
Type=forking
ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg

[Install]
WantedBy=multi-user.target
"""


def imex(pkg: Package, version: str) -> None:
    """The IMEX daemon and its control tool (one stand-in program under both names), the package's
    config.cfg (a conffile: the node list is the site's own file beside it) and unit."""
    program = _template("nvidia-imex.py", VERSION=version)
    pkg.files["/usr/bin/nvidia-imex"] = (program, 0o755)
    pkg.files["/usr/bin/nvidia-imex-ctl"] = (program, 0o755)
    pkg.files["/etc/nvidia-imex/config.cfg"] = (IMEX_CONFIG, 0o644)
    pkg.files["/usr/lib/systemd/system/nvidia-imex.service"] = (IMEX_UNIT, 0o644)
    pkg.postinst += DAEMON_RELOAD


def driver_packages() -> list[Package]:
    pkgs = []
    for branch, (versions, cuda) in DRIVERS.items():
        others = [b for b in DRIVERS if b != branch]
        for v in versions:
            ver = f"{v}-1"

            def pkg(name: str, desc: str, ver: str = ver, **kw) -> Package:
                p = Package(name, ver, CUDA_REPO, desc, **kw)
                pkgs.append(p)
                return p

            pin = pkg(f"nvidia-driver-pinning-{branch}", f"Pins the NVIDIA driver to the R{branch} branch")
            pin.files[f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}"] = (
                f"Package: src:*nvidia*:any src:cuda-drivers:any src:cuda-compat:any\n"
                f"Pin: version {branch}.*\nPin-Priority: 1000\n",
                0o644,
            )
            compute = pkg(
                f"libnvidia-compute-{branch}",
                "NVIDIA libcompute package",
                conflicts=[f"libnvidia-compute-{o}" for o in others],
            )
            compute.files[f"/usr/lib/x86_64-linux-gnu/libcuda.so.{v}"] = (f"gpusim stand-in libcuda {v}\n", 0o644)
            utils = pkg(
                f"nvidia-utils-{branch}",
                "NVIDIA driver support binaries",
                depends=[f"libnvidia-compute-{branch} (= {ver})"],
                conflicts=[f"nvidia-utils-{o}" for o in others],
            )
            utils.files["/usr/bin/nvidia-smi"] = (
                _template("nvidia-smi.py", DRIVER_VERSION=v, CUDA_VERSION=cuda),
                0o755,
            )
            cutils = pkg(
                f"nvidia-compute-utils-{branch}",
                "NVIDIA compute utilities",
                depends=[f"libnvidia-compute-{branch} (= {ver})"],
                conflicts=[f"nvidia-compute-utils-{o}" for o in others],
            )
            service(
                cutils,
                "nvidia-persistenced.service",
                "/usr/bin/nvidia-persistenced",
                "--user nvidia-persistenced --verbose",
            )
            for flavour, suffix in (("open", "-open"), ("proprietary", "")):
                dkms = pkg(
                    f"nvidia-dkms-{branch}{suffix}",
                    f"NVIDIA DKMS package ({flavour} kernel modules)",
                    conflicts=[
                        f"nvidia-dkms-{b}{s}" for b in DRIVERS for s in ("-open", "") if (b, s) != (branch, suffix)
                    ],
                )
                dkms_source(dkms, v)
                dkms.files["/usr/share/gpusim/driver-version"] = (f"{v}\n", 0o644)
                dkms.files["/usr/share/gpusim/kernel-module-flavour"] = (f"{flavour}\n", 0o644)
                pkg(
                    f"nvidia-driver-{branch}{suffix}",
                    f"NVIDIA driver metapackage ({flavour})",
                    depends=[
                        f"{n}-{branch} (= {ver})" for n in ("libnvidia-compute", "nvidia-utils", "nvidia-compute-utils")
                    ]
                    + [f"nvidia-dkms-{branch}{suffix} (= {ver})"],
                )
            pkg(
                f"nvidia-open-{branch}",
                "NVIDIA open kernel module driver (branch-suffixed name)",
                depends=[f"nvidia-driver-{branch}-open (= {ver})"],
            )
            pkg(
                f"cuda-drivers-{branch}",
                "CUDA drivers, proprietary kernel modules (branch-suffixed name)",
                depends=[f"nvidia-driver-{branch} (= {ver})"],
            )
            # The unsuffixed names of the R590+ scheme, here resolving to the same packages.
            pkg(
                "nvidia-open",
                "NVIDIA open kernel module driver (unsuffixed name)",
                depends=[f"nvidia-driver-{branch}-open (= {ver})"],
            )
            pkg("cuda-drivers", "CUDA drivers (unsuffixed name)", depends=[f"nvidia-driver-{branch} (= {ver})"])
            pkg(
                "nvidia-dkms-open",
                "NVIDIA DKMS open kernel modules (unsuffixed name)",
                depends=[f"nvidia-dkms-{branch}-open (= {ver})"],
            )
            pkg(
                "libnvidia-compute",
                "NVIDIA libcompute (unsuffixed name)",
                depends=[f"libnvidia-compute-{branch} (= {ver})"],
            )
            fm = pkg(
                f"nvidia-fabricmanager-{branch}",
                "NVIDIA Fabric Manager",
                conflicts=[f"nvidia-fabricmanager-{o}" for o in others],
            )
            service(
                fm,
                "nvidia-fabricmanager.service",
                "/usr/bin/nv-fabricmanager",
                "-c /usr/share/nvidia/nvswitch/fabricmanager.cfg",
                needs_driver="exact",
            )
            fm.files["/usr/share/nvidia/nvswitch/fabricmanager.cfg"] = ("LOG_LEVEL=4\nFABRIC_MODE=0\n", 0o644)
            pkg(f"libnvidia-nscq-{branch}", "NVIDIA NSCQ library", conflicts=[f"libnvidia-nscq-{o}" for o in others])
            imex(pkg(f"nvidia-imex-{branch}", "NVIDIA IMEX", conflicts=[f"nvidia-imex-{o}" for o in others]), v)
            pkg(
                f"cuda-drivers-fabricmanager-{branch}",
                "CUDA drivers with Fabric Manager",
                depends=[f"cuda-drivers-{branch} (= {ver})", f"nvidia-fabricmanager-{branch} (= {ver})"],
            )
    compat = []
    for minor, ver in CUDA_COMPAT.items():
        dotted = minor.replace("-", ".")
        p = Package(f"cuda-compat-{minor}", ver, CUDA_REPO, f"CUDA {dotted} forward compatibility")
        p.files[f"/usr/local/cuda-{dotted}/compat/libcuda.so.{ver.split('-', maxsplit=1)[0]}"] = (
            "gpusim stand-in\n",
            0o644,
        )
        compat.append(p)
    nvlsm = Package("nvlsm", NVLSM, CUDA_REPO, "NVLink Subnet Manager")
    service(nvlsm, "nvlsm.service", "/opt/nvidia/nvlsm/sbin/nvlsm", "")
    return [*pkgs, *compat, nvlsm]


def other_distributions(pkgs: list[Package]) -> list[Package]:
    """The CUDA repository's packages again for each other distribution's folder, with the Ubuntu
    revision on the Ubuntu folders' user-mode driver packages (and the exact dependencies on them)."""
    out = []
    for distro, repo in CUDA_REPOS.items():
        if repo == CUDA_REPO:
            continue
        ubuntu = distro.startswith("ubuntu")
        for pkg in (p for p in pkgs if p.repo == CUDA_REPO):
            copy = replace(pkg, repo=repo, files=dict(pkg.files), depends=list(pkg.depends))
            if ubuntu:
                if UBUNTU_REVISED.fullmatch(pkg.name):
                    copy.version = re.sub(r"-1$", "-" + UBUNTU_REVISION, pkg.version)
                copy.depends = [
                    re.sub(r"[(]= (.*)-1[)]$", r"(= \1-" + UBUNTU_REVISION + ")", dep)
                    if UBUNTU_REVISED.fullmatch(dep.split(" ", 1)[0])
                    else dep
                    for dep in pkg.depends
                ]
            out.append(copy)
    return out


def arm64_packages(pkgs: list[Package]) -> list[Package]:
    """The packages of each folder ARM64_REPOS names again, built for arm64 in its arm64 folder."""
    return [
        replace(pkg, repo=ARM64_REPOS[pkg.repo], files=dict(pkg.files), depends=list(pkg.depends), arch="arm64")
        for pkg in pkgs
        if pkg.repo in ARM64_REPOS
    ]


def cuda_packages() -> list[Package]:
    pkgs = []
    for minor, ver in CUDA_TOOLKITS.items():
        dotted = minor.replace("-", ".")
        p = Package(f"cuda-toolkit-{minor}", ver, CUDA_REPO, f"CUDA Toolkit {dotted}")
        p.files[f"/usr/local/cuda-{dotted}/bin/nvcc"] = (
            "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver (gpusim stand-in)'\n"
            f"echo 'Cuda compilation tools, release {dotted}, V{ver.split('-', maxsplit=1)[0]}'\n",
            0o755,
        )
        p.files[f"/usr/local/cuda-{dotted}/version.json"] = (
            f'{{"cuda": {{"name": "CUDA SDK", "version": "{ver.split("-", maxsplit=1)[0]}"}}}}\n',
            0o644,
        )
        p.files[f"/usr/local/cuda-{dotted}/lib64/libcudart.so.{ver.split('-', maxsplit=1)[0]}"] = (
            "gpusim stand-in\n",
            0o644,
        )
        # Like NVIDIA's packages: the toolkit registers itself for /usr/local/cuda and
        # /usr/local/cuda-<major> (update-alternatives groups "cuda" and "cuda-<major>"),
        # highest version first in auto mode.
        major, priority = dotted.split(".", 1)[0], int(minor.replace("-", ""))
        p.postinst += (
            f"update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-{dotted} {priority}\n"
            f"update-alternatives --install /usr/local/cuda-{major} cuda-{major} /usr/local/cuda-{dotted} {priority}\n"
        )
        p.prerm += (
            'if [ "$1" = remove ] || [ "$1" = deconfigure ]; then\n'
            f"  update-alternatives --remove cuda /usr/local/cuda-{dotted}\n"
            f"  update-alternatives --remove cuda-{major} /usr/local/cuda-{dotted}\n"
            "fi\n"
        )
        pkgs.append(p)
    for ver in CUDNN:
        pkgs += [
            Package(
                "libcudnn9-cuda-12",
                ver,
                CUDA_REPO,
                "cuDNN runtime libraries for CUDA 12",
                files={
                    f"/usr/lib/x86_64-linux-gnu/libcudnn.so.{ver.split('-', maxsplit=1)[0]}": (
                        "gpusim stand-in\n",
                        0o644,
                    )
                },
            ),
            Package(
                "libcudnn9-dev-cuda-12",
                ver,
                CUDA_REPO,
                "cuDNN development files for CUDA 12",
                depends=[f"libcudnn9-cuda-12 (= {ver})"],
            ),
            Package(
                "cudnn9-cuda-12",
                ver,
                CUDA_REPO,
                "cuDNN 9 for CUDA 12 (metapackage)",
                depends=[f"libcudnn9-cuda-12 (= {ver})", f"libcudnn9-dev-cuda-12 (= {ver})"],
            ),
        ]
    for name, desc in (("libcudnn8", "cuDNN 8 runtime libraries"), ("libcudnn8-dev", "cuDNN 8 development files")):
        pkgs.append(
            Package(
                name,
                CUDNN8,
                CUDA_REPO,
                desc,
                depends=[f"libcudnn8 (= {CUDNN8})"] if name.endswith("-dev") else [],
                files={}
                if name.endswith("-dev")
                else {"/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7": ("gpusim stand-in\n", 0o644)},
            )
        )
    for ver in NCCL:
        pkgs += [
            Package(
                "libnccl2",
                ver,
                CUDA_REPO,
                "NVIDIA Collective Communication Library (NCCL) Runtime",
                files={
                    f"/usr/lib/x86_64-linux-gnu/libnccl.so.{ver.split('-', maxsplit=1)[0]}": (
                        "gpusim stand-in\n",
                        0o644,
                    )
                },
            ),
            Package(
                "libnccl-dev",
                ver,
                CUDA_REPO,
                "NVIDIA Collective Communication Library (NCCL) Development",
                depends=[f"libnccl2 (= {ver})"],
            ),
        ]
    for ver in DCGM4:
        core = Package(
            "datacenter-gpu-manager-4-core", ver, CUDA_REPO, "NVIDIA DCGM 4 core", conflicts=["datacenter-gpu-manager"]
        )
        service(
            core,
            "nvidia-dcgm.service",
            "/usr/bin/nv-hostengine",
            "-n --service-account nvidia-dcgm",
            listen="127.0.0.1:5555",
            after="nvidia-persistenced.service",
        )
        core.files["/usr/bin/dcgmi"] = (_template("dcgmi.py"), 0o755)
        pkgs.append(core)
        for n in ("12", "13"):
            pkgs.append(
                Package(
                    f"datacenter-gpu-manager-4-cuda{n}",
                    ver,
                    CUDA_REPO,
                    f"NVIDIA DCGM 4 for CUDA {n}",
                    depends=[f"datacenter-gpu-manager-4-core (= {ver})"],
                )
            )
        pkgs += [
            Package(
                "datacenter-gpu-manager-4-proprietary",
                ver,
                CUDA_REPO,
                "NVIDIA DCGM 4 proprietary modules",
                depends=[f"datacenter-gpu-manager-4-core (= {ver})"],
            ),
            Package(
                "datacenter-gpu-manager-4-dev",
                ver,
                CUDA_REPO,
                "NVIDIA DCGM 4 development files",
                depends=[f"datacenter-gpu-manager-4-core (= {ver})"],
            ),
        ]
    for ver, dcgm in DCGM_EXPORTER.items():
        exporter = Package(
            "datacenter-gpu-manager-exporter",
            ver,
            CUDA_REPO,
            "NVIDIA DCGM exporter for Prometheus",
            depends=[f"datacenter-gpu-manager-4-core (= {dcgm})"],
        )
        exporter.files["/usr/bin/dcgm-exporter"] = (
            _template("dcgm-exporter.py", VERSION=exporter_version(ver, dcgm)),
            0o755,
        )
        exporter.files["/etc/dcgm-exporter/default-counters.csv"] = (
            "# Format: DCGM field, Prometheus metric type, help message\n"
            "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
            "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n",
            0o644,
        )
        pkgs.append(exporter)
    old = Package("datacenter-gpu-manager", DCGM3, CUDA_REPO, "NVIDIA DCGM 3 (monolithic)")
    service(old, "nvidia-dcgm.service", "/usr/bin/nv-hostengine", "-n", listen="127.0.0.1:5555")
    return [*pkgs, old]


def exporter_version(ver: str, dcgm: str) -> str:
    """What dcgm-exporter --version reports: <dcgm>-<exporter>, as NVIDIA's image tags pair them."""
    return f"{dcgm.rsplit(':', maxsplit=1)[-1].split('-', maxsplit=1)[0]}-{ver.split('-', maxsplit=1)[0]}"


def cdi_refresh(pkg: Package) -> None:
    """The CDI refresh units of toolkit 1.18+, enabled by the package's postinst as NVIDIA's is."""
    pkg.files["/lib/systemd/system/nvidia-cdi-refresh.service"] = (
        "[Unit]\nDescription=Refresh the NVIDIA CDI specification file (gpusim stand-in)\n"
        "ConditionPathExists=|/usr/bin/nvidia-smi\n\n[Service]\nType=oneshot\n"
        "EnvironmentFile=-/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env\n"
        "ExecStart=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml\n\n"
        "[Install]\nWantedBy=multi-user.target\n",
        0o644,
    )
    pkg.files["/lib/systemd/system/nvidia-cdi-refresh.path"] = (
        "[Unit]\nDescription=Refresh the NVIDIA CDI specification when the driver changes (gpusim stand-in)\n\n"
        "[Path]\nPathChanged=/usr/bin/nvidia-smi\nUnit=nvidia-cdi-refresh.service\n\n"
        "[Install]\nWantedBy=multi-user.target\n",
        0o644,
    )
    pkg.postinst += (
        "if [ -d /run/systemd/system ] && systemctl --quiet is-system-running 2>/dev/null; then\n"
        "  systemctl daemon-reload\n"
        "  systemctl enable --now nvidia-cdi-refresh.path"
        " || echo 'Warning: could not enable nvidia-cdi-refresh.path' >&2\n"
        "  systemctl enable --now nvidia-cdi-refresh.service"
        " || echo 'Warning: could not enable nvidia-cdi-refresh.service' >&2\n"
        "fi\n"
    )


def toolkit_packages() -> list[Package]:
    pkgs = []
    for ver in CONTAINER_TOOLKIT:
        v = ver.split("-", maxsplit=1)[0]
        ctk = Package("nvidia-container-toolkit-base", ver, TOOLKIT_REPO, "NVIDIA Container Toolkit Base")
        ctk.files["/usr/bin/nvidia-ctk"] = (_template("nvidia-ctk.py", VERSION=v), 0o755)
        if tuple(int(x) for x in v.split(".")[:2]) >= CDI_REFRESH_FROM:
            cdi_refresh(ctk)
        runtime = Package(
            "nvidia-container-toolkit",
            ver,
            TOOLKIT_REPO,
            "NVIDIA Container Toolkit",
            depends=[f"nvidia-container-toolkit-base (= {ver})", f"libnvidia-container-tools (= {ver})"],
            conflicts=["nvidia-docker2"],
        )
        for binary in ("nvidia-container-runtime", "nvidia-container-runtime-hook"):
            runtime.files[f"/usr/bin/{binary}"] = (
                f'#!/bin/sh\necho "{binary} {v} (gpusim stand-in): runs no containers" >&2\nexit 1\n',
                0o755,
            )
        pkgs += [
            Package("libnvidia-container1", ver, TOOLKIT_REPO, "NVIDIA container runtime library"),
            Package(
                "libnvidia-container-tools",
                ver,
                TOOLKIT_REPO,
                "NVIDIA container runtime library (tools)",
                depends=[f"libnvidia-container1 (= {ver})"],
            ),
            ctk,
            runtime,
        ]
    pkgs.append(Package("nvidia-docker2", NVIDIA_DOCKER2, TOOLKIT_REPO, "NVIDIA Docker 2 (deprecated)"))
    return pkgs


OPENIBD = """#!/bin/sh
### BEGIN INIT INFO
# Provides:          openibd
# Required-Start:    $local_fs
# Required-Stop:     $local_fs
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Description:       Activates/Deactivates the OFED kernel stack at boot
### END INIT INFO
# gpusim stand-in for openibd: the real one loads the OFED kernel stack (mlx5_core, mlx5_ib, ib_umad, ...).
case "$1" in
  start|restart|force-reload) echo "Loading HCA driver and Access Layer: [  OK  ] (gpusim stand-in)" ;;
  stop) echo "Unloading HCA driver: [  OK  ] (gpusim stand-in)" ;;
  status) echo "The OFED stack is loaded (gpusim stand-in)" ;;
  *) echo "Usage: openibd {start|stop|restart|status}" >&2; exit 2 ;;
esac
"""


# nvidia-mig-manager: GitHub release assets (github.com/NVIDIA/mig-parted/releases/download/v<V>/
# nvidia-mig-manager_<V>-1_amd64.deb); the files of the real package (deployments/systemd at v0.15.0,
# shared/facts/k8s_mig_validation.md section 2.2), the tool a stand-in that applies through nvidia-smi.
MIG_MANAGER = ["0.15.0-1"]
MIG_MANAGER_PATH = "NVIDIA/mig-parted/releases/download"
MIG_MANAGER_UNIT = """[Unit]
Description=NVIDIA MIG Manager service (gpusim stand-in)
DefaultDependencies=no
After=nvidia-persistenced.service nvidia-fabricmanager.service
Before=nvidia-gpu-reset.target

[Service]
Type=oneshot
Environment=MIG_PARTED_CONFIG_FILE=/etc/nvidia-mig-manager/config.yaml
Environment=MIG_PARTED_HOOKS_FILE=/etc/nvidia-mig-manager/hooks.yaml
ExecStart=/etc/nvidia-mig-manager/service.sh
TimeoutStartSec=480

[Install]
WantedBy=multi-user.target nvidia-gpu-reset.target
"""
MIG_MANAGER_SERVICE_SH = """#!/bin/sh
# gpusim stand-in for the MIG manager's service.sh: apply the selected config. (The real one also
# writes config.yaml from the hardware at every boot; a site's own config lives in the file that
# MIG_PARTED_CONFIG_FILE names.)
set -e
exec /usr/bin/nvidia-mig-parted apply -f "${MIG_PARTED_CONFIG_FILE}" -c "${MIG_PARTED_SELECTED_CONFIG}" \\
  -k "${MIG_PARTED_HOOKS_FILE}"
"""


def mig_manager_packages() -> list[Package]:
    pkgs = []
    for ver in MIG_MANAGER:
        pkg = Package(
            "nvidia-mig-manager",
            ver,
            MIG_MANAGER_PATH,
            "NVIDIA MIG Partition Editor and systemd service",
            depends=["python3-yaml"],  # the stand-in tool is Python; the real one is a Go binary
        )
        v = ver.split("-", maxsplit=1)[0]
        pkg.files["/usr/bin/nvidia-mig-parted"] = (_template("nvidia-mig-parted.py", VERSION=v), 0o755)
        pkg.files["/usr/lib/systemd/system/nvidia-mig-manager.service"] = (MIG_MANAGER_UNIT, 0o644)
        pkg.files["/usr/lib/systemd/system/nvidia-gpu-reset.target"] = (
            "[Unit]\nDescription=NVIDIA GPU reset target (gpusim stand-in)\n",
            0o644,
        )
        pkg.files["/etc/systemd/system/nvidia-mig-manager.service.d/override.conf"] = (
            '[Service]\nEnvironment="MIG_PARTED_SELECTED_CONFIG=all-disabled"\n',
            0o644,
        )
        pkg.files["/etc/nvidia-mig-manager/service.sh"] = (MIG_MANAGER_SERVICE_SH, 0o755)
        pkg.files["/etc/nvidia-mig-manager/config.yaml"] = (
            "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n",
            0o644,
        )
        pkg.files["/etc/nvidia-mig-manager/hooks.yaml"] = ("version: v1\nhooks: {}\n", 0o644)
        pkg.postinst += DAEMON_RELOAD
        # NVIDIA publishes an amd64 and an arm64 .deb per release (NVIDIA/deepops#1399).
        pkgs += [pkg, replace(pkg, files=dict(pkg.files), arch="arm64")]
    return pkgs


KUBELET_UNIT = """[Unit]
Description=kubelet: The Kubernetes Node Agent (gpusim stand-in)
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""
# What the real kubeadm package puts beside kubelet's unit: the flags kubeadm join writes.
KUBEADM_DROPIN = """[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""
APISERVER_UNIT = """[Unit]
Description=Kubernetes API service of the control plane's stand-in (gpusim; kubeadm init starts it)
After=network.target

[Service]
ExecStart=/usr/bin/kubeadm __apiserver
Restart=on-failure
"""


def kubernetes_packages() -> list[Package]:
    """kubeadm, kubelet, kubectl and cri-tools of each release, one program (kube.py) under each
    name; they need python3-yaml (the stand-in is Python) and openssl (the CA's hash)."""
    pkgs = []
    for minor, releases in K8S_RELEASES.items():
        repo = K8S_REPOS[minor]
        tools = Package("cri-tools", f"{minor}.0-1.1", repo, "Command-line utility for the Container Runtime Interface")
        tools.files["/usr/bin/crictl"] = (_template("kube.py", VERSION=f"{minor}.0"), 0o755)
        pkgs.append(tools)
        for ver in releases:
            release = ver.split("-", maxsplit=1)[0]
            program = _template("kube.py", VERSION=release)
            kubeadm = Package(
                "kubeadm",
                ver,
                repo,
                "Command-line utility for administering a Kubernetes cluster",
                depends=[f"cri-tools (>= {minor}.0)", "python3-yaml", "openssl"],
            )
            kubeadm.files["/usr/bin/kubeadm"] = (program, 0o755)
            kubeadm.files["/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"] = (KUBEADM_DROPIN, 0o644)
            kubeadm.files["/usr/lib/systemd/system/gpusim-kube-apiserver.service"] = (APISERVER_UNIT, 0o644)
            kubeadm.postinst += DAEMON_RELOAD
            kubelet = Package("kubelet", ver, repo, "Node agent for Kubernetes clusters", depends=["python3-yaml"])
            kubelet.files["/usr/bin/kubelet"] = (program, 0o755)
            kubelet.files["/usr/lib/systemd/system/kubelet.service"] = (KUBELET_UNIT, 0o644)
            kubelet.postinst += DAEMON_RELOAD
            kubectl = Package("kubectl", ver, repo, "Command-line utility for interacting with a Kubernetes cluster",
                              depends=["python3-yaml"])  # fmt: skip
            kubectl.files["/usr/bin/kubectl"] = (program, 0o755)
            pkgs += [kubeadm, kubelet, kubectl]
    return pkgs


def slurm_smd_packages() -> list[Package]:
    pkgs = []
    for os_name, release in SLURM_SMD_RELEASES.items():
        repo = SLURM_SMD_REPOS[os_name]
        for ver in (release + r for r in SLURM_SMD_REVISIONS):
            base = Package(
                "slurm-smd",
                ver,
                repo,
                "Slurm base (plugins, libslurm)",
                depends=[f"slurm-wlm-basic-plugins (>= {release})", "munge"],
            )
            base.files["/usr/share/doc/slurm-smd/VERSION"] = (f"{ver}\n", 0o644)
            pkgs.append(base)
            for name, (daemon, desc) in SLURM_SMD_PARTS.items():
                pkgs.append(
                    Package(
                        name,
                        ver,
                        repo,
                        desc,
                        depends=[f"slurm-smd (= {ver})", f"{daemon} (>= {release})"],
                    )
                )
    return pkgs


def doca_packages() -> list[Package]:
    return [pkg for repo in DOCA_REPOS.values() for pkg in doca_folder(repo)]


def doca_folder(repo: str) -> list[Package]:
    doca = DOCA.replace("debian12", repo.split("/")[2].replace(".", ""))
    user = Package("doca-ofed-userspace", doca, repo, "DOCA-OFED user space")
    user.files["/usr/share/doc/doca-ofed/VERSION"] = (f"{doca}\n", 0o644)
    dkms = Package("mlnx-ofed-kernel-dkms", MLNX_OFED_KERNEL, repo, "DKMS support for the mlnx-ofed kernel modules")
    dkms.files["/usr/src/mlnx-ofed-kernel-24.10/dkms.conf"] = ('PACKAGE_NAME="mlnx-ofed-kernel"\n', 0o644)
    utils = Package(
        "mlnx-ofed-kernel-utils",
        MLNX_OFED_KERNEL,
        repo,
        "Userspace tools to restart and tune the mlnx-ofed kernel modules",
        depends=[f"mlnx-ofed-kernel-dkms (= {MLNX_OFED_KERNEL})"],
    )
    utils.files["/etc/init.d/openibd"] = (OPENIBD, 0o755)
    utils.files["/etc/infiniband/openib.conf"] = ("ONBOOT=yes\nRUN_SYSCTL=yes\n", 0o644)
    utils.files["/lib/systemd/system/openibd.service"] = (
        "[Unit]\nDescription=openibd - configure the OFED kernel stack (gpusim stand-in)\n"
        "Before=network-pre.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        "ExecStart=/etc/init.d/openibd start\nExecStop=/etc/init.d/openibd stop\n\n"
        "[Install]\nWantedBy=multi-user.target\n",
        0o644,
    )
    utils.postinst += DAEMON_RELOAD
    return [
        user,
        dkms,
        utils,
        Package(
            "doca-ofed",
            doca,
            repo,
            "DOCA-OFED profile (1:1 MLNX_OFED replacement)",
            depends=[f"doca-ofed-userspace (= {doca})", f"mlnx-ofed-kernel-utils (= {MLNX_OFED_KERNEL})"],
        ),
    ]


SHARP_AM = """#!/usr/bin/python3
# gpusim stand-in for SHARP's aggregation manager: like the real one it reads the file -O names
# (default /etc/sharp/sharp_am.cfg), logs to /var/log/sharp_am.log and re-reads it on SIGHUP.
import signal, sys, time

cfg = sys.argv[sys.argv.index("-O") + 1] if "-O" in sys.argv else "/etc/sharp/sharp_am.cfg"


def load(*_):
    try:
        settings = [l.strip() for l in open(cfg) if l.strip() and not l.startswith("#")]
    except OSError as err:
        print(f"sharp_am: cannot read {cfg}: {err}", flush=True)
        sys.exit(1)
    with open("/var/log/sharp_am.log", "a") as log:
        log.write(f"sharp_am (gpusim stand-in) @HPCX@: {cfg}: " + ", ".join(settings) + "\\n")
    print(f"sharp_am: running with {cfg}", flush=True)


load()
signal.signal(signal.SIGHUP, load)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
"""


def elf_shared_object(soname: str) -> bytes:
    """A minimal x86-64 ELF shared object: no code, only a dynamic section naming its SONAME. The
    loader's cache (ldconfig) lists it under that name, so tests can ask the loader where a library
    resolves; nothing can call into it."""
    strtab = b"\0" + soname.encode() + b"\0"
    phoff, phnum = 64, 2
    str_off = phoff + 56 * phnum
    sym_off = (str_off + len(strtab) + 7) & ~7
    symtab = bytes(24)  # the null symbol
    dyn_off = sym_off + len(symtab)
    tags = [(14, 1), (5, str_off), (10, len(strtab)), (6, sym_off), (11, 24), (0, 0)]  # SONAME STRTAB STRSZ SYMTAB
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in tags)
    size = dyn_off + len(dynamic)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0, 0]) + bytes(7)  # 64-bit, little-endian, SysV
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, 56, phnum, 64, 0, 0)  # ET_DYN x86-64
    load = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, size, size, 0x1000)  # PT_LOAD, R
    dyn = struct.pack("<IIQQQQQQ", 2, 4, dyn_off, dyn_off, dyn_off, len(dynamic), len(dynamic), 8)  # PT_DYNAMIC
    body = header + load + dyn + strtab
    return body + bytes(sym_off - len(body)) + symtab + dynamic


def hpcx_archive(name: str = HPCX_NAME) -> bytes:
    """An HPC-X tarball with the layout of NVIDIA's (sharp/, nccl_rdma_sharp_plugin/, ucx/); its
    libraries are ELF shared objects with their SONAMEs, which the loader's cache takes."""
    files = {
        "hpcx-init.sh": ('# HPC-X environment (gpusim stand-in)\nexport HPCX_DIR="$(dirname "$0")"\n', 0o644),
        "sharp/bin/sharp_am": (SHARP_AM.replace("@HPCX@", HPCX), 0o755),
        "sharp/lib/libsharp_coll.so.5": (elf_shared_object("libsharp_coll.so.5"), 0o755),
        "nccl_rdma_sharp_plugin/lib/libnccl-net.so": (elf_shared_object("libnccl-net.so"), 0o755),
        "ucx/lib/libucp.so.0": (elf_shared_object("libucp.so.0"), 0o755),
        "VERSION": (f"HPC-X v{HPCX}\n", 0o644),
    }
    entries = {
        f"{name}/{path}": (data if isinstance(data, bytes) else data.encode(), mode)
        for path, (data, mode) in files.items()
    }
    return bz2.compress(_tar(entries, prefix=""))


def nccl_tests_source() -> bytes:
    """A source archive named and laid out like nccl-tests' release tarball (top folder, Makefile).

    The simulated nodes never build it (no real CUDA compiler there); it is what the checksum of a
    mirrored source is computed over."""
    files = {
        "README.md": "gpusim stand-in for the nccl-tests source archive: not buildable.\n",
        "Makefile": "all:\n\t@echo 'gpusim stand-in: nccl-tests is not built on simulated nodes' >&2; exit 1\n",
    }
    entries = {f"nccl-tests-{NCCL_TESTS}/{path}": (text.encode(), 0o644) for path, text in files.items()}
    return gzip.compress(_tar(entries, prefix=""), mtime=0)


# -- .deb writing ------------------------------------------------------------------------------
def _tar(entries: dict[str, tuple[bytes, int]], prefix: str = "./") -> bytes:
    """A reproducible tar of ``entries`` (path: (data, mode)), its folders included, every mtime EPOCH."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = set()
        for path in entries:
            parts = path.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        for d in sorted(dirs):
            info = tarfile.TarInfo(f"{prefix}{d}/")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            tar.addfile(info)
        for path in sorted(entries):
            data, mode = entries[path]
            info = tarfile.TarInfo(prefix + path.strip("/"))
            info.size, info.mode, info.mtime = len(data), mode, EPOCH
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _tar_gz(entries: dict[str, tuple[bytes, int]]) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=EPOCH) as gz:
        gz.write(_tar(entries))
    return out.getvalue()


def _ar(members: list[tuple[str, bytes]]) -> bytes:
    out = [b"!<arch>\n"]
    for name, data in members:
        out.append(f"{name:<16}{EPOCH:<12}{0:<6}{0:<6}{0o100644:<8o}{len(data):<10}`\n".encode())
        out.append(data + (b"\n" if len(data) % 2 else b""))
    return b"".join(out)


def control_text(pkg: Package, installed_kib: int) -> str:
    lines = [
        f"Package: {pkg.name}",
        f"Version: {pkg.version}",
        f"Architecture: {pkg.arch}",
        f"Maintainer: {MAINTAINER}",
        f"Installed-Size: {installed_kib}",
        "Section: non-free/misc",
        "Priority: optional",
    ]
    if pkg.depends:
        lines.append("Depends: " + ", ".join(pkg.depends))
    if pkg.conflicts:
        lines.append("Conflicts: " + ", ".join(pkg.conflicts))
        lines.append("Replaces: " + ", ".join(pkg.conflicts))
    lines.append(f"Description: {pkg.description}\n gpusim stand-in package for gpuops.cluster tests.")
    return "\n".join(lines) + "\n"


def build_deb(pkg: Package) -> bytes:
    data = {path: (text.encode(), mode) for path, (text, mode) in pkg.files.items()}
    kib = max(1, sum(len(d) for d, _mode in data.values()) // 1024)
    control = {"control": (control_text(pkg, kib).encode(), 0o644)}
    md5 = "".join(f"{hashlib.md5(d).hexdigest()}  {p.strip('/')}\n" for p, (d, _mode) in sorted(data.items()))
    if md5:
        control["md5sums"] = (md5.encode(), 0o644)
    if pkg.postinst:
        control["postinst"] = (("#!/bin/sh\nset -e\n" + pkg.postinst).encode(), 0o755)
    if pkg.prerm:
        control["prerm"] = (("#!/bin/sh\nset -e\n" + pkg.prerm).encode(), 0o755)
    return _ar([("debian-binary", b"2.0\n"), ("control.tar.gz", _tar_gz(control)), ("data.tar.gz", _tar_gz(data))])


# -- repository --------------------------------------------------------------------------------
def gpg(home: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--quiet", "--yes", *args], check=True, capture_output=True, **kw
    )


def ensure_key(home: Path, secret: Path) -> None:
    """A GnuPG home holding exactly the committed test key ``secret`` (tests/gpusim/keys)."""
    wanted = fingerprint_of(secret)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    listed = gpg(home, "--list-secret-keys", "--with-colons").stdout.decode()
    if f":{wanted}:" in listed and listed.count("\nsec:") + listed.startswith("sec:") == 1:
        return
    shutil.rmtree(home)
    home.mkdir(parents=True, mode=0o700)
    gpg(home, "--import", str(secret))


def fingerprint_of(key: Path) -> str:
    """The primary fingerprint of a key file, as gpg prints it."""
    out = subprocess.run(
        ["gpg", "--batch", "--with-colons", "--show-keys", str(key)], check=True, capture_output=True, text=True
    ).stdout
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))


def write_repo(root: Path, repo: str, pkgs: list[Package], home: Path) -> None:
    folder = root / repo
    folder.mkdir(parents=True)
    stanzas = []
    for pkg in sorted(pkgs, key=lambda p: (p.name, p.version)):
        deb = build_deb(pkg)
        (folder / pkg.filename).write_bytes(deb)
        control = control_text(pkg, max(1, sum(len(t) for t, _mode in pkg.files.values()) // 1024)).rstrip("\n")
        head, _sep, desc = control.partition("\nDescription: ")
        stanzas.append(
            f"{head}\nFilename: ./{pkg.filename}\nSize: {len(deb)}\n"
            f"MD5sum: {hashlib.md5(deb).hexdigest()}\nSHA256: {hashlib.sha256(deb).hexdigest()}\n"
            f"Description: {desc}\n"
        )
    packages = "\n".join(stanzas).encode()
    (folder / "Packages").write_bytes(packages)
    with gzip.GzipFile(folder / "Packages.gz", "wb", mtime=EPOCH) as gz:
        gz.write(packages)
    origin, label = REPOS[repo]
    release = [
        f"Origin: {origin}",
        f"Label: {label}",
        "Architectures: " + " ".join(sorted({p.arch for p in pkgs} or {"amd64"})),
        "Date: Thu, 01 Jan 2026 00:00:00 UTC",
        "Acquire-By-Hash: no",
    ]
    for algo, title in (("md5", "MD5Sum"), ("sha256", "SHA256")):
        release.append(f"{title}:")
        for name in ("Packages", "Packages.gz"):
            blob = (folder / name).read_bytes()
            release.append(f" {hashlib.new(algo, blob).hexdigest()} {len(blob):>8} {name}")
    (folder / "Release").write_text("\n".join(release) + "\n")
    gpg(home, "--clearsign", "-o", str(folder / "InRelease"), str(folder / "Release"))
    gpg(home, "--armor", "--detach-sign", "-o", str(folder / "Release.gpg"), str(folder / "Release"))


def build(out: Path, cache: Path) -> None:
    if shutil.which("gpg") is None:
        raise SystemExit("gpg is needed to sign the gpusim repository: install gnupg")
    keyhome, wronghome = cache / "gnupg", cache / "gnupg-wrong"
    ensure_key(keyhome, KEYS / "archive.secret.asc")
    ensure_key(wronghome, KEYS / "wrong.secret.asc")
    tmp = Path(tempfile.mkdtemp(prefix="www.", dir=out.parent))
    try:
        pkgs = (
            driver_packages()
            + cuda_packages()
            + toolkit_packages()
            + doca_packages()
            + slurm_smd_packages()
            + kubernetes_packages()
        )
        pkgs += other_distributions(pkgs)
        pkgs += arm64_packages(pkgs)
        for repo in REPOS:
            home = wronghome if repo == WRONG_SIGNED_REPO else keyhome
            write_repo(tmp, repo, [p for p in pkgs if p.repo == repo], home)
        keys = tmp / "keys"
        keys.mkdir()
        (keys / "gpusim-archive-keyring.gpg").write_bytes(gpg(keyhome, "--export").stdout)
        (keys / "gpusim-archive-keyring.asc").write_bytes(gpg(keyhome, "--export", "--armor").stdout)
        (keys / "gpusim-wrong-keyring.gpg").write_bytes(gpg(wronghome, "--export").stdout)
        # The archive key's block, then a second block with the wrong key: gpg and apt trust both.
        (keys / "gpusim-two-blocks.asc").write_bytes(
            gpg(keyhome, "--export", "--armor").stdout + gpg(wronghome, "--export", "--armor").stdout
        )
        # The test key also where each vendor publishes its key, under the vendor's file name, so
        # that the roles find it from their mirror variable alone (key URL variables unset).
        armoured = gpg(keyhome, "--export", "--armor").stdout
        key_paths = [f"{repo}/3bf863cc.pub" for repo in [*CUDA_REPOS.values(), ARM64_REPOS[CUDA_REPOS["ubuntu2404"]]]]
        key_paths += ["libnvidia-container/gpgkey", "doca/GPG-KEY-Mellanox.pub"]
        for path in key_paths + [f"{repo}/Release.key" for repo in K8S_REPOS.values()]:
            (tmp / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp / path).write_bytes(armoured)
        sums = []
        for name in HPCX_NAMES:
            archive = tmp / "hpcx" / f"v{HPCX}" / f"{name}.tbz"
            archive.parent.mkdir(parents=True, exist_ok=True)
            archive.write_bytes(hpcx_archive(name))
            sums.append(f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  {archive.name}\n")
            (tmp / "hpcx" / f"v{HPCX}" / f"{archive.name}.sha256").write_text(sums[-1])
        (tmp / "hpcx" / f"v{HPCX}" / "SHA256SUMS").write_text("".join(sums))
        source = tmp / "nccl-tests" / f"v{NCCL_TESTS}.tar.gz"
        source.parent.mkdir(parents=True)
        source.write_bytes(nccl_tests_source())
        (tmp / "nccl-tests" / f"v{NCCL_TESTS}.tar.gz.sha256").write_text(
            f"{hashlib.sha256(source.read_bytes()).hexdigest()}  {source.name}\n"
        )
        # dcgm-exporter as a bare binary on a mirror, for dcgm_exporter_source: url.
        for ver, dcgm in DCGM_EXPORTER.items():
            binary = tmp / "dcgm-exporter" / f"v{ver.split('-', maxsplit=1)[0]}" / "dcgm-exporter"
            binary.parent.mkdir(parents=True)
            binary.write_text(_template("dcgm-exporter.py", VERSION=exporter_version(ver, dcgm)))
            (binary.parent / "dcgm-exporter.sha256").write_text(
                f"{hashlib.sha256(binary.read_bytes()).hexdigest()}  dcgm-exporter\n"
            )
        # The MIG manager as GitHub releases publish it: a .deb per release, no repository.
        for pkg in mig_manager_packages():
            deb = tmp / pkg.repo / f"v{pkg.version.split('-', maxsplit=1)[0]}" / pkg.filename
            deb.parent.mkdir(parents=True, exist_ok=True)
            deb.write_bytes(build_deb(pkg))
            (deb.parent / f"{pkg.filename}.sha256").write_text(
                f"{hashlib.sha256(deb.read_bytes()).hexdigest()}  {pkg.filename}\n"
            )
        (tmp / "index.html").write_text("gpusim stand-in repository\n")
        for d in [tmp, *tmp.rglob("*")]:
            os.chmod(d, 0o755 if d.is_dir() else 0o644)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
        print(f"gpusim repository: {len(pkgs)} packages in {len(REPOS)} repositories under {out}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to serve over HTTP")
    parser.add_argument("--cache", type=Path, required=True, help="folder that keeps the signing keys")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    build(args.out.resolve(), args.cache.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
