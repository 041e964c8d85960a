# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a mirror for the air-gap modules (bundle_manifest, bundle_fetch, mirror_check): its
indexes and checksum lists as text, refused when a server answers with an error or an HTML page, and
its keys checked against the pinned fingerprints as apt_source checks them on a node."""

from __future__ import annotations

from ansible.module_utils.urls import fetch_url
from ansible_collections.gpuops.cluster.plugins.module_utils import bundle
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.openpgp import normalize_fingerprint, pinned_keyring

# The options of the modules that read over HTTP (doc fragment gpuops.cluster.download).
HTTP_OPTIONS = {
    "timeout": {"type": "int", "default": 60},
    "validate_certs": {"type": "bool", "default": True},
}
# An index larger than this is not a repository we mirror (NVIDIA's CUDA index is about 10 MiB).
MAX_TEXT = 256 * 1024 * 1024


def reader(module):
    """``read(url, optional=False)``: the bytes at ``url`` (indexes, keys, checksum lists; at most
    MAX_TEXT), BundleError when the server does not answer 200, None for a 404 when ``optional``."""

    def read(url, optional=False):
        response, info = fetch_url(module, url, timeout=module.params.get("timeout") or 60)
        if response is None or info.get("status") not in (200, None):
            if optional and info.get("status") == 404:
                return None
            raise bundle.BundleError(
                "{} answered {} {}: check the URL, and that this host reaches it.".format(
                    url, info.get("status"), info.get("msg", "")
                )
            )
        data = response.read(MAX_TEXT + 1)
        if len(data) > MAX_TEXT:
            raise bundle.BundleError(f"{url} is larger than {MAX_TEXT} bytes.")
        return data

    return read


def text_reader(read):
    def read_text(url):
        data = read(url)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise bundle.BundleError(f"{url} is not text (UTF-8): {err}.") from err
        if text.lstrip().lower().startswith(("<!doctype html", "<html")):
            raise bundle.BundleError(
                f"{url} answered with an HTML page, not the file: the mirror serves an error or index page there."
            )
        return text

    return read_text


def checked_keyring(key, data):
    """The keyring of the pinned keys in ``data`` (a repository's key file as served), or BundleError
    naming the fingerprint variable: every primary key in the file must be one it pins."""
    expected = [normalize_fingerprint(f) for f in key["fingerprints"]]
    if None in expected:
        raise bundle.BundleError(
            f"{key['variable']}: {key['fingerprints']!r} holds a value that is not a full fingerprint."
        )
    try:
        checked = pinned_keyring(data, expected)
    except ParseError as err:
        raise bundle.BundleError(f"{key['variable']} ({key['url']}): {err}") from err
    primaries = [k["fingerprint"] for k in checked["keys"] if k["primary"]]
    if checked["unexpected"] or not primaries:
        raise bundle.BundleError(
            "{} ({}): the file holds {}, not only {}; set the variable to the key the vendor published.".format(
                key["variable"], key["url"], ", ".join(primaries) or "no key", ", ".join(expected)
            )
        )
    return checked["keyring"]


def check_keys(repos, read):
    """The problems of each repository's key, downloaded with ``read``."""
    problems = []
    for repo in repos:
        try:
            checked_keyring(repo["key"], read(repo["key"]["url"]))
        except bundle.BundleError as err:
            problems.append(str(err))
    return problems


def present(module, url):
    """``(True, None)`` when the server has ``url`` (HEAD), else ``(False, "404 Not Found")``. A
    package or archive answered with an HTML page (a mirror's error or login page sent with 200) is
    not there either."""
    response, info = fetch_url(module, url, method="HEAD", timeout=module.params["timeout"])
    if response is None or info.get("status") not in (200, None):
        return False, "{} {}".format(info.get("status"), info.get("msg", "")).strip()
    kind = str(info.get("content-type") or "").lower()
    if kind.startswith("text/html") and not url.lower().endswith((".html", ".htm")):
        return False, f"the server answers with an HTML page ({kind})"
    return True, None


def skopeo(module):
    """``run(*args)``: skopeo's standard output as bytes (an image manifest is hashed as served), a
    BundleError naming the command and skopeo's last words when it fails or is not installed."""
    binary = module.get_bin_path("skopeo")

    def run(*args):
        if not binary:
            raise bundle.BundleError(
                "skopeo is not installed on this host: apt-get install skopeo and run again, or set "
                "bundle_images: false to list the images by tag without carrying them."
            )
        rc, out, err = module.run_command([binary, *args], encoding=None, environ_update={"LC_ALL": "C"})
        if rc != 0:
            words = err.decode("utf-8", "replace").strip().splitlines()
            raise bundle.BundleError(
                "skopeo {} failed ({}): {}".format(" ".join(args), rc, words[-1] if words else "no message")
            )
        return out

    return run
