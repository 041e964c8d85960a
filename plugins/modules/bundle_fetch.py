#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: bundle_fetch
short_description: Download what an air-gap manifest lists into a mirror folder, every file checked, and pack it
version_added: 1.1.0
description:
  - Reads C(manifest.json) (M(gpuops.cluster.bundle_manifest)) and downloads into O(dest) each
    repository's key, its signed index (C(InRelease), C(Release), C(Release.gpg), C(Packages)) and
    the packages the manifest lists, and each file with its checksum file, every one at the upstream's
    path under a folder named by the upstream's host. A web server that serves O(dest) is then a
    mirror the collection's variables point at with only their host part changed.
  - The vendors' signed indexes are kept as they are, so the fingerprints the inventory pins stay
    valid; nothing is re-signed. Each key is checked against its pinned fingerprints, each index's
    signature with C(gpgv) against that key alone, each C(Packages) against the SHA256 the signed
    C(Release) gives, and each package and file against the SHA256 of the manifest.
  - A file already in O(dest) with the right SHA256 is not fetched again, so a re-run fetches only
    what is missing; nothing is written before it is checked.
  - With O(archive), checks the whole bundle in O(dest) against the manifest and writes one tar
    archive holding the manifest and every listed file, to carry into the site; it is written again
    only when its content changes.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.download
