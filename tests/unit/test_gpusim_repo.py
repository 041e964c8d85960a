# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in repository: real names and versions, consistent indexes, valid signatures."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile

import pytest

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg (gnupg) is needed to sign the repository")


def stanzas(folder):
    text = (folder / "Packages").read_text()
    return [dict(re.findall(r"^([\w-]+): (.*)$", s, re.M)) for s in text.split("\n\n") if s.strip()]


def test_release_lists_the_indexes_with_their_hashes(repo):
    www, builder = repo
    for name in builder.REPOS:
        folder = www / name
        release = (folder / "Release").read_text()
        for index in ("Packages", "Packages.gz"):
            blob = (folder / index).read_bytes()
            assert f" {hashlib.sha256(blob).hexdigest()} {len(blob):>8} {index}" in release


def test_every_package_file_matches_its_index_entry(repo):
    www, builder = repo
    for name in builder.REPOS:
        for entry in stanzas(www / name):
            deb = (www / name / entry["Filename"]).read_bytes()
            assert deb.startswith(b"!<arch>\ndebian-binary")
            assert int(entry["Size"]) == len(deb)
            assert entry["SHA256"] == hashlib.sha256(deb).hexdigest()


def test_each_distribution_folder_has_the_cuda_repository_with_its_revisions(repo):
    """debian12, debian13, ubuntu2204, ubuntu2404 as NVIDIA names them; the Ubuntu folders carry
    "-0ubuntu1" on the user-mode driver packages (and their exact dependencies), Fabric Manager
    and the libraries keep "-1"; every exact dependency is met in its own folder."""
    www, builder = repo
    for distro in ("debian12", "debian13", "ubuntu2204", "ubuntu2404"):
        entries = stanzas(www / f"compute/cuda/repos/{distro}/x86_64")
        versions = {(e["Package"], e["Version"]) for e in entries}
        revision = "0ubuntu1" if distro.startswith("ubuntu") else "1"
        assert ("nvidia-driver-580-open", f"580.95.05-{revision}") in versions
        assert ("cuda-compat-13-0", f"580.95.05-{revision}") in versions
        assert ("nvidia-fabricmanager-580", "580.95.05-1") in versions
        assert ("libnccl2", builder.NCCL[-1]) in versions
        exact = [
            (name, version)
            for e in entries
            for name, version in re.findall(r"(\S+) [(]= ([^)]+)[)]", e.get("Depends", ""))
        ]
        assert exact and [dep for dep in exact if dep not in versions] == []
        assert (www / f"compute/cuda/repos/{distro}/x86_64/3bf863cc.pub").is_file()


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb checks the .deb format")
def test_dpkg_reads_the_packages(repo):
    www, _builder = repo
    deb = next((www / "compute/cuda/repos/debian12/x86_64").glob("nvidia-utils-570_570.133.20-1_amd64.deb"))
    info = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Package", "Version", "Depends"], capture_output=True, text=True, check=True
    ).stdout
    assert "Version: 570.133.20-1" in info
    assert "Depends: libnvidia-compute-570 (= 570.133.20-1)" in info
    contents = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "./usr/bin/nvidia-smi" in contents


def test_every_exact_dependency_is_in_the_repository(repo):
    www, builder = repo
    available = {(e["Package"], e["Version"]) for name in builder.REPOS for e in stanzas(www / name)}
    for name in builder.REPOS:
        for entry in stanzas(www / name):
            for dep in filter(None, entry.get("Depends", "").split(", ")):
                m = re.fullmatch(r"(\S+) \(= (\S+)\)", dep)
                if m:
                    assert (m.group(1), m.group(2)) in available, f"{entry['Package']} needs {dep}"
                else:
                    # Unpinned: Debian's own packages (the slurm-smd stand-ins' daemons, what the
                    # Python stand-ins need), or a package of the same repository at a lowest version
                    # (kubeadm's cri-tools, as pkgs.k8s.io's kubeadm has it).
                    low = re.fullmatch(r"(\S+)( \(>= (\S+)\))?", dep)
                    ours = [e["Version"] for e in stanzas(www / name) if e["Package"] == low.group(1)]
                    if ours:
                        assert low.group(3) and any(v >= low.group(3) for v in ours), dep
                    else:
                        assert low.group(1) in builder.DEBIAN_DEPENDENCIES, dep


@pytest.mark.parametrize(
    ("os_name", "release"),
    [("debian12", "22.05.8"), ("debian13", "24.11.5"), ("ubuntu2204", "21.08.5"), ("ubuntu2404", "23.11.4")],
)
def test_slurm_smd_stand_ins_carry_schedmd_names_and_wrap_the_distribution_s_daemons(repo, os_name, release):
    www, builder = repo
    entries = stanzas(www / builder.SLURM_SMD_REPOS[os_name])
    names = {e["Package"] for e in entries}
    assert names == {"slurm-smd", "slurm-smd-client", "slurm-smd-slurmctld", "slurm-smd-slurmd", "slurm-smd-slurmdbd"}
    assert sorted({e["Version"] for e in entries}) == [f"{release}-1", f"{release}-2"]
    slurmd = next(e for e in entries if e["Package"] == "slurm-smd-slurmd" and e["Version"] == f"{release}-1")
    assert slurmd["Depends"] == f"slurm-smd (= {release}-1), slurmd (>= {release})"


