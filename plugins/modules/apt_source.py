#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: apt_source
short_description: Add a vendor's apt repository with a signing key checked against its fingerprint, in one call
version_added: 1.0.0
description:
  - Downloads the repository's public key from O(key_url) and reads its keys (binary or ASCII
    armour, without gpg). Every primary key in the file must be one of O(key_fingerprint), because
    apt trusts every key of a C(Signed-By) keyring; a key file that carries another key, or a
    mirror that serves another key, is refused before anything is written.
  - The file is read whole, every armour block and every packet, as gpg and apt read it; text
    outside armour blocks, a block that is not a public key, or a packet that is not part of a
    public key is refused.
  - Writes a keyring built from the checked packets alone (each pinned key with its user IDs,
    signatures and subkeys), never the bytes as served, to C(/etc/apt/keyrings/NAME.asc)
    (armoured) or C(NAME.gpg) (binary), and the repository to
    C(/etc/apt/sources.list.d/NAME.sources) in deb822 form with C(Signed-By) pointing at that
    keyring, each only when it differs.
  - When either changed, refreshes the package lists of this repository alone (C(apt-get update)
    limited to its sources file), so its packages are known to the next task.
  - In check mode the key is still downloaded and checked; nothing is written, and RV(pending)
    says whether the repository would be new or changed, so that the tasks after it can skip what
    apt cannot know yet.
  - O(state=absent) removes the sources file and the keyring. apt reads the lists of configured
    repositories only, so no refresh is needed.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.dpkg
  - gpuops.cluster.root
options:
  name:
    description: Name of the repository; the files are C(NAME.sources) and C(NAME.asc) or C(NAME.gpg).
    type: str
    required: true
  state:
    description: V(present) adds or updates the repository; V(absent) removes its files.
    type: str
    choices: [present, absent]
    default: present
  uris:
    description: The repository's URIs (C(URIs:)). Required with O(state=present).
    type: list
    elements: str
  suites:
    description: C(Suites:), such as V(/) or V(./) for a flat repository, or V(bookworm).
    type: list
    elements: str
    default: ["/"]
  components:
    description: C(Components:); leave empty for a flat repository (a suite ending in C(/)).
    type: list
    elements: str
    default: []
  types:
    description: C(Types:).
    type: list
    elements: str
    default: [deb]
  architectures:
    description: C(Architectures:); empty means apt's default.
    type: list
    elements: str
    default: []
  key_url:
    description: Where the repository's public key is (http, https or file). Required with O(state=present).
    type: str
  key_fingerprint:
    description:
      - Full fingerprints (40 hexadecimal digits for version 4 keys, 64 for version 6) of the keys
        the repository may be signed with. Spaces and a C(0x) prefix are allowed.
      - Every primary key in the downloaded file must be in this list. Read a key's fingerprint
        with C(gpg --show-keys --with-fingerprint FILE) and compare it with the vendor's published one.
      - Required with O(state=present).
    type: list
    elements: str
  fingerprint_variable:
    description: The inventory variable that sets O(key_fingerprint), named in the error when the key does not match.
    type: str
  update_cache:
    description: Refresh this repository's package lists when its key or source changed.
    type: bool
    default: true
  validate_certs:
    description: Check the TLS certificate of an https O(key_url).
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the key download.
    type: int
    default: 30
seealso:
  - module: ansible.builtin.deb822_repository
  - module: gpuops.cluster.apt_packages
"""

EXAMPLES = r"""
- name: Add NVIDIA's CUDA repository for Debian 12
  gpuops.cluster.apt_source:
    name: nvidia-cuda
    uris: [https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/]
    suites: ["/"]
    key_url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    key_fingerprint: [EB693B3035CD5710E231E123A4B469963BF863CC]
    fingerprint_variable: cuda_repository_key_fingerprint
  register: cuda_source

- name: Install from it, unless check mode only pretends the repository
  gpuops.cluster.apt_packages:
    name: [cuda-toolkit-12-8]
  when: not cuda_source.pending

- name: Remove a repository
  gpuops.cluster.apt_source:
    name: mlnx-ofed
    state: absent
"""

RETURN = r"""
keyring:
  description: The keyring file the source trusts.
  returned: with state present
  type: str
  sample: /etc/apt/keyrings/nvidia-cuda.asc
