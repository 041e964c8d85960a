# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator's chart and images in the air-gap bundle: which images the chart deploys with the
values k8s_gpu_platform.yml derives (read from the chart's own values.yaml, v26.7.0), the registry
values that take them from the site's registry, and bundle_manifest and bundle_fetch against a
stand-in chart repository (file://) and a real registry (Debian's docker-registry) read by the real
skopeo: digests pinned, images copied into an OCI layout, a re-run that copies nothing, and the
archive's check of every blob."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import time
import urllib.request

import pytest
import yaml
from ansible.module_utils import basic
from ansible_collections.gpuops.cluster.plugins.module_utils import bundle, chart
from ansible_collections.gpuops.cluster.plugins.modules import bundle_fetch, bundle_manifest
from chart_standin import VALUES, chart_repository, derived_values, operator_package, package, standin_registry
from hypothesis import given, settings
from hypothesis import strategies as st
from module_harness import run_module

pytestmark = pytest.mark.usefixtures("module_exits")


# --- which images -------------------------------------------------------------------------------------


def test_the_operator_chart_with_the_derived_values_deploys_these_images():
    found = chart.images(chart.read_chart(operator_package(), "gpu-operator"), derived_values(), "gpu-operator")
    assert {i["ref"]: i["components"] for i in found} == {
        # The host stack is the roles' (driver, toolkit, DCGM and its exporter on the host): not the chart's.
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0": ["migManager"],
        "nvcr.io/nvidia/gpu-operator:v26.7.0": ["operator", "validator"],
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0": ["devicePlugin", "gfd"],
        "registry.k8s.io/nfd/node-feature-discovery:v0.19.0": ["node-feature-discovery"],
    }


def test_what_the_values_turn_on_comes_in_and_the_sandbox_operands_only_with_sandbox_workloads():
    parsed = chart.read_chart(operator_package(), "gpu-operator")
    defaults = {i["ref"] for i in chart.images(parsed, {}, "gpu-operator")}
    # The chart's own defaults: the driver with its manager, the toolkit, the exporter; no sandbox operand.
    assert "nvcr.io/nvidia/driver:595.91.07" in defaults
    assert "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0" in defaults
    assert "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0" in defaults
    assert not any("kubevirt" in ref or "vgpu-device-manager" in ref or "cc-manager" in ref for ref in defaults)
    assert not any("dra-driver" in ref for ref in defaults)
    sandbox = {i["ref"] for i in chart.images(parsed, {"sandboxWorkloads": {"enabled": True}}, "gpu-operator")}
    assert "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0" in sandbox
    assert "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.5.0" in sandbox
    # vgpuManager stays off: its own enabled says false.
    assert not any("vgpu-manager:" in ref for ref in sandbox)
    dra = {i["ref"] for i in chart.images(parsed, derived_values(dra=True), "gpu-operator")}
    assert "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0" in dra
    no_nfd = {i["ref"] for i in chart.images(parsed, {"nfd": {"enabled": False}}, "gpu-operator")}
    assert not any("node-feature-discovery" in ref for ref in no_nfd)


def test_the_registry_values_take_every_image_from_the_site_registry_under_its_upstream_path():
    parsed = chart.read_chart(operator_package(), "gpu-operator")
    values = derived_values()
    found = chart.images(parsed, values, "gpu-operator")
    moved = chart.images(parsed, chart.merge(values, chart.registry_values(found, "registry.site:5000")), "x")
    assert sorted(i["ref"] for i in moved) == sorted(f"registry.site:5000/{i['ref']}" for i in found)


def test_helm_merges_maps_replaces_the_rest_and_a_null_removes():
    assert chart.merge({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2]}, "d": None}) == {"a": {"b": 1, "c": [2]}}


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ("entries: {}\n", "has no chart gpu-operator"),
        (
            "entries:\n  gpu-operator:\n  - version: v26.3.3\n    urls: [a.tgz]\n    digest: " + "a" * 64,
            "v26.7.0 is not",
        ),
        ("entries:\n  gpu-operator:\n  - version: v26.7.0\n    urls: [a.tgz]\n", "no SHA256 digest"),
        ("apiVersion: v1\n", "has no entries"),
        ("entries: [\n", "not YAML"),
    ],
)
def test_an_index_without_the_pinned_chart_is_refused_naming_the_variable(index, message):
    with pytest.raises(bundle.BundleError, match=message) as err:
        chart.chart_entry(
            index, "https://helm.example/nvidia", "gpu-operator", "v26.7.0", "k8s_platform_helm_repository"
        )
    assert "k8s_platform_helm_repository" in str(err.value)


