# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bundle.yml end to end on the demo inventory, its hosts declared (tests/bundle/declared.yml) as a
connected host that cannot reach them declares them: the manifest from the stand-in repository served
over HTTP, the fetch with every signature and checksum checked, a re-run that fetches nothing, and the
mirror check against the bundle served as a mirror, passing, then refusing a package taken out."""

from __future__ import annotations

import functools
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from chart_standin import chart_repository, derived_values, standin_registry

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    shutil.which("gpg") is None or shutil.which("gpgv") is None, reason="gpg and gpgv sign and check the repository"
)


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def serve():
    servers = []

    def start(folder):
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def playbook(tmp_path, *extra, declared=True):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        str(ROOT / "playbooks" / "bundle.yml"),
        "-i",
        str(ROOT / "inventories" / "demo"),
        *(["-i", str(ROOT / "tests" / "bundle" / "declared.yml")] if declared else []),
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        *extra,
    ]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)


def recap(stdout, host):
    line = next(line for line in stdout.splitlines() if line.startswith(host + " ") and "ok=" in line)
    return dict(part.split("=") for part in line.split(":", 1)[1].split())


@pytest.fixture(scope="module")
def made(tmp_path_factory, repo, serve):
    """The bundle of the demo inventory, made from the stand-in repository: (folder, mirrors file, run)."""
    www, _builder = repo
    upstream = serve(www)
    work = tmp_path_factory.mktemp("bundle")
    mirrors = work / "upstream.yml"
    mirrors.write_text(
        yaml.safe_dump(
            {
                "cuda_repository_url": f"{upstream}/compute/cuda/repos",
                "ofed_doca_mirror": f"{upstream}/doca",
                "container_toolkit_repository_url": f"{upstream}/libnvidia-container/stable/deb",
                "sharp_hpcx_mirror": f"{upstream}/hpcx",
                "sharp_hpcx_checksum": f"sha256:{upstream}/hpcx/v2.21/SHA256SUMS",
                "nccl_tests_url": f"{upstream}/nccl-tests/v2.16.8.tar.gz",
                "nccl_tests_checksum": f"sha256:{upstream}/nccl-tests/v2.16.8.tar.gz.sha256",
            }
        )
    )
    run = playbook(work, "-e", f"@{mirrors}", "-e", f"bundle_dir={work / 'bundle'}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return work / "bundle", mirrors, run, www


def test_the_manifest_lists_what_site_yml_would_install(made):
    folder, _mirrors, _run, _www = made
    doc = json.loads((folder / "manifest.json").read_text())
    assert doc["hosts"]["demo-head"]["roles"] == ["dcgm", "os_tuning", "slurm"]
    assert doc["hosts"]["demo-h100"]["platform"] == "debian12"
    by_variable = {r["variable"]: r for r in doc["repositories"]}
    assert set(by_variable) == {"cuda_repository_url", "ofed_doca_mirror", "container_toolkit_repository_url"}
    cuda = {p["package"]: p["version"] for p in by_variable["cuda_repository_url"]["packages"]}
    # The demo pins driver 580.95.05: Fabric Manager and NSCQ (the H100 node's NVSwitches) at the same.
    assert cuda["nvidia-open-580"] == cuda["nvidia-fabricmanager-580"] == cuda["libnvidia-nscq-580"] == "580.95.05-1"
    assert cuda["libnccl2"] == "2.26.5-1+cuda12.8" and cuda["datacenter-gpu-manager-4-core"] == "1:4.4.1-1"
    assert by_variable["ofed_doca_mirror"]["key"]["fingerprints"] == ["DDD2F499504D61685FB2FDC94B9F49872D40B3F2"]
    files = {f["variable"]: f for f in doc["files"]}
    assert files["sharp_hpcx_mirror"]["hosts"] == ["demo-h100"]
    distribution = {p["name"] for slot in doc["os_packages"] for p in slot["packages"]}
    assert {"slurmctld", "slurmd", "munge", "prometheus"} <= distribution


def test_the_fetch_checked_and_packed_every_file(made):
    folder, _mirrors, run, www = made
    doc = json.loads((folder / "manifest.json").read_text())
    for repo in doc["repositories"]:
        for package in repo["packages"]:
            data = (folder / package["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == package["sha256"]
    hpcx = next(f for f in doc["files"] if f["variable"] == "sharp_hpcx_mirror")
    served = www / "hpcx" / "v2.21" / hpcx["url"].rsplit("/", 1)[1]
    assert hashlib.sha256(served.read_bytes()).hexdigest() == hpcx["sha256"]
    with tarfile.open(str(folder) + ".tar") as tar:
        names = set(tar.getnames())
    assert {"manifest.json", "mirrors.yml", hpcx["path"]} <= names
    assert all(p["path"] in names for r in doc["repositories"] for p in r["packages"])
    assert "Fetched" in run.stdout


def test_a_rerun_fetches_nothing_and_changes_nothing(made):
    folder, mirrors, _run, _www = made
    again = playbook(folder.parent, "-e", f"@{mirrors}", "-e", f"bundle_dir={folder}")
    assert again.returncode == 0, again.stdout[-3000:]
    # The manifest's play runs once, delegated: its results count on the run's first host.
    for host in ("demo-head", "demo-h100", "demo-l40s"):
        assert recap(again.stdout, host)["changed"] == "0", host
    assert "Fetched 0 files" in again.stdout


def test_the_bundle_served_as_a_mirror_passes_the_check_and_a_missing_package_is_named(made, serve):
    folder, _mirrors, _run, _www = made
    served = folder.parent / "served"
    shutil.copytree(folder, served)
    url = serve(served)
    site = folder.parent / "site-mirrors.yml"
    site.write_text((folder / "mirrors.yml").read_text().replace("{{ gpuops_bundle_url }}", url))
    check = playbook(
        folder.parent,
        "-e",
        f"@{site}",
        "-e",
        "bundle_check=true",
        "-e",
        f"bundle_check_manifest={folder}/manifest.json",
    )
    assert check.returncode == 0, check.stdout[-3000:]
    assert "The mirrors hold every package and file" in check.stdout
    doc = json.loads((folder / "manifest.json").read_text())
    nccl = next(p for r in doc["repositories"] for p in r["packages"] if p["package"] == "libnccl2")
    (served / nccl["path"]).unlink()
    refused = playbook(folder.parent, "-e", f"@{site}", "-e", "bundle_check=true")
    assert refused.returncode != 0
    assert "The mirrors lack what this run installs: 1 problem(s)." in refused.stdout
    assert "libnccl2 2.26.5-1+cuda12.8 is in the index, and its file" in refused.stdout
    assert "cuda_repository_url (" + url in refused.stdout


def test_a_host_neither_reached_nor_declared_is_named_with_the_fix(tmp_path):
    run = playbook(tmp_path, "-e", "site_hosts=demo-head", "-e", f"bundle_dir={tmp_path / 'bundle'}", declared=False)
    assert run.returncode != 0
    assert "demo-head: not reached from here, and the inventory declares no bundle_hardware for it." in (
        run.stdout + run.stderr
    )
    assert not (tmp_path / "bundle").exists()


def test_a_limited_run_lists_its_own_hosts_only(made):
    folder, mirrors, _run, _www = made
    limited = folder.parent / "limited"
    run = playbook(
        folder.parent,
        "-e",
        f"@{mirrors}",
        "-e",
        f"bundle_dir={limited}",
        "-e",
        "bundle_fetch=false",
        "--limit",
        "demo-l40s",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    doc = json.loads((limited / "manifest.json").read_text())
    assert list(doc["hosts"]) == ["demo-l40s"]
    # No NVSwitch on the L40S node: no Fabric Manager; and no HPC-X (sharp_enabled is demo-h100's).
    packages = {p["package"] for r in doc["repositories"] for p in r["packages"]}
    assert "nvidia-fabricmanager-580" not in packages and "libnccl2" in packages
    assert [f["variable"] for f in doc["files"]] == ["nccl_tests_url"]


# The k8s_node role's handlers call community.general, which the core matrix's environments (ansible-core
# alone) do not carry; make unit's (the ansible package) does.
COMMUNITY_GENERAL = any((Path(p) / "ansible_collections" / "community" / "general").is_dir() for p in sys.path)


@pytest.mark.skipif(
    not (shutil.which("skopeo") and shutil.which("docker-registry")),
    reason="skopeo and docker-registry (Debian packages) copy and serve the stand-in images",
)
@pytest.mark.skipif(not COMMUNITY_GENERAL, reason="the k8s_node role's handlers need community.general")
def test_a_kubernetes_node_brings_the_operator_chart_and_the_images_its_values_deploy(made, tmp_path):
    """demo-l40s as a Kubernetes GPU node: the chart at its pinned version from the chart repository,
    and the images the derived values deploy (the host runs the driver, toolkit and dcgm-exporter, so
    the chart's own are off), pinned by the stand-in registry's digests and copied into the bundle."""
    _folder, mirrors, _run, www = made
    with standin_registry(tmp_path / "registry", derived_values()) as registry:
        charts = chart_repository(tmp_path / "helm" / "nvidia", registry=registry)
        extra = tmp_path / "k8s.yml"
        extra.write_text(
            yaml.safe_dump(
                {
                    "all": {
                        "children": {
                            "k8s_nodes": {
                                "hosts": {"demo-l40s": None},
                                "vars": {
                                    "k8s_node_repository_url": f"file://{www}",
                                    "k8s_node_key_fingerprint": ["DDD2F499504D61685FB2FDC94B9F49872D40B3F2"],
                                    "k8s_node_control_plane": "demo-head",
                                    "k8s_platform_helm_repository": f"file://{charts}",
                                },
                            }
                        }
                    }
                }
            )
        )
        dest = tmp_path / "bundle"
        args = ["-i", str(extra), "-e", f"@{mirrors}", "-e", f"bundle_dir={dest}"]
        args += ["-e", "bundle_registry_tls_verify=false", "--limit", "demo-l40s"]
        run = playbook(tmp_path, *args)
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        doc = json.loads((dest / "manifest.json").read_text())
        assert "k8s_node" in doc["hosts"]["demo-l40s"]["roles"]
        assert "k8s_node_repository_url" in {r["variable"] for r in doc["repositories"]}
        (entry,) = doc["charts"]
        assert (entry["variable"], entry["chart"], entry["version"], entry["hosts"]) == (
            "k8s_platform_helm_repository",
            "gpu-operator",
            "v26.7.0",
            ["demo-l40s"],
        )
        assert [i["ref"][len(registry) + 1 :] for i in entry["images"]] == [
            "nfd/node-feature-discovery:v0.19.0",
            "nvidia/gpu-operator:v26.7.0",
            "nvidia/k8s-device-plugin:v0.20.0",
        ]
        with tarfile.open(str(dest) + ".tar") as tar:
            names = set(tar.getnames())
        assert {"images/index.json", entry["path"], entry["index_path"]} <= names
        index = json.loads((dest / "images" / "index.json").read_text())
        held = {m["annotations"]["org.opencontainers.image.ref.name"]: m["digest"] for m in index["manifests"]}
        assert held == {i["ref"]: i["digest"] for i in entry["images"]}
        chart_mirrors = yaml.safe_load((dest / "mirrors.yml").read_text())
        assert chart_mirrors["k8s_platform_helm_repository"] == "{{ gpuops_bundle_url }}/local" + str(charts)
        assert chart_mirrors["k8s_platform_image_values"]["gfd"] == {
            "repository": "{{ gpuops_bundle_registry }}/" + registry + "/nvidia"
        }
        again = playbook(tmp_path, *args)
        assert again.returncode == 0 and recap(again.stdout, "demo-l40s")["changed"] == "0", again.stdout[-3000:]


NOBLE = ROOT / "tests" / "unit" / "fixtures" / "ubuntu_archive" / "noble-apt-cache-show.txt"


def declared_ubuntu_manifest(made, tmp_path, hardware, arch="amd64"):
    """bundle.yml's manifest for demo-l40s declared as Ubuntu 24.04 with ``hardware`` on Canonical's
    driver, its archive a folder of noble's Packages (the capture's stanzas, as ``arch``)."""
    _folder, mirrors, _run, _www = made
    archive = tmp_path / "ubuntu"
    stanzas = NOBLE.read_text().replace("Architecture: amd64", f"Architecture: {arch}")
    stanzas = stanzas.replace("_amd64.deb", f"_{arch}.deb").encode()
    for pocket in ("noble", "noble-updates", "noble-security"):
        for component in ("restricted", "multiverse"):
            folder = archive / "dists" / pocket / component / f"binary-{arch}"
            folder.mkdir(parents=True)
            data = stanzas if (pocket, component) == ("noble-updates", "restricted") else b""
            (folder / "Packages.xz").write_bytes(lzma.compress(data))
    extra = tmp_path / "ubuntu.yml"
    host = {
        "bundle_hardware": {
            "distribution": "Ubuntu",
            "distribution_version": "24.04",
            "kernel": "6.8.0-149-generic",
            **hardware,
        },
        "nvidia_driver_source": "ubuntu",
        "nvidia_driver_version": "",
        "bundle_ubuntu_mirror": f"file://{archive}",
    }
    extra.write_text(yaml.safe_dump({"all": {"hosts": {"demo-l40s": host}}}))
    dest = tmp_path / "bundle"
    args = ["-i", str(extra), "-e", f"@{mirrors}", "-e", f"bundle_dir={dest}", "-e", "bundle_fetch=false"]
    run = playbook(tmp_path, *args, "--limit", "demo-l40s")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    doc = json.loads((dest / "manifest.json").read_text())
    assert doc["hosts"]["demo-l40s"]["platform"] == "ubuntu2404"
    (slot,) = [s for s in doc["os_packages"] if s["platform"].startswith("ubuntu2404")]
    assert slot["platform"] == f"ubuntu2404/{arch}"
    # The driver is Canonical's: none of NVIDIA's driver packages from the CUDA repository.
    cuda = {p["package"] for r in doc["repositories"] if r["variable"] == "cuda_repository_url" for p in r["packages"]}
    assert not any(name.startswith("nvidia-open") for name in cuda)
    return doc, {p["name"] for p in slot["packages"]}, cuda


def test_a_declared_ubuntu_host_takes_canonical_s_driver_from_the_archive_of_its_release(made, tmp_path):
    """demo-l40s declared as Ubuntu 24.04 on Canonical's driver (nvidia_driver_source: ubuntu): its
    driver packages are read from the Ubuntu archive's Packages of noble (bundle_ubuntu_mirror, here
    the stanzas of tests/unit/fixtures/ubuntu_archive), not from the connected host's own Debian index,
    and listed at their versions among what the OS mirror must hold."""
    hardware = {"architecture": "x86_64", "gpus": {"10de:26b9": 4}, "hcas": {"15b3:101d": 2}}
    _doc, names, _cuda = declared_ubuntu_manifest(made, tmp_path, hardware)
    assert {
        "nvidia-headless-no-dkms-580-server-open=580.178.04-0ubuntu0.24.04.1",
        "nvidia-utils-580-server=580.178.04-0ubuntu0.24.04.1",
        "linux-modules-nvidia-580-server-open-6.8.0-149-generic=6.8.0-149.149",
    } <= names


def test_a_declared_gb200_tray_takes_arm64_packages_from_the_ports_archive(made, tmp_path):
    """A GB200 NVL72 tray declared as Ubuntu 24.04 on Grace (aarch64) with Canonical's driver: its
    driver packages are read from the ports archive's binary-arm64 Packages of noble and listed for
    ubuntu2404/arm64 with IMEX at the driver's version, and NVIDIA's repositories are read in their
    arm64 layouts (the CUDA repository's sbsa, DOCA-Host's arm64-sbsa, the toolkit's arm64: the
    stand-in repository has each). The ports archive cannot be reached here: its index is the noble
    capture's stanzas as arm64, the same versions Canonical builds for both architectures."""
    hardware = {"architecture": "aarch64", "gpus": {"10de:2941": 4}, "hcas": {"15b3:1021": 4}}
    doc, names, cuda = declared_ubuntu_manifest(made, tmp_path, hardware, arch="arm64")
    assert "imex" in doc["hosts"]["demo-l40s"]["roles"]
    assert {
        "nvidia-headless-no-dkms-580-server-open=580.178.04-0ubuntu0.24.04.1",
        "linux-modules-nvidia-580-server-open-6.8.0-149-generic=6.8.0-149.149",
        "nvidia-imex-580=580.178.04-*",
    } <= names, names
    layouts = {r["variable"]: r["url"].rstrip("/").rsplit("/", 2)[-2:] for r in doc["repositories"]}
    assert layouts == {
        "cuda_repository_url": ["ubuntu2404", "sbsa"],
        "ofed_doca_mirror": ["ubuntu24.04", "arm64-sbsa"],
        "container_toolkit_repository_url": ["deb", "arm64"],
    }
    assert "datacenter-gpu-manager-4-core" in cuda
