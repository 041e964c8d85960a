# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The air-gap manifest's decisions: paths in the bundle, what each repository gives, files and
their checksums, the mirror variables, declared hosts, and a signed Release read and verified."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import bundle
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify
from conftest import fixtures

SHA = "cd" * 32
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"


def stanza(name, version, depends=""):
    lines = [
        f"Package: {name}",
        f"Version: {version}",
        "Architecture: amd64",
        f"Filename: ./{name}_{version}_amd64.deb",
        "Size: 1000",
        f"SHA256: {SHA}",
    ]
    if depends:
        lines.append(f"Depends: {depends}")
    return "\n".join(lines) + "\n"


CUDA_INDEX = "\n".join(
    [
        stanza("nvidia-open-580", "580.95.05-0ubuntu1", "nvidia-driver-580-open (= 580.95.05-0ubuntu1)"),
        stanza("nvidia-open-580", "580.82.07-0ubuntu1", "nvidia-driver-580-open (= 580.82.07-0ubuntu1)"),
        stanza("nvidia-driver-580-open", "580.95.05-0ubuntu1", "libc6 (>= 2.34), dkms"),
        stanza("nvidia-driver-580-open", "580.82.07-0ubuntu1", "libc6 (>= 2.34), dkms"),
        stanza("nvidia-fabricmanager-580", "580.95.05-1"),
        stanza("nvidia-fabricmanager-580", "580.82.07-1"),
        stanza("libnccl2", "2.26.5-1+cuda12.8"),
    ]
)


def apt_request(packages, role="nvidia_driver", repository=CUDA):
    return {
        "kind": "apt",
        "role": role,
        "variable": "cuda_repository_url",
        "base": "https://developer.download.nvidia.com/compute/cuda/repos",
        "repository": repository,
        "key_url": repository + "3bf863cc.pub",
        "key_fingerprint": ["EB693B3035CD5710E231E123A4B469963BF863CC"],
        "fingerprint_variable": "cuda_repository_key_fingerprint",
        "packages": packages,
    }


def hosts(*requests, platform="ubuntu2404"):
    return {"gpu01": {"platform": platform, "arch": "amd64", "requests": list(requests)}}


def read(mapping):
    def reader(url):
        if url not in mapping:
            raise bundle.BundleError(f"{url} answered 404 Not Found")
        return mapping[url]

    return reader


# --- paths --------------------------------------------------------------------------------------------------


def test_a_url_keeps_its_upstream_path_under_its_host():
    assert bundle.mirror_path(CUDA) == "developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64"
    assert bundle.mirror_path("http://gpusim-repo:8080/doca/") == "gpusim-repo_8080/doca"


@pytest.mark.parametrize("path", ["../../etc/passwd", "pool/../../x.deb", "pool/a b.deb", "pool/\x00.deb"])
def test_a_path_that_climbs_out_or_is_odd_is_refused(path):
    with pytest.raises(bundle.BundleError, match="a bundle does not take"):
        bundle.safe_join("repo", path, "Packages")


def test_a_url_without_http_is_refused_naming_the_variable():
    with pytest.raises(bundle.BundleError, match=r"cuda_repository_url: 'ftp://x/' is not an http"):
        bundle.mirror_path("ftp://x/", "cuda_repository_url")


def test_an_index_whose_file_name_climbs_out_is_a_problem_not_a_write():
    evil = stanza("libnccl2", "2.26.5-1+cuda12.8").replace("./libnccl2", "../../../root/.ssh/libnccl2")
    repos, problems = bundle.plan(hosts(apt_request(["libnccl2"])), read({CUDA + "Packages": evil}))
    assert repos[0]["packages"] == []
    assert any("a bundle does not take" in p for p in problems)


# --- what a repository gives --------------------------------------------------------------------------------


def test_the_driver_pin_takes_its_version_and_fabric_manager_follows_it():
    request = apt_request(
        [
            "nvidia-open-580=580.95.05-*",
            {"name": "nvidia-fabricmanager-580", "version": None, "same_version_as": "nvidia-open-580"},
            {"name": "nvidia-driver-pinning-580", "version": "580.95.05-*", "optional": True},
        ]
    )
    repos, problems = bundle.plan(hosts(request), read({CUDA + "Packages": CUDA_INDEX}))
    assert problems == []
    (repo,) = repos
    taken = {p["package"]: p["version"] for p in repo["packages"]}
    # Fabric Manager at the driver's upstream version with its own revision; the pinning package is
    # not in this repository, so it is left out rather than refused.
    assert taken == {
        "nvidia-open-580": "580.95.05-0ubuntu1",
        "nvidia-driver-580-open": "580.95.05-0ubuntu1",
        "nvidia-fabricmanager-580": "580.95.05-1",
    }
    assert repo["from_os_mirror"] == ["dkms", "libc6 (>= 2.34)"]
    assert repo["path"] == "developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64"
    assert repo["packages"][0]["path"].startswith(repo["path"] + "/nvidia-")