def test_a_package_that_is_no_chart_or_climbs_out_is_refused():
    with pytest.raises(bundle.BundleError, match="not a chart package"):
        chart.read_chart(b"<html>not found</html>", "x.tgz")
    with pytest.raises(bundle.BundleError, match=r"no Chart\.yaml"):
        chart.read_chart(package({"README": "x"}), "x.tgz")
    with pytest.raises(bundle.BundleError, match="climbs out"):
        chart.read_chart(package({"../gpu-operator/Chart.yaml": "name: x"}), "x.tgz")
    bad = operator_package(values=VALUES.replace("version: v0.20.0", "version: 'v0.20.0 && rm'", 1))
    with pytest.raises(bundle.BundleError, match="not an image tag"):
        chart.images(chart.read_chart(bad, "x.tgz"), {}, "x.tgz")


def alias_bomb(levels):
    """A values.yaml of a few hundred bytes whose aliases, expanded, make a tree of 4**levels leaves."""
    lines = ["a0: &a0 [x, x, x, x]"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [*a{level - 1}, *a{level - 1}, *a{level - 1}, *a{level - 1}]")
    return "\n".join(lines) + "\n"


def chart_with(values):
    return package({"gpu-operator/Chart.yaml": "name: gpu-operator\nversion: v1\n", "gpu-operator/values.yaml": values})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        # Issue 59: 296 bytes took 0.5 s at 9 levels, four times longer at each more; now refused at once.
        (alias_bomb(12), "its aliases expand to more than 200000 nodes"),
        # A RecursionError before: nesting deeper than Python's recursion limit.
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels"),
        ("a:\n" + "".join(" " * (2 * n) + f"  k{n}:\n" for n in range(100)) + " " * 202 + "v\n", "deeper than 64"),
        # Aliases that reach past the depth bound though each anchor is shallow.
        ("".join(f"a{n}: &a{n} {{k: {'*a' + str(n - 1) if n else 1}}}\n" for n in range(70)), "aliases nest it deeper"),
        # A structure with no end: an alias inside the node it names.
        ("a: &a [*a]\n", "a structure with no end"),
        ("a: &a {k: *a}\n", "a structure with no end"),
    ],
)
def test_hostile_values_are_refused_at_once_naming_the_chart(values, message):
    began = time.monotonic()
    with pytest.raises(bundle.BundleError, match=message) as err:
        chart.read_chart(chart_with(values), "gpu-operator-v26.7.0.tgz")
    assert str(err.value).startswith("gpu-operator-v26.7.0.tgz gpu-operator/values.yaml: refused: ")
    assert time.monotonic() - began < 2


def test_a_hostile_index_is_refused_naming_the_repository_variable():
    with pytest.raises(bundle.BundleError, match=r"k8s_platform_helm_repository .* refused: its aliases expand"):
        chart.chart_entry(
            "entries: {}\n" + alias_bomb(12), "https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0",
            "k8s_platform_helm_repository",
        )  # fmt: skip


def test_a_package_that_unpacks_past_the_bound_or_nests_too_deep_is_refused(monkeypatch):
    # 1,000:1: a member of zeros far larger than any chart, skipped as a member but still unpacked before.
    zeros = package({"gpu-operator/Chart.yaml": "name: gpu-operator\n", "gpu-operator/crds/big.bin": bytes(70 << 20)})
    assert len(zeros) < 200_000
    with pytest.raises(bundle.BundleError, match=r"x\.tgz: refused: it unpacks to more than 67108864 bytes"):
        chart.read_chart(zeros, "x.tgz")
    # Subcharts nested in subcharts (each a package inside the one above).
    nested = package({"c5/Chart.yaml": "name: c5\n"})
    for level in range(4, -1, -1):
        nested = package({f"c{level}/Chart.yaml": f"name: c{level}\n", f"c{level}/charts/c{level + 1}.tgz": nested})
    with pytest.raises(bundle.BundleError, match="subcharts nested deeper than 4"):
        chart.read_chart(nested, "x.tgz")
    monkeypatch.setattr(chart, "MAX_CHART_DEPTH", 5)
    assert chart.read_chart(nested, "x.tgz")["name"] == "c0"


