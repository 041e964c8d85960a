# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The user-facing documents: the README is a user guide in the order a user needs it, with short
lines; every relative link of the README, docs/ and the role READMEs reaches a file and a heading
that exist; each troubleshooting entry quotes a message the collection (or ansible-core) really
prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import ansible
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("roles/*/README.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks" / "main.yml").exists())
# The roles' tasks call community.general, which the core matrix's environments (ansible-core alone)
# do not carry.
COMMUNITY_GENERAL = any((Path(p) / "ansible_collections" / "community" / "general").is_dir() for p in sys.path)


def slug(heading):
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose(path):
    """(line number, line) outside code fences."""
    fence = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```") or line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield number, line


def anchors(path):
    return {slug(line.lstrip("#")) for _n, line in prose(path) if re.match(r"#{1,6} ", line)}


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(path):
    broken = []
    for number, line in prose(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _hash, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f"line {number}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"line {number}: {target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, f"{path.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_readme_is_a_user_guide_in_the_order_a_user_needs():
    headings = [line[3:] for _n, line in prose(README) if line.startswith("## ")]
    order = ["Quick start", "Your cluster in five steps", "Operating it", "Troubleshooting", "Support matrix"]
    assert [h for h in headings if h in order] == order, headings
    first = next(n for n, line in prose(README) if line == "## Your cluster in five steps")
    assert first < 120, f"'Your cluster' starts at line {first}: keep what comes before it short"
    assert len(README.read_text().splitlines()) < 400


def test_readme_prose_lines_are_short():
    long = [f"line {n}: {len(line)} characters" for n, line in prose(README)
            if len(line) > 200 and not line.startswith("|")]  # fmt: skip
    assert not long, long


def _troubleshooting():
    text = README.read_text()
    section = text.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\*\*\d+\. .*?`([^`]+)`", section, re.M)


def test_troubleshooting_has_ten_entries():
    assert len(_troubleshooting()) >= 10


@pytest.mark.parametrize("phrase", _troubleshooting())
def test_each_troubleshooting_message_is_one_really_printed(phrase):
    """The phrase an entry is titled by is in the collection's code or ansible-core's (the two that
    print them), so an entry cannot outlive its message."""
    words = [w for w in re.split(r"\.\.\.|NODE|\bN\b", phrase) if w.strip()]
    sources = [*ROOT.glob("plugins/**/*.py"), *ROOT.glob("roles/**/*.yml"), *ROOT.glob("roles/*/files/*.py"),
               *ROOT.glob("playbooks/**/*.yml"), *ROOT.glob("extensions/**/*.yml"),
               *Path(ansible.__file__).parent.glob("**/*.py")]  # fmt: skip
    # Whitespace as one space, and a string literal split over lines ('... ' 'requirements') joined.
    texts = [re.sub(r"(['\"]) \1", "", " ".join(p.read_text(errors="replace").split())) for p in sources]
    missing = [w.strip() for w in words if not any(w.strip() in t for t in texts)]
    assert not missing, f"{phrase!r}: {missing} printed nowhere in the collection or ansible-core"


def _examples(role):
    """The example playbooks (YAML blocks with plays) of a role's README."""
    text = (ROOT / "roles" / role / "README.md").read_text()
    blocks = re.findall(r"^```ya?ml\n(.*?)^```", text, re.M | re.S)
    return [yaml.safe_load(b) for b in blocks if re.search(r"^- (name: .*\n  )?hosts:", b, re.M)]


def _options(role):
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return {name for point in specs.values() for name in (point.get("options") or {})}


@pytest.mark.parametrize("role", ROLES)
def test_every_role_readme_has_an_example_playbook_of_the_role(role):
    """A play that uses the role, whose role variables are all the role's own (its argument spec's)."""
    plays = [play for example in _examples(role) for play in example]
    using = []
    for play in plays:
        assert isinstance(play, dict) and play.get("hosts"), play
        for entry in play.get("roles") or []:
            if entry == f"gpuops.cluster.{role}":
                using.append({})
            elif isinstance(entry, dict) and entry.get("role") == f"gpuops.cluster.{role}":
                using.append(entry.get("vars") or {})
        for task in play.get("tasks") or []:
            include = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role") or {}
            if include.get("name") == f"gpuops.cluster.{role}":
                using.append(task.get("vars") or {})
    assert using, f"roles/{role}/README.md has no example play that uses gpuops.cluster.{role}"
    unknown = {name for variables in using for name in variables} - _options(role)
    assert not unknown, f"roles/{role}/README.md's example sets {unknown}, which the role does not take"


@pytest.mark.skipif(not COMMUNITY_GENERAL, reason="the roles' tasks need community.general")
def test_the_example_playbooks_pass_ansible_playbook_syntax_check(tmp_path):
    """Every role's example, as written, in one playbook: ansible-playbook --syntax-check loads each
    play, its roles and their tasks."""
    plays = [play for role in ROLES for example in _examples(role) for play in example]
    book = tmp_path / "examples.yml"
    book.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run(["ansible-playbook", "-i", "localhost,", "--syntax-check", str(book)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