@pytest.mark.parametrize(
    ("package", "version"),
    [
        ("nvidia-driver-570-open", "570.133.20-1"),
        ("nvidia-driver-570-open", "570.172.08-1"),
        ("nvidia-open-580", "580.65.06-1"),
        ("nvidia-open", "580.95.05-1"),
        ("cuda-drivers-580", "580.95.05-1"),
        ("nvidia-fabricmanager-570", "570.133.20-1"),
        ("libnvidia-nscq-580", "580.95.05-1"),
        ("cuda-toolkit-12-4", "12.4.1-1"),
        ("cuda-toolkit-12-8", "12.8.1-1"),
        ("libcudnn9-cuda-12", "9.10.2.21-1"),
        ("cudnn9-cuda-12", "9.10.2.21-1"),
        ("libcudnn8", "8.9.7.29-1+cuda12.2"),
        ("cuda-toolkit-13-0", "13.0.2-1"),
        ("cuda-compat-13-0", "580.95.05-1"),
        ("libnccl2", "2.21.5-1+cuda12.4"),
        ("libnccl-dev", "2.26.5-1+cuda12.8"),
        ("datacenter-gpu-manager-4-cuda12", "1:4.2.3-1"),
        ("datacenter-gpu-manager-4-cuda13", "1:4.4.1-1"),
        ("datacenter-gpu-manager-exporter", "4.5.2-1"),
        ("nvidia-container-toolkit", "1.17.8-1"),
        ("libnvidia-container1", "1.18.0-1"),
        ("doca-ofed", "2.9.1-018000-24.10-debian12"),
        ("mlnx-ofed-kernel-utils", "24.10.OFED.24.10.2.1.8.1-1"),
    ],
)
def test_real_names_and_versions(repo, package, version):
    www, builder = repo
    entries = [e for name in builder.REPOS for e in stanzas(www / name)]
    assert {"Package": package, "Version": version}.items() <= next(
        (e for e in entries if e["Package"] == package and e["Version"] == version), {}
    ).items()


def test_doca_has_a_folder_per_os_with_the_os_in_its_versions(repo):
    """DOCA-Host publishes one folder per OS, and its package versions end in that OS
    (doca-host_2.9.1-018000-24.10-ubuntu2404_amd64.deb)."""
    www = repo[0]
    for os_name in ("debian12", "ubuntu22.04", "ubuntu24.04"):
        entries = {e["Package"]: e for e in stanzas(www / f"doca/2.9.1/{os_name}/x86_64")}
        version = "2.9.1-018000-24.10-" + os_name.replace(".", "")
        assert entries["doca-ofed"]["Version"] == version
        assert f"doca-ofed-userspace (= {version})" in entries["doca-ofed"]["Depends"]
        assert entries["mlnx-ofed-kernel-utils"]["Version"] == "24.10.OFED.24.10.2.1.8.1-1"


def _gpgv(keyring, folder):
    return subprocess.run(
        ["gpgv", "--keyring", str(keyring), str(folder / "InRelease")], capture_output=True, text=True, check=False
    )


@pytest.mark.skipif(shutil.which("gpgv") is None, reason="gpgv verifies the signatures")
def test_signature_verifies_with_the_archive_key_only(repo):
    www, builder = repo
    for name in builder.REPOS:
        right, wrong = "archive", "wrong"
        if name == builder.WRONG_SIGNED_REPO:
            right, wrong = wrong, right
        assert _gpgv(www / f"keys/gpusim-{right}-keyring.gpg", www / name).returncode == 0
        assert _gpgv(www / f"keys/gpusim-{wrong}-keyring.gpg", www / name).returncode != 0


def test_rebuild_is_reproducible(repo, tmp_path):
    www, builder = repo
    builder.build(tmp_path / "www", www.parent / "cache")
    folder = "compute/cuda/repos/debian12/x86_64"
    assert (tmp_path / "www" / folder / "Packages").read_bytes() == (www / folder / "Packages").read_bytes()


def test_hpcx_archive_has_hpcx_layout_and_a_matching_checksum_file(repo):
    www, builder = repo
    archive = www / builder.HPCX_PATH
    digest, _sep, filename = (www / f"{builder.HPCX_PATH}.sha256").read_text().partition("  ")
    assert digest == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert filename.strip() == archive.name
    with tarfile.open(archive, "r:bz2") as tar:
        names = set(tar.getnames())
        top = builder.HPCX_NAME
        for member in ("sharp/bin/sharp_am", "nccl_rdma_sharp_plugin/lib/libnccl-net.so", "sharp/lib"):
            assert f"{top}/{member}" in names
        assert tar.getmember(f"{top}/sharp/bin/sharp_am").mode == 0o755


def test_dcgm_exporter_binary_on_the_mirror_has_a_matching_checksum(repo):
    www, _builder = repo
    folder = www / "dcgm-exporter" / "v4.5.2"
    digest, _sep, filename = (folder / "dcgm-exporter.sha256").read_text().partition("  ")
    assert digest == hashlib.sha256((folder / "dcgm-exporter").read_bytes()).hexdigest()
    assert filename.strip() == "dcgm-exporter"
    assert "4.4.1-4.5.2" in (folder / "dcgm-exporter").read_text()


def test_hpcx_libraries_are_shared_objects_the_loader_cache_takes(tmp_path, repo_builder):
    """The stand-in HPC-X libraries are ELF with a SONAME: glibc's ldconfig caches them, so the nccl
    scenario can ask the loader where libnccl-net.so resolves."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for soname in ("libnccl-net.so", "libsharp_coll.so.5"):
        (lib / soname).write_bytes(repo_builder.elf_shared_object(soname))
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{lib}\n")
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    subprocess.run([ldconfig, "-f", str(conf), "-C", str(tmp_path / "cache")], check=True, capture_output=True)
    listed = subprocess.run(
        [ldconfig, "-p", "-C", str(tmp_path / "cache")], check=True, capture_output=True, text=True
    ).stdout
    assert f"libnccl-net.so (libc6,x86-64) => {lib}/libnccl-net.so" in listed
    assert f"libsharp_coll.so.5 (libc6,x86-64) => {lib}/libsharp_coll.so.5" in listed