# --- the modules, against a stand-in chart repository and a real registry ------------------------------


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """Debian's docker-registry on a free port, holding a stand-in for each image the chart deploys."""
    if not (shutil.which("skopeo") and shutil.which("docker-registry")):
        pytest.skip("skopeo and docker-registry (Debian packages) copy and serve the stand-in images")
    with standin_registry(tmp_path_factory.mktemp("registry"), derived_values()) as address:
        yield address


@pytest.fixture
def charts_repo(registry, tmp_path):
    """A chart repository (file://) with the GPU Operator chart whose images live in the stand-in registry."""
    return chart_repository(tmp_path / "helm" / "nvidia", registry=registry)


def chart_request(folder, **extra):
    return {
        "variable": "k8s_platform_helm_repository",
        "repository": f"file://{folder}",
        "chart": "gpu-operator",
        "version": "v26.7.0",
        "values": derived_values(),
        "values_variable": "k8s_platform_image_values",
        "hosts": ["gpu01"],
        **extra,
    }


def manifest(folder, dest, **args):
    """``(failed, result)`` of bundle_manifest with the chart request of ``folder``."""
    exited = run_module(
        bundle_manifest.main,
        {
            "hosts": {"gpu01": {"platform": "ubuntu2404", "arch": "amd64", "requests": []}},
            "dest": str(dest),
            "collection_version": "1.1.0",
            "charts": [chart_request(folder)],
            "registry_tls_verify": False,
            **args,
        },
    )
    return exited.failed, exited.result


def fetch(path, **args):
    exited = run_module(
        bundle_fetch.main,
        {"manifest": str(path), "collection_version": "1.1.0", "registry_tls_verify": False, **args},
    )
    return exited.failed, exited.result