def test_a_version_the_repository_lacks_is_a_problem_naming_the_variable_and_the_versions_there():
    repos, problems = bundle.plan(
        hosts(apt_request(["nvidia-open-580=580.65.06-*"])), read({CUDA + "Packages": CUDA_INDEX})
    )
    assert repos[0]["packages"] == []
    (line,) = problems
    assert line.startswith("cuda_repository_url (" + CUDA + ")")
    assert "nvidia-open-580=580.65.06-*: not in the repository" in line
    assert "580.95.05-0ubuntu1, 580.82.07-0ubuntu1" in line


def test_an_html_error_page_is_a_problem_naming_the_index():
    page = "<!DOCTYPE html>\n<html><body>502 Bad Gateway</body></html>\n"
    repos, problems = bundle.plan(hosts(apt_request(["libnccl2"])), read({CUDA + "Packages": page}))
    assert repos == []
    assert "the Packages index cannot be read" in problems[0]
    assert "<!DOCTYPE html>" in problems[0]


def test_two_hosts_share_one_repository_and_one_read_of_its_index():
    reads = []

    def reader(url):
        reads.append(url)
        return CUDA_INDEX

    two = hosts(apt_request(["libnccl2"], role="nccl"))
    two["gpu02"] = {"platform": "ubuntu2404", "arch": "amd64", "requests": [apt_request(["nvidia-open-580"])]}
    repos, problems = bundle.plan(two, reader)
    assert problems == [] and reads == [CUDA + "Packages"]
    assert repos[0]["hosts"] == ["gpu01", "gpu02"] and repos[0]["roles"] == ["nccl", "nvidia_driver"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"kind": "tarball", "role": "x"}, "kind must be one of apt, file, os"),
        (dict(apt_request(["x"]), key_url=""), "the request has no key_url"),
        (
            {
                "kind": "file",
                "role": "sharp",
                "variable": "sharp_hpcx_mirror",
                "url": "https://x/hpcx.tbz",
                "checksum": "unverified",
                "checksum_variable": "sharp_hpcx_checksum",
            },
            "sharp_hpcx_checksum is 'unverified'; write sha256:DIGEST or sha256:URL",
        ),
        (apt_request([{"version": "1"}]), "a package without a name"),
    ],
)
def test_a_malformed_request_is_refused_naming_it(request_, message):
    with pytest.raises(bundle.BundleError, match=message.replace("*", r"\*").replace("(", r"\(")):
        bundle.check_requests(hosts(request_))


# --- files, checksums and the mirror variables ---------------------------------------------------------------

HPCX = "https://content.mellanox.com/hpc/hpc-x/v2.21/hpcx-v2.21-gcc-doca_ofed-ubuntu24.04-cuda12-x86_64.tbz"


def file_request(checksum):
    return {
        "kind": "file",
        "role": "sharp",
        "variable": "sharp_hpcx_mirror",
        "base": "https://content.mellanox.com/hpc/hpc-x",
        "url": HPCX,
        "checksum": checksum,
        "checksum_variable": "sharp_hpcx_checksum",
    }


def test_a_checksum_list_gives_the_files_digest_by_its_name():
    sums = f"{'11' * 32}  hpcx-v2.21-gcc-doca_ofed-debian12-cuda12-x86_64.tbz\n{SHA}  {HPCX.rsplit('/', 1)[1]}\n"
    listing = "https://content.mellanox.com/hpc/hpc-x/v2.21/SHA256SUMS"
    files, problems = bundle.files(hosts(file_request("sha256:" + listing)), read({listing: sums}))
    assert problems == []
    assert files[0]["sha256"] == SHA
    assert files[0]["checksum_path"] == "content.mellanox.com/hpc/hpc-x/v2.21/SHA256SUMS"


def test_a_checksum_list_without_the_file_is_a_problem_naming_the_variable():
    listing = "https://content.mellanox.com/hpc/hpc-x/v2.21/SHA256SUMS"
    files, problems = bundle.files(hosts(file_request("sha256:" + listing)), read({listing: f"{SHA}  other.tbz\n"}))
    assert files == []
    assert problems[0].startswith("sharp_hpcx_checksum (" + HPCX + ")")
    assert "no sha256 line for hpcx-v2.21" in problems[0]


