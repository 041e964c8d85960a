# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/site.yml walks each host through the roles it gets only: one include per role, selected
by the same tags as the role's own (--tags dcgm, --tags dcgm_prometheus, --skip-tags gpu_hw)."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT

PLAYS = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
ROLE_PLAYS = ("Set up the nodes", "Slurm", "Prove the cluster works")


def role_tags(role):
    """Every tag on a task or block of the role's task files (always excepted)."""

    def walk(items):
        for item in items or []:
            if isinstance(item, dict):
                tags = item.get("tags") or []
                yield from [tags] if isinstance(tags, str) else tags
                for key in ("block", "rescue", "always"):
                    yield from walk(item.get(key))

    found = set()
    for path in (ROOT / "roles" / role / "tasks").glob("*.yml"):
        found.update(walk(yaml.safe_load(path.read_text())))
    return found - {"always"}


def includes():
    for play in PLAYS:
        if play.get("name") in ROLE_PLAYS:
            for task in play["tasks"]:
                yield play["name"], task


def test_the_role_plays_include_each_role_and_list_none():
    plays = {play["name"]: play for play in PLAYS if play.get("name") in ROLE_PLAYS}
    assert sorted(plays) == sorted(ROLE_PLAYS)
    for play in plays.values():
        # A role listed under roles: with when: would be walked, and skipped task by task, everywhere.
        assert "roles" not in play
        assert all("ansible.builtin.include_role" in task for task in play["tasks"])
    roles = [task["ansible.builtin.include_role"]["name"].rsplit(".", 1)[1] for _play, task in includes()]
    assert roles == ["os_tuning", "ofed", "nvidia_driver", "imex", "cuda", "cudnn", "nccl", "sharp",
                     "container_toolkit", "dcgm", "mig", "k8s_node", "slurm", "validate"]  # fmt: skip


@pytest.mark.parametrize("play, task", list(includes()), ids=lambda value: value if isinstance(value, str) else "")
def test_an_include_is_selected_by_every_tag_of_its_role_and_decided_per_host(play, task):
    include = task["ansible.builtin.include_role"]
    role = include["name"].rsplit(".", 1)[1]
    # --tags ROLE and --tags ROLE_SUBTAG select the include; every task inside carries ROLE.
    assert set(task["tags"]) == {role} | role_tags(role), role
    assert task["tags"][0] == role
    assert include["apply"] == {"tags": [role]}
    # Its defaults stay visible to the roles after it, as those of a play's roles are.
    assert include["public"] is True
    assert role in task["when"] or (role == "validate" and task["when"] == "site_validate | default(true)")