options:
  manifest:
    description: Path of C(manifest.json).
    type: path
    required: true
  dest:
    description: The bundle folder (the mirror's root); default the manifest's folder.
    type: path
  collection_version:
    description: This collection's version; a manifest made by another version is refused.
    type: str
    required: true
  select:
    description:
      - The repositories and files to fetch, by their C(url) in the manifest; empty fetches all.
      - C(bundle.yml) fetches one repository per loop item, so that progress shows as it goes.
    type: list
    elements: str
    default: []
  archive:
    description: Write this tar archive of the whole bundle (after checking it) instead of fetching.
    type: path
  registry_tls_verify:
    description: Check the TLS certificates of the image registries (skopeo's C(--src-tls-verify)).
    type: bool
    default: true
notes:
  - A chart is kept at its upstream path with an C(index.yaml) of the bundle's charts next to the
    repository's, the package checked against the digest of the repository's own index.
  - The images go into one OCI image layout, C(images/) in O(dest), each under its reference with
    every platform the registry has (C(skopeo copy --all)), copied by the digest the manifest pins and
    checked again once copied; O(select) takes an image by its reference.
requirements:
  - gpgv (Debian's and Ubuntu's gpgv package), to check the indexes' signatures.
  - skopeo, where the manifest lists images with their digests.
seealso:
  - module: gpuops.cluster.bundle_manifest
"""

EXAMPLES = r"""
- name: Fetch one repository of the manifest
  gpuops.cluster.bundle_fetch:
    manifest: /srv/bundle/manifest.json
    collection_version: 1.0.0
    select: [https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/]

- name: Check the bundle and pack it
  gpuops.cluster.bundle_fetch:
    manifest: /srv/bundle/manifest.json
    collection_version: 1.0.0
    archive: /srv/gpuops-bundle.tar
"""

RETURN = r"""
fetched:
  description: How many files were downloaded, and their bytes.
  returned: success
  type: dict
  sample: {files: 17, bytes: 48213}
present:
  description: How many listed files were already in the bundle with the right SHA256, and their bytes.
  returned: success
  type: dict
  sample: {files: 4, bytes: 1022}
archive:
  description: The archive's path, members and bytes (with O(archive)).
  returned: when O(archive) is set
  type: dict
"""

import hashlib
import json
import os
import shutil
import tarfile
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url
from ansible_collections.gpuops.cluster.plugins.module_utils import apt_index, bundle, chart
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.mirror import HTTP_OPTIONS, checked_keyring, reader, skopeo

CHUNK = 1024 * 1024


class Fetcher:
    def __init__(self, module, dest):
        self.module = module
        self.dest = dest
        self.download = reader(module)
        self.fetched = {"files": 0, "bytes": 0}
        self.present = {"files": 0, "bytes": 0}

    def local(self, relative):
        return os.path.join(self.dest, relative)

    def write(self, relative, data):
        path = self.local(relative)
        self.fetched["files"] += 1
        self.fetched["bytes"] += len(data)
        if self.module.check_mode:
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gpuops-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)

    def keep(self, relative, data, fresh):
        """Write a checked small file that was downloaded; count one the bundle already had."""
        if fresh:
            self.write(relative, data)
        else:
            self.present["files"] += 1
            self.present["bytes"] += len(data)

    def read_local(self, relative):
        try:
            with open(self.local(relative), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def small(self, url, relative, optional=False):
        """A key, index or checksum list: the copy in the bundle, else downloaded (written by the caller
        once checked). Returns ``(data, fresh)``."""
        data = self.read_local(relative)
        if data is not None:
            return data, False
        return self.download(url, optional), True

    def have(self, relative, sha256, size=None):
        """Whether the bundle already holds the file with this SHA256 (and size)."""
        path = self.local(relative)
        if not os.path.isfile(path) or (size is not None and os.path.getsize(path) != size):
            return False
        return sha256_file(path) == sha256

    def large(self, url, relative, sha256, size=None):
        """A package or file: kept when the bundle has it, else streamed to a temporary file, checked, moved."""
        if self.have(relative, sha256, size):
            self.present["files"] += 1
            self.present["bytes"] += os.path.getsize(self.local(relative))
            return
        if self.module.check_mode:
            self.fetched["files"] += 1
            self.fetched["bytes"] += size or 0
            return
        path = self.local(relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        response, info = fetch_url(self.module, url, timeout=self.module.params["timeout"])
        if response is None or info.get("status") not in (200, None):
            raise bundle.BundleError(f"{url} answered {info.get('status')} {info.get('msg', '')}")
        digest, length = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gpuops-")
        try:
            with os.fdopen(fd, "wb") as handle:
                while True:
                    chunk = response.read(CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                    length += len(chunk)
                    handle.write(chunk)
            if digest.hexdigest() != sha256 or (size is not None and length != size):
                expected = sha256 if size is None else f"{sha256} and {size} bytes"
                raise bundle.BundleError(
                    f"{url}: SHA256 {digest.hexdigest()} and {length} bytes, the manifest says {expected}; the "
                    "download is corrupt or the upstream changed the file (make the manifest again)."
                )
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        self.fetched["files"] += 1
        self.fetched["bytes"] += length


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def gpgv(module, keyring, signed, signature=None):
    """Whether ``signed`` (with a detached ``signature``, or clear-signed) verifies against ``keyring`` alone."""
    binary = module.get_bin_path("gpgv")
    if not binary:
        raise bundle.BundleError("gpgv is not installed on this host: apt-get install gpgv, then run again.")
    home = tempfile.mkdtemp(prefix="gpuops-gpgv-")
    try:
        paths = {}
        for name, data in (("keyring.gpg", keyring), ("signed", signed), ("signature", signature)):
            if data is not None:
                paths[name] = os.path.join(home, name)
                with open(paths[name], "wb") as handle:
                    handle.write(data)
        argv = [binary, "--homedir", home, "--keyring", paths["keyring.gpg"]]
        argv += [paths["signature"], paths["signed"]] if signature is not None else [paths["signed"]]
        rc, _out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
        return rc == 0, err.strip()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def fetch_repository(fetcher, repo):
    module = fetcher.module
    where = "{} ({})".format(repo["variable"], repo["url"])
    key_data, key_fresh = fetcher.small(repo["key"]["url"], repo["key"]["path"])
    keyring = checked_keyring(repo["key"], key_data)
    index = {}
    for name in bundle.INDEX_FILES:
        data, fresh = fetcher.small(
            bundle.join_url(repo["url"], name), bundle.safe_join(repo["path"], name, where), True
        )
        if data is not None:
            index[name] = (data, fresh)
    if "InRelease" in index:
        good, message = gpgv(module, keyring, index["InRelease"][0])
        signed = index["InRelease"][0]
        what = "InRelease"
    elif "Release" in index and "Release.gpg" in index:
        good, message = gpgv(module, keyring, index["Release"][0], index["Release.gpg"][0])
        signed = index["Release"][0]
        what = "Release with Release.gpg"
    else:
        raise bundle.BundleError(
            f"{where}: neither InRelease nor Release with Release.gpg: the repository is not signed."
        )
    if not good:
        raise bundle.BundleError(
            f"{where}: {what} is not signed by the key {repo['key']['variable']} pins ({message}); nothing was kept."
        )
    if "Release" in index and "Release.gpg" in index and what == "InRelease":
        good, message = gpgv(module, keyring, index["Release"][0], index["Release.gpg"][0])
        if not good:
            raise bundle.BundleError(f"{where}: Release.gpg does not verify ({message}).")
    # Only what gpgv verified: a clear-signed InRelease's block, and nothing around it.
    text = bundle.release_text(signed.decode("utf-8", "replace"), clear_signed=what == "InRelease")
    sums = bundle.release_checksums(text, f"{where} Release")
    listed = [name for name in ("Packages", "Packages.gz", "Packages.xz") if name in sums]
    if "Packages" not in sums:
        raise bundle.BundleError(f"{where}: the signed Release lists no Packages file.")
    packages_text = None
    for name in listed:
        relative = bundle.safe_join(repo["path"], name, where)
        digest, size = sums[name]
        data, fresh = fetcher.small(bundle.join_url(repo["url"], name), relative, optional=name != "Packages")
        if data is None:
            continue
        if hashlib.sha256(data).hexdigest() != digest or len(data) != size:
            raise bundle.BundleError(f"{where}: {name} does not match the SHA256 and size its signed Release gives.")
        fetcher.keep(relative, data, fresh)
        if name == "Packages":
            packages_text = data.decode("utf-8", "replace")
    # The index is signed and checked: keep it and the key.
    for name, (data, fresh) in sorted(index.items()):
        fetcher.keep(bundle.safe_join(repo["path"], name, where), data, fresh)
    fetcher.keep(repo["key"]["path"], key_data, key_fresh)
    entries = apt_index.parse_packages(packages_text, source=f"{repo['url']}Packages")
    by_file = {e["filename"]: e for versions in entries.values() for e in versions}
    for package in repo["packages"]:
        entry = by_file.get(package["filename"])
        if entry is None or entry["sha256"] != package["sha256"]:
            raise bundle.BundleError(
                f"{where}: {package['package']} {package['version']} is not in the signed index as the manifest has "
                "it; the repository changed since the manifest was made. Make the manifest again."
            )
        fetcher.large(
            bundle.join_url(repo["url"], package["filename"]), package["path"], package["sha256"], package["size"]
        )


def fetch_file(fetcher, item):
    if item.get("checksum_url"):
        data, fresh = fetcher.small(item["checksum_url"], item["checksum_path"])
        text = data.decode("utf-8", "replace")
        name = item["url"].rstrip("/").rsplit("/", 1)[-1]
        if bundle.digest_from_list(text, name, item["checksum_url"]) != item["sha256"]:
            raise bundle.BundleError(
                f"{item['checksum_url']} gives another SHA256 for {name} than the manifest: make the manifest again."
            )
        fetcher.keep(item["checksum_path"], data, fresh)
    fetcher.large(item["url"], item["path"], item["sha256"])


IMAGES = "images"


def fetch_chart(fetcher, item, doc):
    fetcher.large(item["url"], item["path"], item["sha256"], item.get("size"))
    same_index = [c for c in doc.get("charts") or [] if c["index_path"] == item["index_path"]]
    text = chart.index_yaml(same_index).encode()
    if fetcher.read_local(item["index_path"]) == text:
        fetcher.present["files"] += 1
        fetcher.present["bytes"] += len(text)
    else:
        fetcher.write(item["index_path"], text)


def layout(fetcher, ref):
    path = fetcher.local(IMAGES)
    if ":" in path:
        raise bundle.BundleError(f"{path}: the bundle's folder has a colon in its path, which skopeo cannot take.")
    return f"oci:{path}:{ref}"


def fetch_image(fetcher, image, tls_verify):
    """Copy one image (every platform) into the bundle's OCI layout by its pinned digest, unless it is there."""
    if not image.get("digest"):
        return
    run = skopeo(fetcher.module)
    target = layout(fetcher, image["ref"])
    try:
        if chart.image_digest(run("inspect", "--raw", target)) == image["digest"]:
            fetcher.present["files"] += 1
            return
    except bundle.BundleError:
        pass
    fetcher.fetched["files"] += 1
    if fetcher.module.check_mode:
        return
    blobs = fetcher.local(os.path.join(IMAGES, "blobs", "sha256"))
    before = _folder_bytes(blobs)
    run(
        "copy",
        "--all",
        "--retry-times",
        "2",
        f"--src-tls-verify={str(tls_verify).lower()}",
        "docker://" + chart.pinned(image["ref"], image["digest"]),
        target,
    )
    got = chart.image_digest(run("inspect", "--raw", target))
    if got != image["digest"]:
        raise bundle.BundleError(
            f"{image['ref']}: the copy in the bundle is {got}, the manifest pins {image['digest']}; "
            "make the manifest again."
        )
    fetcher.fetched["bytes"] += _folder_bytes(blobs) - before


def _folder_bytes(folder):
    try:
        return sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file())
    except FileNotFoundError:
        return 0


def image_members(doc, dest):
    """The OCI layout's files (each blob checked against its name) and what the manifest pins that
    its index.json does not hold under the image's reference."""
    images = [i for c in doc.get("charts") or [] for i in c["images"] if i.get("digest")]
    if not images:
        return [], []
    listed = [(os.path.join(IMAGES, "oci-layout"), None), (os.path.join(IMAGES, "index.json"), None)]
    bad = []
    try:
        with open(os.path.join(dest, IMAGES, "index.json"), encoding="utf-8") as handle:
            index = json.load(handle)
    except (OSError, ValueError):
        index = {}
    held = {
        (m.get("annotations") or {}).get("org.opencontainers.image.ref.name"): m.get("digest")
        for m in index.get("manifests") or []
        if isinstance(m, dict)
    }
    for image in images:
        if held.get(image["ref"]) != image["digest"]:
            bad.append(
                f"{IMAGES}/{image['ref']}: {held.get(image['ref']) or 'missing'}, the manifest pins {image['digest']}"
            )
    blobs = os.path.join(dest, IMAGES, "blobs", "sha256")
    if os.path.isdir(blobs):
        listed += [(os.path.join(IMAGES, "blobs", "sha256", name), name) for name in sorted(os.listdir(blobs))]
    return listed, bad


def members(doc, dest):
    """Every path of the bundle with its SHA256 where the manifest gives one (else None: checked by
    its signature or key when fetched), and the files that are missing or do not match."""
    listed = []
    for repo in doc["repositories"]:
        listed.append((repo["key"]["path"], None))
        for name in (*bundle.INDEX_FILES, "Packages", "Packages.gz", "Packages.xz"):
            relative = bundle.safe_join(repo["path"], name, repo["url"])
            if os.path.exists(os.path.join(dest, relative)):
                listed.append((relative, None))
        listed += [(p["path"], p["sha256"]) for p in repo["packages"]]
    for item in doc["files"]:
        if item.get("checksum_path"):
            listed.append((item["checksum_path"], None))
        listed.append((item["path"], item["sha256"]))
    for item in doc.get("charts") or []:
        listed += [(item["path"], item["sha256"]), (item["index_path"], None)]
    image_files, bad = image_members(doc, dest)
    listed += image_files
    out = []
    for relative, sha256 in sorted(set(listed)):
        path = os.path.join(dest, relative)
        if not os.path.isfile(path):
            bad.append(f"{relative}: missing")
            continue
        actual = sha256_file(path)
        if sha256 is not None and actual != sha256:
            bad.append(f"{relative}: SHA256 {actual}, the manifest says {sha256}")
        out.append({"path": relative, "size": os.path.getsize(path), "sha256": actual})
    return out, bad


def write_archive(module, doc, dest, archive):
    listing, bad = members(doc, dest)
    if bad:
        raise bundle.BundleError(
            "the bundle in {} does not hold what the manifest lists ({} file(s)); run the fetch again:\n- {}".format(
                dest, len(bad), "\n- ".join(bad)
            )
        )
    extra = [
        name for name in ("manifest.json", "manifest.md", "mirrors.yml") if os.path.isfile(os.path.join(dest, name))
    ]
    listing += [
        {
            "path": name,
            "size": os.path.getsize(os.path.join(dest, name)),
            "sha256": sha256_file(os.path.join(dest, name)),
        }
        for name in extra
    ]
    record = json.dumps(sorted(listing, key=lambda m: m["path"]), indent=0, sort_keys=True)
    sidecar = archive + ".members.json"
    result = {"path": archive, "members": len(listing), "bytes": sum(m["size"] for m in listing)}
    try:
        with open(sidecar, encoding="utf-8") as handle:
            if handle.read() == record and os.path.isfile(archive):
                return False, result
    except FileNotFoundError:
        pass
    if module.check_mode:
        return True, result
    folder = os.path.dirname(os.path.abspath(archive))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gpuops-")
    os.close(fd)
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for member in sorted(listing, key=lambda m: m["path"]):
                info = tar.gettarinfo(os.path.join(dest, member["path"]), arcname=member["path"])
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mode = 0o644
                with open(os.path.join(dest, member["path"]), "rb") as handle:
                    tar.addfile(info, handle)
        os.chmod(tmp, 0o644)
        os.replace(tmp, archive)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    with open(sidecar, "w", encoding="utf-8") as handle:
        handle.write(record)
    return True, result


def load_manifest(module):
    path = module.params["manifest"]
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError) as err:
        module.fail_json(msg=f"manifest {path}: cannot be read as JSON ({err}); make it with bundle.yml.")
    if not isinstance(doc, dict) or doc.get("format") != bundle.FORMAT:
        module.fail_json(
            msg=f"manifest {path}: not a manifest of format {bundle.FORMAT}; make it again with bundle.yml."
        )
    made_by = (doc.get("collection") or {}).get("version")
    if made_by != module.params["collection_version"]:
        module.fail_json(
            msg="manifest {}: made by gpuops.cluster {}, and this is {}: the roles of another version install other "
            "packages. Make the manifest again with this version's bundle.yml.".format(
                path, made_by, module.params["collection_version"]
            )
        )
    return doc


