# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: mok_problems
short_description: Why a module signing key pair from the inventory cannot serve
version_added: 1.1.0
description:
  - Reads a private key and its X.509 certificate (both PEM, as a vault holds them) on the controller
    and says why DKMS could not sign with them, or the kernel would not trust what it signs.
  - One given without the other; either unreadable (an encrypted key among them, as DKMS signs without
    a passphrase); the certificate expired or not valid yet on O(today); a key that is not the
    certificate's; a subject without a common name (what C(modinfo) shows as the signer).
  - Both empty is no problem; the C(nvidia_driver) role then makes a key pair on each node.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The private key, PEM.
    type: str
    required: true
  certificate:
    description: The certificate, PEM.
    type: str
    required: true
  today:
    description: The day the certificate's dates are checked against, YYYY-MM-DD.
    type: str
    required: true
  key_variable:
    description: The key's variable, for the messages.
    type: str
    default: nvidia_driver_mok_key
  certificate_variable:
    description: The certificate's variable, for the messages.
    type: str
    default: nvidia_driver_mok_certificate
"""

EXAMPLES = r"""
- name: Refuse a key pair DKMS cannot sign with
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems | join(' ') }}"
  vars:
    __problems: >-
      {{ nvidia_driver_mok_key | gpuops.cluster.mok_problems(certificate=nvidia_driver_mok_certificate,
         today='2026-11-29') }}
"""

RETURN = r"""
_value:
  description: The problems, each a sentence naming the variable and the fix; empty when the pair serves.
  type: list
  elements: str
"""

import datetime

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.secureboot import certificate_problems


def mok_problems(
    key,
    certificate,
    today,
    key_variable="nvidia_driver_mok_key",
    certificate_variable="nvidia_driver_mok_certificate",
):
    try:
        day = datetime.date.fromisoformat(str(today))
    except ValueError as exc:
        raise AnsibleFilterError(f"mok_problems: today is {today!r}, not a date YYYY-MM-DD") from exc
    return certificate_problems(str(key or ""), str(certificate or ""), day, key_variable, certificate_variable)


class FilterModule:
    def filters(self):
        return {"mok_problems": mok_problems}
