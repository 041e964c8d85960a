# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bundle_manifest, bundle_fetch and mirror_check on the stand-in repository (file:// URLs, the real
gpgv): what they refuse, each naming the variable or file, and that nothing is kept unchecked."""

from __future__ import annotations

import json
import shutil
import types

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import mirror
from ansible_collections.gpuops.cluster.plugins.modules import bundle_fetch, bundle_manifest, mirror_check
from module_harness import run_module

ARCHIVE_KEY = "DDD2F499504D61685FB2FDC94B9F49872D40B3F2"
pytestmark = [
    pytest.mark.usefixtures("module_exits"),
    pytest.mark.skipif(
        shutil.which("gpg") is None or shutil.which("gpgv") is None, reason="gpg and gpgv sign and check the repository"
    ),
]


@pytest.fixture
def upstream(repo, tmp_path):
    """A copy of the stand-in repository this test may break."""
    www, _builder = repo
    copy = tmp_path / "upstream"
    shutil.copytree(www / "compute" / "cuda" / "repos" / "debian12", copy / "cuda" / "debian12")
    return copy


def hosts(upstream, fingerprint=ARCHIVE_KEY, packages=("libnccl2=2.26.5-1+cuda12.8",)):
    repository = f"file://{upstream}/cuda/debian12/x86_64/"
    return {
        "gpu01": {
            "platform": "debian12",
            "arch": "amd64",
            "requests": [
                {
                    "kind": "apt",
                    "role": "nccl",
                    "variable": "cuda_repository_url",
                    "base": f"file://{upstream}/cuda",
                    "repository": repository,
                    "key_url": repository + "3bf863cc.pub",
                    "key_fingerprint": [fingerprint],
                    "fingerprint_variable": "cuda_repository_key_fingerprint",
                    "packages": list(packages),
                }
            ],
        }
    }


def manifest(upstream, dest, **kwargs):
    return run_module(
        bundle_manifest.main, {"hosts": hosts(upstream, **kwargs), "dest": str(dest), "collection_version": "1.0.0"}
    )


def fetch(path, **args):
    return run_module(bundle_fetch.main, {"manifest": str(path), "collection_version": "1.0.0", **args})


def test_a_key_that_is_not_the_pinned_one_is_refused_and_nothing_written(upstream, tmp_path):
    result = manifest(upstream, tmp_path / "bundle", fingerprint="EB693B3035CD5710E231E123A4B469963BF863CC")
    assert result.failed
    assert "cuda_repository_key_fingerprint (file://" in result.result["msg"]
    assert f"the file holds {ARCHIVE_KEY}, not only EB693B3035CD5710E231E123A4B469963BF863CC" in result.result["msg"]
    assert not (tmp_path / "bundle").exists()


def test_a_package_the_repository_lacks_is_named_with_the_versions_there(upstream, tmp_path):
    result = manifest(upstream, tmp_path / "bundle", packages=("libnccl2=2.99.1-*",))
    assert result.failed
    assert "cuda_repository_url (file://" in result.result["msg"]
    assert "libnccl2=2.99.1-*: not in the repository for amd64 (versions there: " in result.result["msg"]


def test_fetch_keeps_the_signed_index_and_refetches_only_what_is_missing_or_wrong(upstream, tmp_path):
    made = manifest(upstream, tmp_path / "bundle")
    assert not made.failed and made.result["changed"]
    path = tmp_path / "bundle" / "manifest.json"
    first = fetch(path)
    assert not first.failed, first.result
    # Key, InRelease, Release, Release.gpg, Packages, Packages.gz and the package.
    assert first.result["fetched"]["files"] == 7
    doc = json.loads(path.read_text())
    (package,) = doc["repositories"][0]["packages"]
    (tmp_path / "bundle" / package["path"]).write_bytes(b"truncated")
    second = fetch(path)
    # Every file is counted once: the one fetched again, and the six the bundle kept (key and indexes too).
    assert second.result["fetched"]["files"] == 1 and second.result["present"]["files"] == 6
    third = fetch(path)
    assert third.result["fetched"]["files"] == 0 and not third.result["changed"]


def test_fetch_in_check_mode_writes_nothing(upstream, tmp_path):
    manifest(upstream, tmp_path / "bundle")
    path = tmp_path / "bundle" / "manifest.json"
    result = run_module(bundle_fetch.main, {"manifest": str(path), "collection_version": "1.0.0"}, check_mode=True)
    assert result.result["changed"] and result.result["fetched"]["files"] == 7
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == ["manifest.json", "manifest.md", "mirrors.yml"]


def test_a_corrupt_download_is_refused_and_not_kept(upstream, tmp_path):
    manifest(upstream, tmp_path / "bundle")
    path = tmp_path / "bundle" / "manifest.json"
    (package,) = json.loads(path.read_text())["repositories"][0]["packages"]
    served = upstream / "cuda" / "debian12" / "x86_64" / package["filename"]
    served.write_bytes(served.read_bytes()[:-10] + b"0123456789")
    result = fetch(path)
    assert result.failed
    assert "libnccl2_2.26.5-1+cuda12.8_amd64.deb: SHA256 " in result.result["msg"]
    assert f"the manifest says {package['sha256']}" in result.result["msg"]
    assert not (tmp_path / "bundle" / package["path"]).exists()
    assert not list((tmp_path / "bundle").rglob(".gpuops-*"))


def test_an_index_not_signed_by_the_pinned_key_is_refused(upstream, tmp_path):
    manifest(upstream, tmp_path / "bundle")
    for name in ("InRelease", "Release"):
        index = upstream / "cuda" / "debian12" / "x86_64" / name
        index.write_text(index.read_text().replace("Origin: NVIDIA", "Origin: NVIDlA"))
    result = fetch(tmp_path / "bundle" / "manifest.json")
    assert result.failed
    assert "InRelease is not signed by the key cuda_repository_key_fingerprint pins" in result.result["msg"]
    assert not (tmp_path / "bundle" / "local").exists()


def test_a_packages_index_that_its_release_does_not_sign_is_refused(upstream, tmp_path):
    manifest(upstream, tmp_path / "bundle")
    packages = upstream / "cuda" / "debian12" / "x86_64" / "Packages"
    packages.write_text(packages.read_text() + "\n")
    result = fetch(tmp_path / "bundle" / "manifest.json")
    assert result.failed
    assert "Packages does not match the SHA256 and size its signed Release gives" in result.result["msg"]


def test_a_manifest_of_another_version_is_refused(upstream, tmp_path):
    manifest(upstream, tmp_path / "bundle")
    result = run_module(
        bundle_fetch.main, {"manifest": str(tmp_path / "bundle" / "manifest.json"), "collection_version": "1.1.0"}
    )
    assert result.failed
    assert "made by gpuops.cluster 1.0.0, and this is 1.1.0" in result.result["msg"]


def test_the_archive_refuses_a_bundle_with_a_missing_file(upstream, tmp_path):
    manifest(upstream, tmp_path / "bundle")
    path = tmp_path / "bundle" / "manifest.json"
    fetch(path)
    (package,) = json.loads(path.read_text())["repositories"][0]["packages"]
    (tmp_path / "bundle" / package["path"]).unlink()
    result = fetch(path, archive=str(tmp_path / "bundle.tar"))
    assert result.failed
    assert f"- {package['path']}: missing" in result.result["msg"]
    assert not (tmp_path / "bundle.tar").exists()


def test_the_mirror_check_compares_the_mirror_with_the_manifest(upstream, tmp_path):
    manifest(upstream, tmp_path / "bundle")
    path = tmp_path / "bundle" / "manifest.json"
    doc = json.loads(path.read_text())
    doc["repositories"][0]["packages"][0]["sha256"] = "0" * 64
    path.write_text(json.dumps(doc))
    args = {"hosts": hosts(upstream), "manifest": str(path), "collection_version": "1.0.0", "fail_on_error": False}
    result = run_module(mirror_check.main, args)
    (problem,) = result.result["problems"]
    assert problem["variable"] == "cuda_repository_url"
    assert "and " + "0" * 64 + " in the manifest" in problem["message"]
    only = run_module(mirror_check.main, {"hosts": hosts(upstream), "only_mirrors": True})
    assert only.result["checked"] == {"repositories": 1, "packages": 1, "files": 0}


def test_a_file_answered_with_an_html_page_is_not_on_the_mirror(monkeypatch):
    """A mirror that sends its error page with 200 for a missing package: refused as absent."""
    answers = {
        "http://m/pool/a.deb": {"status": 200, "content-type": "text/html; charset=utf-8"},
        "http://m/pool/b.deb": {"status": 200, "content-type": "application/vnd.debian.binary-package"},
        "http://m/pool/c.deb": {"status": 404, "msg": "Not Found"},
    }
    monkeypatch.setattr(mirror, "fetch_url", lambda module, url, **kw: (object(), answers[url]))

    module = types.SimpleNamespace(params={"timeout": 5})
    assert mirror.present(module, "http://m/pool/a.deb") == (
        False,
        "the server answers with an HTML page (text/html; charset=utf-8)",
    )
    assert mirror.present(module, "http://m/pool/b.deb") == (True, None)
    assert mirror.present(module, "http://m/pool/c.deb") == (False, "404 Not Found")
