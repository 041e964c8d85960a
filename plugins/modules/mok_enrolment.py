#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: mok_enrolment
short_description: Stage a module signing certificate for enrolment as a Machine Owner Key
version_added: 1.1.0
description:
  - Asks C(mokutil --test-key) whether O(certificate) is enrolled in shim's MOK list (or the
    firmware's db), already staged for enrolment, or neither.
  - With O(password) and a certificate that is neither, stages it with C(mokutil --import), giving
    the one-time password on mokutil's standard input (twice, as it asks), never on a command line.
    shim's MokManager asks for that password at the console on the next boot; only then is the key
    enrolled. This module never reboots.
  - Also reads C(mokutil --sb-state).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Says whether it would stage the certificate, and stages nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  certificate:
    description: The certificate in DER form, as mokutil takes it.
    type: path
    required: true
  password:
    description:
      - The one-time password MokManager asks for at the console. Without it a certificate that is not
        enrolled is only reported.
    type: str
requirements:
  - mokutil
seealso:
  - module: gpuops.cluster.nvidia_modules
"""

EXAMPLES = r"""
- name: Stage the node's module signing key for enrolment
  gpuops.cluster.mok_enrolment:
    certificate: /var/lib/gpuops/mok/mok.der
    password: "{{ vault_mok_password }}"
  register: mok
  no_log: true
"""

RETURN = r"""
state:
  description:
    - After the run. V(enrolled) (the kernel trusts the key), V(pending) (staged; enrolled at the console on
      the next boot) or V(not_enrolled) (no password was given).
  returned: always
  type: str
  sample: pending
imported:
  description: Whether this run staged the certificate (in check mode, whether it would).
  returned: always
  type: bool
secure_boot:
  description: V(enabled), V(disabled) or V(unknown), from C(mokutil --sb-state).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import first_line, parse_or_fail, run
from ansible_collections.gpuops.cluster.plugins.module_utils.secureboot import (
    parse_mokutil_sb_state,
    parse_mokutil_test_key,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "certificate": {"type": "path", "required": True},
            "password": {"type": "str", "no_log": True},
        },
        supports_check_mode=True,
    )
    certificate = module.params["certificate"]
    password = module.params["password"]
    if password is not None and (not 1 <= len(password) <= 256 or "\n" in password):
        module.fail_json(msg="password: MokManager takes a one-line password of 1 to 256 characters.")
    mokutil = module.get_bin_path("mokutil")
    if mokutil is None:
        module.fail_json(msg="mokutil is not installed (package mokutil); it stages the key for shim's MokManager.")
    rc, out, err = run(module, [mokutil, "--sb-state"])
    secure_boot = parse_mokutil_sb_state(out + err)
    argv = [mokutil, "--test-key", certificate]
    rc, out, err = run(module, argv)
    if not out.strip():
        module.fail_json(
            msg=f"`{' '.join(argv)}` answered nothing (rc {rc}): {first_line(err) or 'no error'}. EFI variables "
            "must be readable (a UEFI boot, efivarfs mounted) to stage a Machine Owner Key."
        )
    state = parse_or_fail(module, parse_mokutil_test_key, out, argv)
    imported = False
    if state == "not_enrolled" and password:
        imported = True
        if not module.check_mode:
            argv = [mokutil, "--import", certificate]
            rc, out, err = module.run_command(argv, data=f"{password}\n{password}", binary_data=False)
            if rc != 0:
                module.fail_json(msg=f"`{' '.join(argv)}` failed (rc {rc}): {first_line(err, out)}", rc=rc)
        state = "pending"
    module.exit_json(changed=imported, state=state, imported=imported, secure_boot=secure_boot)


if __name__ == "__main__":
    main()
