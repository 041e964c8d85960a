#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: input_rules
short_description: Check a role's input rules on the controller, all of them in one answer
version_added: 1.0.0
description:
  - Each rule is a condition the role's variables and the host's facts must meet, with the message
    that names the variable and the fix. Every broken rule is listed in one failure, so one run shows
    everything to change.
  - Each role keeps its rules in C(tasks/inputs.yml). The preflight role runs the rules of every role
    a run applies to a host (O(role) names it) before any host changes; a role used on its own runs
    its rules itself.
  - Warnings, such as a download whose checksum check was turned off, are printed as Ansible
    warnings on every run.
  - An action that runs on the controller only; it never connects to the host and changes nothing.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
options:
  role:
    description: The role the rules belong to; messages start with it.
    type: str
    required: true
  rules:
    description:
      - The rules. Each item has C(ok), true when the rule holds, and C(msg), what to change when it does not.
    type: list
    elements: dict
    default: []
  warnings:
    description: Texts to print as warnings; empty items are left out, so a template can give one conditionally.
    type: list
    elements: str
    default: []
  downloads:
    description:
      - What the role downloads and runs, builds or installs as root. Each one must be checked against a
        SHA-2 checksum, C(sha256:DIGEST) or C(sha256:URL) of a checksum file as M(ansible.builtin.get_url)
        takes it, or be knowingly opted out with the value C(unverified), which is warned about on every run.
      - Each item has C(variable) (the checksum variable's name), C(value) (its value), C(url) (what is
        downloaded), C(use) (what happens to it, for the messages) and optionally C(needed) (false when this
        host makes no such download).
    type: list
    elements: dict
    default: []
seealso:
  - module: ansible.builtin.assert
"""

EXAMPLES = r"""
- name: Check the role's inputs
  gpuops.cluster.input_rules:
    role: dcgm
    rules:
      - ok: "{{ ansible_facts.os_family == 'Debian' }}"
        msg: The dcgm role needs apt; this node is {{ ansible_facts.os_family }}.
      - ok: "{{ dcgm_exporter_address is search(':[0-9]+$') }}"
        msg: dcgm_exporter_address must be host:port or :port (got {{ dcgm_exporter_address }}).
    downloads:
      - variable: dcgm_exporter_checksum
        value: "{{ dcgm_exporter_checksum }}"
        url: "{{ dcgm_exporter_url }}"
        use: runs as the dcgm-exporter service
        needed: "{{ dcgm_exporter_source == 'url' }}"
    warnings:
      - "{{ 'dcgm_exporter_address listens on every address' if dcgm_exporter_address is match(':') else '' }}"
"""

RETURN = r"""
errors:
  description: The messages of the rules that do not hold, in the order given.
  returned: always
  type: list
  elements: str
role:
  description: O(role).
  returned: always
  type: str
"""
