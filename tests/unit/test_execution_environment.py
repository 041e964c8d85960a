# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's own execution environment (execution-environment.yml), through the real
ansible-builder: the build context it creates installs this collection where the builder stage
introspects it, so that what the collection's modules run on the controller (skopeo and gpgv or
gnupg2 for bundle.yml, matplotlib and networkx for the report's plots) is installed into the image;
and the introspection the image runs finds exactly those. Pulls and builds nothing."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():
    importlib.import_module("ansible_builder")  # requirements.txt has it: in the project's venv, never a skip
else:  # make core-matrix's venvs, which hold the unit tests' packages only
    pytest.importorskip("ansible_builder")
BUILDER = Path(sys.prefix) / "bin" / "ansible-builder"


def stages(containerfile):
    """``{stage: [lines]}`` of a Containerfile (``FROM ... AS stage``)."""
    found, current = {}, None
    for line in containerfile.splitlines():
        if line.startswith("FROM "):
            current = line.split(" AS ")[-1].strip()
            found[current] = []
        elif current:
            found[current].append(line)
    return found


def test_the_collection_is_installed_where_the_builder_introspects_it(tmp_path):
    work = tmp_path / "ee"
    shutil.copy(ROOT / "execution-environment.yml", work.parent / "execution-environment.yml")
    shutil.copytree(ROOT / "meta", tmp_path / "meta")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gpuops-cluster-1.0.0.tar.gz").write_bytes(b"a stand-in for make build's tarball")
    subprocess.run(
        [str(BUILDER), "create", "-f", "execution-environment.yml", "-c", str(work), "--output-filename",
         "Containerfile"],
        cwd=tmp_path, check=True, capture_output=True, text=True,
    )  # fmt: skip
    parts = stages((work / "Containerfile").read_text())
    installs = {
        stage: [line for line in lines if "gpuops-cluster-" in line and "collection install" in line]
        for stage, lines in parts.items()
    }
    # In the galaxy stage, which the builder stage copies before it introspects; nowhere else.
    assert len(installs["galaxy"]) == 1 and "/build/collection/gpuops-cluster-*.tar.gz" in installs["galaxy"][0]
    assert sum(len(lines) for lines in installs.values()) == 1
    builder = parts["builder"]
    copied = builder.index("COPY --from=galaxy /usr/share/ansible /usr/share/ansible")
    assert copied < next(i for i, line in enumerate(builder) if "introspect.py introspect" in line)
    assert (work / "_build" / "collection" / "gpuops-cluster-1.0.0.tar.gz").is_file()


def test_the_image_s_introspection_finds_what_the_collection_runs(tmp_path):
    """What the builder stage computes (its introspect step over the installed collections and the
    EE's own lists): the system packages and Python packages the image gets."""
    done = subprocess.run(
        [str(BUILDER), "introspect", str(ROOT / ".collections"), "--user-bindep", str(ROOT / "meta/ee/bindep.txt"),
         "--user-pip", str(ROOT / "meta/ee/requirements.txt"), "--write-bindep", str(tmp_path / "bindep.txt"),
         "--write-pip", str(tmp_path / "requirements.txt")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    bindep = (tmp_path / "bindep.txt").read_text()
    pip = (tmp_path / "requirements.txt").read_text()
    for package in ("skopeo", "gnupg2 [platform:rpm]", "gpgv [platform:dpkg]", "openssh-clients [platform:rpm]"):
        assert package in bindep, (package, bindep, done.stderr)
    for package in ("matplotlib>=3.6", "networkx>=3.0"):
        assert package in pip, (package, pip)
    assert not any(tool in pip for tool in ("pytest", "molecule", "ruff", "ansible-lint"))
