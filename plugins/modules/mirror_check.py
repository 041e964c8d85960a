#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: mirror_check
short_description: Check that the configured mirrors hold every package and file a run will install, before any change
version_added: 1.1.0
description:
  - Takes what each host's roles will install (O(hosts), as M(gpuops.cluster.bundle_manifest) takes it;
    the preflight role gathers it from each role's C(tasks/artifacts.yml)) and reads each configured
    repository's C(Packages) index once.
  - Every requested package must be there at its pinned version, with the dependencies the same
    repository provides, and its file must be on the server; every file and checksum list must be
    there; each repository's key must have the pinned fingerprint.
  - With O(manifest), each package must also have the SHA256 the manifest recorded when the bundle was
    made, and the manifest must come from this collection's version.
  - Returns every problem, grouped by the variable that points at the mirror, so that nothing is left
    to a package manager error halfway through a run. Changes nothing.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.download
options:
  hosts:
    description: "C({HOST: {platform, arch, requests}}), as M(gpuops.cluster.bundle_manifest) takes it."
    type: dict
    required: true
  only_mirrors:
    description:
      - Check only what comes from hosts other than the vendors' own (developer.download.nvidia.com,
        nvidia.github.io, linux.mellanox.com, content.mellanox.com, github.com, pkgs.k8s.io), that is,
        what the inventory points at a mirror.
    type: bool
    default: false
  manifest:
    description: A C(manifest.json) of the bundle the mirror serves; its SHA256s must match the mirror's.
    type: path
  collection_version:
    description: This collection's version (required with O(manifest)).
    type: str
  fail_on_error:
    description: Fail when a problem is found; the preflight role sets false to report it with its own checks.
    type: bool
    default: true
notes:
  - The preflight role runs it once per run, on the first host of the play, so the mirrors are read
    as the nodes reach them.
seealso:
  - module: gpuops.cluster.bundle_manifest
  - module: gpuops.cluster.bundle_fetch
"""

EXAMPLES = r"""
- name: Check the mirrors for the hosts of this run
  gpuops.cluster.mirror_check:
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'gpuops_bundle_host'))) }}"
    only_mirrors: true
  run_once: true
"""

RETURN = r"""
problems:
  description: Each problem as the preflight role reports it (severity, variable, message, fix).
  returned: always
  type: list
  elements: dict
checked:
  description: How many repositories, packages and files were checked.
  returned: success
  type: dict
  sample: {repositories: 3, packages: 25, files: 2}
"""

import json
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils import bundle
from ansible_collections.gpuops.cluster.plugins.module_utils.mirror import (
    HTTP_OPTIONS,
    check_keys,
    present,
    reader,
    text_reader,
)

VENDOR_HOSTS = (
    "developer.download.nvidia.com",
    "nvidia.github.io",
    "linux.mellanox.com",
    "content.mellanox.com",
    "github.com",
    "pkgs.k8s.io",
)


def _mirrored(url):
    host = (urlsplit(url or "").hostname or "").lower()
    return not any(host == vendor or host.endswith("." + vendor) for vendor in VENDOR_HOSTS)


def keep_mirrored(hosts):
    """The requests of ``hosts`` that point at a site mirror, not at a vendor."""
    out = {}
    for host, data in hosts.items():
        requests = []
        for request in data.get("requests") or []:
            url = request.get("repository") if request.get("kind") == "apt" else request.get("url")
            if request.get("kind") == "os" or _mirrored(url):
                requests.append(request)
        out[host] = dict(data, requests=requests)
    return out


def problem(variable, message, fix):
    return {"severity": "error", "variable": variable, "message": message, "fix": fix}


def by_manifest(module, path):
    """``{(package, version, architecture): sha256}`` of a manifest, or a failure naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError) as err:
        module.fail_json(msg=f"manifest {path}: cannot be read as JSON ({err}).", problems=[])
    made_by = (doc.get("collection") or {}).get("version") if isinstance(doc, dict) else None
    if made_by != module.params["collection_version"]:
        module.fail_json(
            msg=f"manifest {path}: made by gpuops.cluster {made_by}, and this is "
            f"{module.params['collection_version']}; make the bundle again with this version's bundle.yml.",
            problems=[],
        )
    return {
        (p["package"], p["version"], p["architecture"]): p["sha256"]
        for repo in doc.get("repositories") or []
        for p in repo.get("packages") or []
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "dict", "required": True},
            "only_mirrors": {"type": "bool", "default": False},
            "manifest": {"type": "path"},
            "collection_version": {"type": "str"},
            "fail_on_error": {"type": "bool", "default": True},
            **HTTP_OPTIONS,
        },
        required_by={"manifest": "collection_version"},
        supports_check_mode=True,
    )
    hosts = module.params["hosts"]
    if module.params["only_mirrors"]:
        hosts = keep_mirrored(hosts)
    read = reader(module)
    read_text = text_reader(read)
    try:
        repos, index_problems = bundle.plan(hosts, read_text)
        downloads, file_problems = bundle.files(hosts, read_text)
    except bundle.BundleError as err:
        module.fail_json(msg=f"The mirrors cannot be checked: {err}", problems=[])
    problems = []
    fix = "put it on the mirror (bundle.yml fetches it into the bundle), or point the variable at a mirror that has it."
    for line in index_problems + file_problems:
        variable = line.split(" ", 1)[0]
        problems.append(problem(variable, line, fix))
    for line in check_keys(repos, read):
        problems.append(problem(line.split(" ", 1)[0].rstrip(":"), line, "serve the key the variable pins."))
    recorded = by_manifest(module, module.params["manifest"]) if module.params["manifest"] else None
    for repo in repos:
        for package in repo["packages"]:
            where = "{} ({})".format(repo["variable"], repo["url"])
            url = bundle.join_url(repo["url"], package["filename"])
            ok, status = present(module, url)
            if not ok:
                problems.append(
                    problem(
                        repo["variable"],
                        f"{where}: {package['package']} {package['version']} is in the index, and its file "
                        f"{package['filename']} is not on the server ({status}).",
                        fix,
                    )
                )
            key = (package["package"], package["version"], package["architecture"])
            if recorded is not None and key in recorded and recorded[key] != package["sha256"]:
                problems.append(
                    problem(
                        repo["variable"],
                        f"{where}: {package['package']} {package['version']} has SHA256 {package['sha256']} there, "
                        f"and {recorded[key]} in the manifest.",
                        "serve the bundle the manifest describes, or make the bundle again.",
                    )
                )
    for item in downloads:
        ok, status = present(module, item["url"])
        if not ok:
            problems.append(
                problem(item["variable"], f"{item['variable']}: {item['url']} is not there ({status}).", fix)
            )
    checked = {
        "repositories": len(repos),
        "packages": sum(len(r["packages"]) for r in repos),
        "files": len(downloads),
    }
    if problems and module.params["fail_on_error"]:
        module.fail_json(
            msg="The mirrors lack what this run installs: {} problem(s).\n- {}".format(
                len(problems), "\n- ".join(p["message"] for p in problems)
            ),
            problems=problems,
            checked=checked,
        )
    module.exit_json(changed=False, problems=problems, checked=checked)


if __name__ == "__main__":
    main()