def test_the_manifest_pins_each_image_by_the_registry_s_digest(charts_repo, registry, tmp_path):
    failed, result = manifest(charts_repo, tmp_path / "bundle")
    assert not failed, result
    (entry,) = result["manifest"]["charts"]
    assert (entry["chart"], entry["version"], entry["appVersion"]) == ("gpu-operator", "v26.7.0", "v26.7.0")
    assert (
        entry["sha256"]
        == hashlib.sha256((charts_repo / "charts" / "gpu-operator-v26.7.0.tgz").read_bytes()).hexdigest()
    )
    assert len(entry["images"]) == 4 and result["totals"]["images"] == 4
    for image in entry["images"]:
        name, tag = image["ref"][len(registry) + 1 :].rsplit(":", 1)
        request = urllib.request.Request(
            f"http://{registry}/v2/{name}/manifests/{tag}",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert image["digest"] == answer.headers["Docker-Content-Digest"]
    mirrors = yaml.safe_load((tmp_path / "bundle" / "mirrors.yml").read_text())
    assert mirrors["k8s_platform_helm_repository"] == "{{ gpuops_bundle_url }}/local" + str(charts_repo)
    assert mirrors["k8s_platform_image_values"]["operator"]["repository"] == (
        "{{ gpuops_bundle_registry }}/" + registry + "/nvidia"
    )
    text = (tmp_path / "bundle" / "manifest.md").read_text()
    assert "1 charts, 4 images" in text and "| " + entry["images"][0]["ref"] + " | sha256:" in text


def test_the_fetch_copies_each_image_by_digest_once_and_the_archive_checks_every_blob(charts_repo, tmp_path):
    dest = tmp_path / "bundle"
    failed, result = manifest(charts_repo, dest)
    assert not failed, result
    doc = result["manifest"]
    (entry,) = doc["charts"]
    failed, first = fetch(dest / "manifest.json")
    assert not failed, first
    assert first["changed"] and first["fetched"]["files"] == 1 + 4 + 1  # the package, 4 images, index.yaml
    # The bundle's index.yaml finds the package, relative to itself, with the upstream's digest.
    index = yaml.safe_load((dest / entry["index_path"]).read_text())
    (version,) = index["entries"]["gpu-operator"]
    package_path = (dest / entry["index_path"]).parent / version["urls"][0]
    assert hashlib.sha256(package_path.read_bytes()).hexdigest() == version["digest"] == entry["sha256"]
    # Each image is in the OCI layout under its reference, with the pinned digest (skopeo reads it).
    for image in entry["images"]:
        raw = subprocess.run(
            ["skopeo", "inspect", "--raw", f"oci:{dest / 'images'}:{image['ref']}"], check=True, capture_output=True
        ).stdout
        assert chart.image_digest(raw) == image["digest"]
    failed, again = fetch(dest / "manifest.json")
    assert not failed and not again["changed"] and again["fetched"]["files"] == 0, again
    assert again["present"]["files"] == 6
    failed, packed = fetch(dest / "manifest.json", archive=str(tmp_path / "bundle.tar"))
    assert not failed, packed
    with tarfile.open(tmp_path / "bundle.tar") as tar:
        names = set(tar.getnames())
    assert {"images/index.json", "images/oci-layout", entry["path"], entry["index_path"]} <= names
    blob = next((dest / "images" / "blobs" / "sha256").iterdir())
    blob.write_bytes(blob.read_bytes() + b"x")
    failed, refused = fetch(dest / "manifest.json", archive=str(tmp_path / "bundle2.tar"))
    assert failed and f"images/blobs/sha256/{blob.name}: SHA256" in refused["msg"]
    assert not (tmp_path / "bundle2.tar").exists()


def test_a_package_that_does_not_match_the_index_is_refused_and_nothing_written(charts_repo, tmp_path):
    tgz = charts_repo / "charts" / "gpu-operator-v26.7.0.tgz"
    tgz.write_bytes(tgz.read_bytes() + b"\0")
    failed, result = manifest(charts_repo, tmp_path / "bundle")
    assert failed and "does not match the SHA256 index.yaml gives" in result["msg"]
    assert "k8s_platform_helm_repository" in result["msg"]
    assert not (tmp_path / "bundle" / "manifest.json").exists()


def test_an_image_the_registry_does_not_have_is_named_with_its_values_variable(charts_repo, tmp_path):
    request = chart_request(charts_repo, values={**derived_values(), "gds": {"enabled": True}})
    failed, result = manifest(charts_repo, tmp_path / "bundle", charts=[request])
    assert failed, result
    assert "k8s_platform_image_values: the image " in result["msg"]
    assert "/nvidia/cloud-native/nvidia-fs:2.29.4 (gds) cannot be read from its registry" in result["msg"]


def test_without_skopeo_the_manifest_says_what_to_install_or_to_list_by_tag(charts_repo, tmp_path, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    failed, result = manifest(charts_repo, tmp_path / "bundle")
    assert failed and "apt-get install skopeo" in result["msg"] and "bundle_images: false" in result["msg"]
    failed, result = manifest(charts_repo, tmp_path / "bundle", images=False)
    assert not failed, result
    assert all("digest" not in image for image in result["manifest"]["charts"][0]["images"])


# --- hostile input: only BundleError, never a traceback ---------------------------------------------

INDEX = (
    "apiVersion: v1\nentries:\n  gpu-operator:\n  - version: v26.7.0\n    urls: [charts/gpu-operator-v26.7.0.tgz]\n"
    "    digest: " + "a" * 64 + "\n"
)


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, len(INDEX)), junk=st.text(max_size=40))
def test_a_mangled_index_raises_only_bundle_error(cut, junk):
    try:
        chart.chart_entry(INDEX[:cut] + junk + INDEX[cut:], "https://h/n", "gpu-operator", "v26.7.0", "variable")
    except bundle.BundleError:
        pass


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(0, 4096), junk=st.binary(max_size=64))
def test_a_mangled_package_raises_only_bundle_error(cut, junk):
    data = operator_package()
    try:
        parsed = chart.read_chart(data[:cut] + junk + data[cut + len(junk) :], "x.tgz")
        chart.images(parsed, {}, "x.tgz")
    except bundle.BundleError:
        pass


PARSED = chart.read_chart(operator_package(), "gpu-operator")
VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.dictionaries(
        st.sampled_from(["enabled", "repository", "image", "version", "tag", "digest", "driver", "nfd", "x"]),
        inner,
        max_size=5,
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(values=st.dictionaries(st.sampled_from(["driver", "operator", "image", "nfd", "sandboxWorkloads"]), VALUE))
def test_any_values_give_images_or_bundle_error(values):
    try:
        found = chart.images(PARSED, values, "gpu-operator")
    except bundle.BundleError:
        return
    assert all(isinstance(i["ref"], str) and i["components"] for i in found)
