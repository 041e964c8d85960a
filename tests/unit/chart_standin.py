# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in of the GPU Operator's chart package v26.7.0 for the bundle's tests: the upstream
values.yaml (tests/unit/fixtures/upstream) and a node-feature-discovery subchart packaged inside, as
helm package lays them out; and a chart repository folder with its index.yaml."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import socket
import subprocess
import tarfile
import time
import urllib.request

import yaml
from ansible_collections.gpuops.cluster.plugins.module_utils import chart, k8s
from conftest import FIXTURES

VALUES = (FIXTURES / "upstream" / "gpu-operator-v26.7.0-values.yaml").read_text()
NFD_VALUES = 'image:\n  repository: registry.k8s.io/nfd/node-feature-discovery\n  tag: ""\n'


def package(files):
    """A chart package: a gzip'd tar of ``{path: text or bytes}``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def operator_package(values=VALUES, registry=None):
    """The GPU Operator chart v26.7.0 as packaged: its values.yaml (upstream, byte for byte unless
    ``registry`` replaces the registries) and its node-feature-discovery subchart, a package inside."""
    nfd_values = NFD_VALUES
    if registry:
        values = values.replace("nvcr.io/", f"{registry}/")
        nfd_values = nfd_values.replace("registry.k8s.io/", f"{registry}/")
    nfd = package(
        {
            "node-feature-discovery/Chart.yaml": "apiVersion: v2\nname: node-feature-discovery\nversion: 0.19.0\n"
            "appVersion: v0.19.0\n",
            "node-feature-discovery/values.yaml": nfd_values,
        }
    )
    return package(
        {
            "gpu-operator/Chart.yaml": "apiVersion: v2\nname: gpu-operator\nversion: v26.7.0\nappVersion: v26.7.0\n"
            "dependencies:\n- name: node-feature-discovery\n  version: 0.19.0\n  condition: nfd.enabled\n",
            "gpu-operator/values.yaml": values,
            "gpu-operator/charts/node-feature-discovery-0.19.0.tgz": nfd,
        }
    )


def chart_repository(folder, registry=None):
    """``folder`` as a chart repository holding the operator's chart (index.yaml, charts/*.tgz)."""
    (folder / "charts").mkdir(parents=True, exist_ok=True)
    data = operator_package(registry=registry)
    (folder / "charts" / "gpu-operator-v26.7.0.tgz").write_bytes(data)
    entry = {
        "name": "gpu-operator",
        "version": "v26.7.0",
        "urls": ["charts/gpu-operator-v26.7.0.tgz"],
        "digest": hashlib.sha256(data).hexdigest(),
    }
    (folder / "index.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "entries": {"gpu-operator": [entry]}}))
    return folder


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _oci_image(folder, ref, content):
    """A one-layer OCI image layout holding ``content``, under ``ref`` (what skopeo then pushes)."""
    blobs = folder / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)

    def blob(data, media):
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media, "digest": f"sha256:{digest}", "size": len(data)}

    layer = blob(package({"standin": content}), "application/vnd.oci.image.layer.v1.tar+gzip")
    config = blob(
        json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode(),
        "application/vnd.oci.image.config.v1+json",
    )
    manifest = blob(
        json.dumps({"schemaVersion": 2, "config": config, "layers": [layer]}).encode(),
        "application/vnd.oci.image.manifest.v1+json",
    )
    manifest["annotations"] = {"org.opencontainers.image.ref.name": ref}
    (folder / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (folder / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))


@contextlib.contextmanager
def standin_registry(base, values):
    """Debian's docker-registry on a free port of 127.0.0.1 (plain HTTP), holding a one-layer stand-in
    of each image the operator's chart deploys with ``values``, pushed by the real skopeo; yields
    its address, which the chart's repositories then name instead of nvcr.io and registry.k8s.io."""
    address = f"127.0.0.1:{_free_port()}"
    base.mkdir(parents=True, exist_ok=True)
    config = base / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "version": 0.1,
                "log": {"level": "error"},
                "storage": {"filesystem": {"rootdirectory": str(base / "data")}},
                "http": {"addr": address},
            }
        )
    )
    server = subprocess.Popen(
        ["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _attempt in range(100):
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        parsed = chart.read_chart(operator_package(registry=address), "standin")
        for item in chart.images(parsed, values, "standin"):
            name = item["ref"][len(address) + 1 :]
            layout = base / "layouts" / name.replace("/", "_").replace(":", "_")
            _oci_image(layout, "latest", item["ref"])
            subprocess.run(
                ["skopeo", "copy", "--dest-tls-verify=false", f"oci:{layout}:latest", f"docker://{item['ref']}"],
                check=True,
                capture_output=True,
            )
        yield address
    finally:
        server.terminate()
        server.wait(timeout=10)


H100 = "0x2330"


def derived_values(mig_owner="operator", exporter=True, dra=False):
    """The values k8s_gpu_platform.yml installs the chart with (module_utils.k8s.platform), for one H100 node."""
    gpus = [{"index": i, "name": "GPU", "pci_device_id": H100, "mig_mode": "disabled"} for i in range(8)]
    node = {
        "name": "gpu01",
        "nvidia_gpu": {"count": 8, "gpus": gpus},
        "mig_layout": {"name": "h100", "gpus": [{"devices": [0], "profiles": {"1g.10gb": 7}}]},
        "mig_owner": mig_owner,
        "dcgm_exporter": exporter,
    }
    return k8s.platform([node], chart="v26.7.0", kubernetes_version="1.36.4", dra=dra)["values"]
