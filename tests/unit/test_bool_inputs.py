# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A boolean variable given on the command line (``-e imex_host_daemon=false``) is the string
"false": ansible-core 2.19 refuses a string as a condition, and the role stops ("Conditional result
(True) was derived from value of type 'str'"). A role's argument spec checks the value but does not
convert it, so each condition reads a public boolean through ``| bool``, in every role."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import ROOT

ROLES = ROOT / "roles"
CONDITIONS = ("when", "failed_when", "changed_when", "until")
# Conditions that read a public boolean bare, per role not yet converted: none left.
LEFT: dict[str, int] = {}


def booleans(role):
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return {
        name for entry in spec.values() for name, o in (entry.get("options") or {}).items() if o.get("type") == "bool"
    }


def conditions(node):
    if isinstance(node, list):
        for item in node:
            yield from conditions(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITIONS:
                yield from (c for c in (value if isinstance(value, list) else [value]) if isinstance(c, str))
            else:
                yield from conditions(value)


def bare(role):
    names = booleans(role)
    found = []
    for path in sorted((role / "tasks").glob("*.yml")):
        for condition in conditions(yaml.safe_load(path.read_text())):
            for name in names:
                pattern = r"(?<![\w.'\"])" + name + r"\b(?!\s*\|\s*(default\([^)]*\)\s*\|\s*)?bool)"
                found += [(path.name, name)] * len(re.findall(pattern, condition))
    return found


@pytest.mark.parametrize(
    "role", sorted(p.name for p in ROLES.iterdir() if (p / "meta" / "argument_specs.yml").exists())
)
def test_each_condition_reads_a_public_boolean_through_bool(role):
    found = bare(ROLES / role)
    assert len(found) <= LEFT.get(role, 0), found


def test_the_checker_finds_a_bare_boolean(tmp_path):
    role = tmp_path / "r"
    (role / "meta").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      r_on: {type: bool}\n      r_name: {type: str}\n"
    )
    (role / "tasks" / "main.yml").write_text(
        "- name: a\n  ansible.builtin.debug: {}\n  when: r_on\n"
        "- name: b\n  ansible.builtin.debug: {}\n"
        "  when: [r_on | bool, not r_on | default(true) | bool, r_name == 'x']\n"
    )
    assert bare(role) == [("main.yml", "r_on")]