def test_mirrors_point_each_variable_at_the_bundle_server():
    repos, _problems = bundle.plan(hosts(apt_request(["libnccl2"])), read({CUDA + "Packages": CUDA_INDEX}))
    files, _problems = bundle.files(hosts(file_request("sha256:" + SHA)), read({}))
    values, conflicts = bundle.mirror_variables(repos, files)
    assert conflicts == []
    assert values == {
        "cuda_repository_url": "{{ gpuops_bundle_url }}/developer.download.nvidia.com/compute/cuda/repos",
        "sharp_hpcx_mirror": "{{ gpuops_bundle_url }}/content.mellanox.com/hpc/hpc-x",
        "sharp_hpcx_checksum": "sha256:" + SHA,
    }
    doc = bundle.manifest(hosts(apt_request(["libnccl2"])), repos, files, "1.0.0")
    text = bundle.mirrors_yaml(doc)
    assert 'cuda_repository_url: "{{ gpuops_bundle_url }}/developer.download.nvidia.com/compute/cuda/repos"' in text
    assert "| libnccl2 | 2.26.5-1+cuda12.8 | amd64 | 1000 |" in bundle.markdown(doc)
    assert doc["totals"] == {
        "repositories": 1,
        "packages": 1,
        "package_bytes": 1000,
        "files": 1,
        "keys": 1,
        "charts": 0,
        "images": 0,
    }


def test_one_variable_with_two_values_is_a_conflict_not_a_silent_choice():
    one = dict(apt_request(["libnccl2"]), base="https://a.example/repos")
    other = dict(apt_request(["libnccl2"], repository=CUDA.replace("ubuntu2404", "debian12")))
    other["base"] = "https://b.example/repos"
    index = {CUDA + "Packages": CUDA_INDEX, CUDA.replace("ubuntu2404", "debian12") + "Packages": CUDA_INDEX}
    repos, _problems = bundle.plan(hosts(one, other), read(index))
    _values, conflicts = bundle.mirror_variables(repos, [])
    # Repositories in URL order: debian12's (b.example) first.
    assert conflicts == [
        "cuda_repository_url: {{ gpuops_bundle_url }}/b.example/repos and {{ gpuops_bundle_url }}/a.example/repos "
        "(set it per host or group)"
    ]


# --- hosts the connected host does not reach -------------------------------------------------------------------


def test_declared_hardware_gives_the_facts_gpu_facts_would_read():
    hardware = {
        "distribution": "Ubuntu",
        "distribution_version": "24.04",
        "architecture": "x86_64",
        "kernel": "6.8.0-60-generic",
        "gpus": {"10de:2330": 8},
        "nvswitches": 4,
        "hcas": {"15b3:1021": 8},
    }
    platform = bundle.declared_platform(hardware)
    assert platform["distribution_major_version"] == "24" and platform["os_family"] == "Debian"
    facts = build_gpu_facts(classify(bundle.declared_devices(hardware)))
    assert facts["count"] == 8 and facts["slug"] == "h100" and facts["compute_capability"] == "9.0"
    assert facts["nvswitch_count"] == 4 and len(facts["hca_pci"]) == 8
    assert facts["driver_version"] is None
    # Canonical's driver packages of the declared release: restricted and multiverse, in its three pockets.
    indexes = bundle.ubuntu_indexes(platform)
    assert indexes[0] == "http://archive.ubuntu.com/ubuntu/dists/noble/restricted/binary-amd64/Packages.xz"
    assert indexes[-1] == "http://archive.ubuntu.com/ubuntu/dists/noble-security/multiverse/binary-amd64/Packages.xz"
    assert len(indexes) == 6
    arm = bundle.declared_platform(dict(hardware, architecture="aarch64", distribution_version="22.04"))
    assert bundle.ubuntu_indexes(arm, "http://mirror.site/ports/")[2] == (
        "http://mirror.site/ports/dists/jammy-updates/restricted/binary-arm64/Packages.xz"
    )
    debian = bundle.declared_platform(dict(hardware, distribution="Debian", distribution_version="13"))
    assert debian["distribution_release"] == "trixie" and bundle.ubuntu_indexes(debian) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"distribution_version": "20.04"}, "Ubuntu 20.04 is not supported; declare one of Debian 12"),
        ({"gpus": {"1002:740f": 8}}, r"bundle_hardware.gpus: '1002:740f' is not a PCI device ID of vendor 10de"),
        ({"gpus": {"2330": 0}}, "the count of 2330 must be a whole number above 0"),
        ({"nvswitches": -1}, "a count of NVSwitches"),
        ({"kernel": ""}, "bundle_hardware.kernel"),
        ({"gpu": "h100"}, "bundle_hardware: gpu not known"),
    ],
)
def test_declared_hardware_that_cannot_be_resolved_is_refused_naming_the_key(change, message):
    hardware = {"distribution": "Ubuntu", "distribution_version": "24.04", "kernel": "6.8.0-60-generic"}
    hardware.update(change)
    with pytest.raises(bundle.BundleError, match=message):
        bundle.declared_platform(hardware)
        bundle.declared_devices(hardware)