def main():
    module = AnsibleModule(
        argument_spec={
            "manifest": {"type": "path", "required": True},
            "dest": {"type": "path"},
            "collection_version": {"type": "str", "required": True},
            "select": {"type": "list", "elements": "str", "default": []},
            "archive": {"type": "path"},
            "registry_tls_verify": {"type": "bool", "default": True},
            **HTTP_OPTIONS,
        },
        supports_check_mode=True,
    )
    doc = load_manifest(module)
    dest = module.params["dest"] or os.path.dirname(os.path.abspath(module.params["manifest"]))
    try:
        if module.params["archive"]:
            changed, result = write_archive(module, doc, dest, module.params["archive"])
            module.exit_json(changed=changed, archive=result)
        select = set(module.params["select"])
        charts = doc.get("charts") or []
        known = {r["url"] for r in doc["repositories"]} | {f["url"] for f in doc["files"]}
        known |= {c["url"] for c in charts} | {i["ref"] for c in charts for i in c["images"]}
        unknown = sorted(select - known)
        if unknown:
            module.fail_json(msg="select: {} not in the manifest.".format(", ".join(unknown)))
        fetcher = Fetcher(module, dest)
        for repo in doc["repositories"]:
            if not select or repo["url"] in select:
                fetch_repository(fetcher, repo)
        for item in doc["files"]:
            if not select or item["url"] in select:
                fetch_file(fetcher, item)
        for item in charts:
            if not select or item["url"] in select:
                fetch_chart(fetcher, item, doc)
        done = set()
        for image in (i for c in charts for i in c["images"]):
            if (not select or image["ref"] in select) and image["ref"] not in done:
                done.add(image["ref"])
                fetch_image(fetcher, image, module.params["registry_tls_verify"])
    except (bundle.BundleError, ParseError) as err:
        module.fail_json(msg=f"The bundle cannot be fetched: {err}")
    module.exit_json(changed=fetcher.fetched["files"] > 0, fetched=fetcher.fetched, present=fetcher.present)


if __name__ == "__main__":
    main()
