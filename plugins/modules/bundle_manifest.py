#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: bundle_manifest
short_description: Write the air-gap manifest, every package, file and key an inventory's hosts need
version_added: 1.1.0
description:
  - Takes what each host's roles ask for (O(hosts), gathered by C(playbooks/bundle.yml) from each role's
    C(tasks/artifacts.yml), which reads the variables its install tasks read) and reads each vendor
    repository's C(Packages) index once.
  - For each repository, takes what apt would install there (the newest version that matches each
    pin, and the dependencies that the same repository provides, at versions that meet every relation),
    with file name, size and SHA256 from the index; the relations the repository cannot meet come from
    the distribution's own mirror and are listed as such.
  - Downloads each repository's key and checks it against the pinned fingerprints, as
    M(gpuops.cluster.apt_source) does on a node; resolves each file's checksum (C(sha256:URL) is read).
  - Writes C(manifest.json), C(manifest.md) and C(mirrors.yml) (the group variables that point every
    upstream at a server of the bundle, C(gpuops_bundle_url)) in O(dest) when they differ. Fails, writing nothing,
    with every problem listed, each naming its variable, when a package is missing, an index cannot
    be read (an HTML error page, for example) or a key does not match.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.download
options:
  hosts:
    description:
      - "C({HOST: {platform, arch, requests}}): the platform (C(debian12), C(ubuntu2404)), the Debian
        architecture and the requests of the roles site.yml applies to the host (see
        C(plugins/module_utils/bundle.py))."
    type: dict
    required: true
  dest:
    description: Folder for C(manifest.json) and C(manifest.md); created when missing.
    type: path
    required: true
  collection_version:
    description: This collection's version, recorded so that a bundle is used with the collection that made it.
    type: str
    required: true
  charts:
    description:
      - Helm charts the inventory installs (C(playbooks/k8s_gpu_platform.yml)), each C({variable, repository,
        chart, version, values, values_variable, hosts}), with the values that play derives from the nodes.
      - Each chart's package is found in the repository's C(index.yaml) and checked against its digest; the
        images it deploys are read from its C(values.yaml) and its subcharts' with those values merged in.
    type: list
    elements: dict
    default: []
  images:
    description:
      - Resolve each image's digest with C(skopeo inspect), so that the bundle pins the image as the
        registry serves it. With V(false) the images are listed by tag only, and not fetched.
    type: bool
    default: true
  registry_tls_verify:
    description: Check the TLS certificates of the image registries (skopeo's C(--tls-verify)).
    type: bool
    default: true
notes:
  - Runs where the vendor repositories are reachable (a connected host; C(delegate_to) localhost).
seealso:
  - module: gpuops.cluster.bundle_fetch
"""

EXAMPLES = r"""
- name: Write the manifest of the inventory's hosts
  gpuops.cluster.bundle_manifest:
    hosts: "{{ bundle_hosts }}"
    dest: /srv/bundle
    collection_version: 1.4.0
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
manifest:
  description: The manifest as written to C(manifest.json).
  returned: success
  type: dict
totals:
  description: Repositories, packages, their bytes, files and keys.
  returned: success
  type: dict
  sample: {repositories: 3, packages: 41, package_bytes: 1283711, files: 2, keys: 3, charts: 1, images: 7}
path:
  description: Path of C(manifest.json).
  returned: success
  type: str
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils import bundle, chart
from ansible_collections.gpuops.cluster.plugins.module_utils.mirror import (
    HTTP_OPTIONS,
    check_keys,
    reader,
    skopeo,
    text_reader,
)


def write_if_changed(module, path, text):
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    except FileNotFoundError:
        pass
    if not module.check_mode:
        folder = os.path.dirname(path)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gpuops-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, path)
    return True


def main():
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "dict", "required": True},
            "dest": {"type": "path", "required": True},
            "collection_version": {"type": "str", "required": True},
            "charts": {"type": "list", "elements": "dict", "default": []},
            "images": {"type": "bool", "default": True},
            "registry_tls_verify": {"type": "bool", "default": True},
            **HTTP_OPTIONS,
        },
        supports_check_mode=True,
    )
    read = reader(module)
    read_text = text_reader(read)
    try:
        bundle.check_requests(module.params["hosts"])
        repos, problems = bundle.plan(module.params["hosts"], read_text)
        downloads, file_problems = bundle.files(module.params["hosts"], read_text)
    except bundle.BundleError as err:
        module.fail_json(msg=f"The manifest cannot be made: {err}")
    run = skopeo(module)
    tls = "--tls-verify={}".format(str(module.params["registry_tls_verify"]).lower())

    def digest_of(ref):
        return chart.image_digest(run("inspect", "--raw", "--retry-times", "2", tls, f"docker://{ref}"))

    charts, chart_problems = chart.plan(
        module.params["charts"], read, read_text, digest_of if module.params["images"] else None
    )
    problems += file_problems + chart_problems + check_keys(repos, read)
    if problems:
        module.fail_json(
            msg="The manifest cannot be made: {} problem(s); nothing was written.\n- {}".format(
                len(problems), "\n- ".join(problems)
            ),
            problems=problems,
        )
    doc = bundle.manifest(module.params["hosts"], repos, downloads, module.params["collection_version"], charts)
    dest = module.params["dest"]
    if not module.check_mode:
        os.makedirs(dest, mode=0o755, exist_ok=True)
    path = os.path.join(dest, "manifest.json")
    changed = write_if_changed(module, path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    changed = write_if_changed(module, os.path.join(dest, "manifest.md"), bundle.markdown(doc)) or changed
    changed = write_if_changed(module, os.path.join(dest, "mirrors.yml"), bundle.mirrors_yaml(doc)) or changed
    module.exit_json(changed=changed, manifest=doc, totals=doc["totals"], path=path)


if __name__ == "__main__":
    main()