# --- a signed Release --------------------------------------------------------------------------------------------

INRELEASE = fixtures("release")[0]


def test_a_real_inrelease_gives_the_sha256_of_each_index():
    sums = bundle.release_checksums(bundle.release_text(INRELEASE.read_text()))
    digest, size = sums["main/binary-amd64/Packages.xz"]
    assert len(digest) == 64 and size > 0
    assert len(sums) > 100


def test_a_release_without_sha256_or_with_a_bad_line_names_it():
    with pytest.raises(ParseError, match="no SHA256 section"):
        bundle.release_checksums("Origin: x\nMD5Sum:\n 00 1 Packages\n")
    with pytest.raises(ParseError, match=r"not 'SHA256 SIZE NAME'.*line 3"):
        bundle.release_checksums(f"Origin: x\nSHA256:\n {SHA} Packages\n")
    with pytest.raises(ParseError, match="without its signature block"):
        bundle.release_text("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: x\n")


KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


@pytest.mark.skipif(not shutil.which("gpgv") or not KEYRING.exists(), reason="needs gpgv and Debian's archive keyring")
def test_gpgv_takes_the_real_index_with_its_key_and_refuses_it_changed(tmp_path):
    """The check bundle_fetch makes, with the real gpgv: Debian's signed index verifies against its
    archive key, and one changed byte in the signed text does not."""
    good = tmp_path / "InRelease"
    good.write_bytes(INRELEASE.read_bytes())
    argv = ["gpgv", "--homedir", str(tmp_path), "--keyring", str(KEYRING)]
    assert subprocess.run([*argv, str(good)], capture_output=True, check=False).returncode == 0
    bad = tmp_path / "Changed"
    bad.write_bytes(INRELEASE.read_bytes().replace(b"Origin: Debian", b"Origin: DebiaN", 1))
    assert subprocess.run([*argv, str(bad)], capture_output=True, check=False).returncode != 0


EVIL = f"SHA256:\n {SHA} 123 main/binary-amd64/Packages.xz\n\n"


@pytest.mark.parametrize(
    ("crafted", "message"),
    [
        (lambda real: EVIL + real, "does not begin with the clear-sign header"),
        (lambda real: real + "\n" + EVIL, "text after its signature block"),
        (lambda real: real.replace("Hash: SHA256\n", "Hash: SHA256\nComment: x\n", 1), "only Hash: is allowed"),
    ],
)
def test_an_inrelease_with_text_outside_its_signed_block_is_refused(crafted, message):
    """gpgv says "Good signature" for a genuine signed block inside other text; the checksums of that
    text must never be read. apt refuses such a file; so does the bundle."""
    real = INRELEASE.read_text()
    with pytest.raises(ParseError, match=message):
        bundle.release_text(crafted(real), clear_signed=True)
    # The genuine file is still read, and a detached-signature Release is taken whole.
    assert bundle.release_checksums(bundle.release_text(real, clear_signed=True))
    assert bundle.release_text("Origin: x\n") == "Origin: x\n"


@pytest.mark.skipif(not shutil.which("gpgv") or not KEYRING.exists(), reason="needs gpgv and Debian's archive keyring")
def test_gpgv_says_good_for_text_before_a_signed_block_which_is_why_it_is_refused(tmp_path):
    crafted = tmp_path / "InRelease"
    crafted.write_text(EVIL + INRELEASE.read_text())
    argv = ["gpgv", "--homedir", str(tmp_path), "--keyring", str(KEYRING), str(crafted)]
    assert subprocess.run(argv, capture_output=True, check=False).returncode == 0
    with pytest.raises(ParseError):
        bundle.release_text(crafted.read_text(), clear_signed=True)
