# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's own metadata, its checkout link, and the built tarball."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT


def test_galaxy_identity():
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"]) == ("gpuops", "cluster")
    assert re.fullmatch(r"\d+\.\d+\.\d+", galaxy["version"])
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"].startswith(">=")


def test_checkout_link_resolves_to_the_repository_root():
    link = ROOT / ".collections" / "ansible_collections" / "gpuops" / "cluster"
    assert link.is_symlink()
    assert link.resolve() == ROOT


def test_every_requirement_is_pinned():
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    reqs = [line for line in lines if line]
    assert reqs
    for req in reqs:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+(\[[a-z,]+\])?==[0-9][0-9A-Za-z.]*", req), req


def test_built_tarball_leaves_out_local_state_and_installs(tmp_path):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    subprocess.run(
        ["ansible-galaxy", "collection", "build", "--output-path", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        env=env,
    )
    tarball = next(tmp_path.glob("gpuops-cluster-*.tar.gz"))
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert "MANIFEST.json" in names
    for shipped in (
        "LICENSE",
        "meta/runtime.yml",
        "plugins/modules/gpu_facts.py",
        "roles/slurm/tasks/main.yml",
        "playbooks/site.yml",
        "inventories/hk/hosts.yml",
        "changelogs/changelog.yaml",
    ):
        assert shipped in names, shipped
    # The development harness (simulator, scenarios, toolchain pins) and local state stay out.
    for forbidden in (
        ".venv",
        ".cache",
        ".collections",
        ".git",
        ".ci",
        "build",
        ".hypothesis",
        "validate-report",
        "molecule",
        "tests",
        "bench",
        "Makefile",
        "requirements.txt",
        "ansible.cfg",
        "site.yml",
    ):
        assert not [n for n in names if n == forbidden or n.startswith(forbidden + "/")], forbidden
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    dest = tmp_path / "installed"
    subprocess.run(
        # Its dependencies are make galaxy's business (offline, against galaxy.yml's bounds).
        ["ansible-galaxy", "collection", "install", "--force", "--no-deps", "-p", str(dest), str(tarball)],
        check=True,
        capture_output=True,
        env=env,
    )
    listing = subprocess.run(
        ["ansible-galaxy", "collection", "list", "-p", str(dest), "gpuops.cluster"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert re.search(r"gpuops\.cluster\s+\d+\.\d+\.\d+", listing)
    installed = dest / "ansible_collections" / "gpuops" / "cluster"
    assert (installed / "meta" / "runtime.yml").read_text() == (ROOT / "meta" / "runtime.yml").read_text()


def _plugin_versions_added():
    """Every documented plugin's name, type and version_added, read from its DOCUMENTATION."""
    found = {}
    for path in sorted((ROOT / "plugins").glob("*/*.py")):
        text = path.read_text()
        match = re.search(r'^DOCUMENTATION = r?"""(.*?)"""', text, re.S | re.M)
        if match is None:
            continue
        docs = yaml.safe_load(match.group(1))
        kind = path.parent.name.rstrip("s")
        found[path.stem] = (kind, str(docs.get("version_added", "")))
    return found


def test_version_added_matches_the_release_that_brought_the_plugin():
    """A plugin of a release says that release; one not released yet says a version above the last.

    The changelog's releases are what was released (antsibull-changelog lists new modules and plugins
    per release), so a version_added that disagrees with them misleads the docsite's "added in".
    """
    changelog = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())
    released = {}
    for version, release in changelog["releases"].items():
        for module in release.get("modules", []):
            released[module["name"]] = version
        for plugins in release.get("plugins", {}).values():
            for plugin in plugins:
                released[plugin["name"]] = version
    last = max(changelog["releases"], key=lambda v: tuple(int(p) for p in v.split(".")))
    plugins = _plugin_versions_added()
    assert len(plugins) > 40
    for name, (kind, added) in plugins.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", added), f"{kind} {name}: version_added {added!r}"
        if name in released:
            assert added == released[name], f"{kind} {name}: released in {released[name]}, says {added}"
        else:
            assert tuple(map(int, added.split("."))) > tuple(map(int, last.split("."))), (
                f"{kind} {name} is in no release, so its version_added ({added}) must be above {last}"
            )


# site.yml's roles call community.general, which the core matrix's environments (ansible-core alone)
# do not carry; make unit's (the ansible package) does.
COMMUNITY_GENERAL = any((Path(p) / "ansible_collections" / "community" / "general").is_dir() for p in sys.path)


@pytest.mark.skipif(not COMMUNITY_GENERAL, reason="site.yml's roles need community.general")
def test_the_seed_command_runs_from_a_checkout():
    """``ansible-playbook site.yml -i inventories/hk`` from the repository's root, as the README
    says: the playbook is there (playbooks/site.yml through the root's site.yml) and reaches every
    host of the reference inventory."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run(
        ["ansible-playbook", "site.yml", "-i", "inventories/hk", "--list-hosts"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    hosts = yaml.safe_load((ROOT / "inventories" / "hk" / "hosts.yml").read_text())
    assert "hk-gpu01" in done.stdout and "hk-mgmt01" in done.stdout, (done.stdout, hosts)