filename:
  description: The sources file.
  returned: always
  type: str
  sample: /etc/apt/sources.list.d/nvidia-cuda.sources
fingerprints:
  description: Fingerprints of the primary keys in the downloaded key file.
  returned: with state present
  type: list
  elements: str
key_changed:
  description: Whether the keyring was (or would be) written or removed.
  returned: always
  type: bool
source_changed:
  description: Whether the sources file was (or would be) written or removed.
  returned: always
  type: bool
cache_updated:
  description: Whether this repository's package lists were refreshed.
  returned: always
  type: bool
pending:
  description:
    - True in check mode when the repository would change, so apt cannot know its packages yet on
      this run. Always false outside check mode.
  returned: always
  type: bool
"""

import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.host import ROOT_OPTION, Host
from ansible_collections.gpuops.cluster.plugins.module_utils.openpgp import (
    MAX_KEY_FILE,
    armour,
    is_armored,
    normalize_fingerprint,
    pinned_keyring,
)

KEYRINGS = "/etc/apt/keyrings"
SOURCES = "/etc/apt/sources.list.d"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def render_source(name, params, keyring):
    """The deb822 stanza: X-Repolib-Name first, then the fields in alphabetical order."""
    fields = {
        "Types": params["types"],
        "URIs": params["uris"],
        "Suites": params["suites"],
        "Components": params["components"],
        "Architectures": params["architectures"],
        "Signed-By": [keyring],
    }
    lines = [f"X-Repolib-Name: {name}"]
    lines += [f"{key}: {' '.join(value)}" for key, value in sorted(fields.items()) if value]
    return "\n".join(lines) + "\n"


def download(module, url):
    response, info = fetch_url(module, url, timeout=module.params["timeout"])
    if response is None or info.get("status") not in (200, None):
        module.fail_json(
            msg="key_url {}: the download failed ({} {}). Check the URL and that the node reaches it "
            "(a site mirror's key URL goes in the role's *_key_url variable).".format(
                url, info.get("status"), info.get("msg", "")
            )
        )
    data = response.read(MAX_KEY_FILE + 1)
    return data


def write(module, path, data, mode):
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gpuops-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, mode)
    module.atomic_move(tmp, path)


def check_key(module, data, expected, url):
    """The keyring to install (the pinned keys' packets only) and the primary fingerprints, or a failure."""
    variable = module.params["fingerprint_variable"] or "key_fingerprint"
    try:
        checked = pinned_keyring(data, expected)
    except ParseError as err:
        module.fail_json(
            msg=f"key_url {url} is not an OpenPGP public key file: {err.reason}. Nothing was written. Point it "
            "at the repository's key, as the vendor publishes it."
        )
    primaries = [k["fingerprint"] for k in checked["keys"] if k["primary"]]
    if checked["unexpected"] or not primaries:
        module.fail_json(
            msg="key_url {url} holds the key(s) {found}, not only {expected} ({var}); {other} not pinned. Nothing "
            "was written. If the vendor rotated its key, confirm the new fingerprint from its published notice and "
            "set {var}; if not, the URL or the mirror serves a key that must not be trusted.".format(
                url=url,
                found=", ".join(primaries) or "none",
                expected=", ".join(expected),
                var=variable,
                other=", ".join(checked["unexpected"]) or "no key is",
            ),
            fingerprints=primaries,
        )
    return checked["keyring"], primaries


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "uris": {"type": "list", "elements": "str"},
            "suites": {"type": "list", "elements": "str", "default": ["/"]},
            "components": {"type": "list", "elements": "str", "default": []},
            "types": {"type": "list", "elements": "str", "default": ["deb"]},
            "architectures": {"type": "list", "elements": "str", "default": []},
            "key_url": {"type": "str", "no_log": False},
            "key_fingerprint": {"type": "list", "elements": "str", "no_log": False},
            "fingerprint_variable": {"type": "str"},
            "update_cache": {"type": "bool", "default": True},
            "validate_certs": {"type": "bool", "default": True},
            "timeout": {"type": "int", "default": 30},
            **ROOT_OPTION,
        },
        required_if=[("state", "present", ("uris", "key_url", "key_fingerprint"))],
        supports_check_mode=True,
    )
    params = module.params
    name = params["name"]
    if not NAME.fullmatch(name):
        module.fail_json(msg=f"name {name!r}: use letters, digits, '.', '_' and '-' only (it names the files).")
    host = Host(module)
    source_path = host.path(f"{SOURCES}/{name}.sources")
    keyrings = {ext: host.path(f"{KEYRINGS}/{name}.{ext}") for ext in ("asc", "gpg")}
    result = {
        "changed": False,
        "filename": f"{SOURCES}/{name}.sources",
        "key_changed": False,
        "source_changed": False,
        "cache_updated": False,
        "pending": False,
    }

    if params["state"] == "absent":
        gone = [path for path in [source_path, *keyrings.values()] if os.path.lexists(path)]
        result["source_changed"] = source_path in gone
        result["key_changed"] = any(path in gone for path in keyrings.values())
        result["changed"] = bool(gone)
        if gone and not module.check_mode:
            for path in gone:
                os.remove(path)
        module.exit_json(**result)

    expected = []
    for value in params["key_fingerprint"]:
        normal = normalize_fingerprint(value)
        if normal is None:
            module.fail_json(
                msg="{} lists {!r}: give the key's full fingerprint (40 hexadecimal digits, or 64 for a "
                "version 6 key), not a short key ID; gpg --show-keys --with-fingerprint FILE prints it.".format(
                    params["fingerprint_variable"] or "key_fingerprint", value
                )
            )
        expected.append(normal)
    if not expected:
        module.fail_json(
            msg="{} is empty: give the fingerprint of the key that signs {} (gpg --show-keys --with-fingerprint "
            "FILE prints it; compare it with the vendor's published one).".format(
                params["fingerprint_variable"] or "key_fingerprint", params["key_url"]
            )
        )
    for field in ("uris", "suites", "types", "components", "architectures"):
        bad = [v for v in params[field] if not v or any(c.isspace() for c in v)]
        if bad or (field in ("uris", "suites", "types") and not params[field]):
            module.fail_json(msg=f"{field} {params[field]!r}: each value must be one word without spaces.")

    url = params["key_url"]
    data = download(module, url)
    keyring_data, result["fingerprints"] = check_key(module, data, expected, url)
    # The keyring holds the checked packets only, in the form the vendor serves (armour or binary).
    ext = "asc" if is_armored(data) else "gpg"
    if ext == "asc":
        keyring_data = armour(keyring_data)
    keyring = keyrings[ext]
    result["keyring"] = f"{KEYRINGS}/{name}.{ext}"
    stale = keyrings["gpg" if ext == "asc" else "asc"]

    current_key = host.read(f"{KEYRINGS}/{name}.{ext}", binary=True)
    key_changed = current_key != keyring_data or os.path.lexists(stale)
    text = render_source(name, params, result["keyring"])
    current_source = host.read(f"{SOURCES}/{name}.sources")
    source_changed = current_source != text
    result.update(key_changed=key_changed, source_changed=source_changed, changed=key_changed or source_changed)
    if module._diff and source_changed:
        result["diff"] = {"before": current_source or "", "after": text, "after_header": result["filename"]}

    if not result["changed"]:
        module.exit_json(**result)
    if module.check_mode:
        result["pending"] = True
        module.exit_json(**result)

    if current_key != keyring_data:
        write(module, keyring, keyring_data, 0o644)
    if os.path.lexists(stale):
        os.remove(stale)
    if source_changed:
        write(module, source_path, text.encode(), 0o644)
    if params["update_cache"] and host.root == "/":
        apt_get = module.get_bin_path("apt-get", required=True)
        argv = [
            apt_get,
            "-q",
            "-o",
            f"Dir::Etc::sourcelist={source_path}",
            "-o",
            "Dir::Etc::sourceparts=-",
            "-o",
            "APT::Get::List-Cleanup=0",
            "update",
        ]
        rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})
        if rc != 0 or re.search(r"^(E:|Err:)", out + "\n" + err, re.M):
            # Taken back out, so that the next run sees the change again and retries the refresh.
            os.remove(source_path)
            module.fail_json(
                msg="apt-get update of the repository {} failed, so its sources file was taken out again: {}. "
                "Check that {} serves it and is signed by the checked key.".format(
                    name, (err or out).strip()[-1500:], ", ".join(params["uris"])
                ),
                cmd=argv,
                rc=rc,
                stdout=out,
                stderr=err,
            )
        result["cache_updated"] = True
    module.exit_json(**result)


if __name__ == "__main__":
    main()
