# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/image/build.sh: one image per platform, each tagged by its own recipe; an unknown
platform refused by name before anything is built."""

import os
import subprocess
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[1] / "image" / "build.sh"
DISTROS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404")


def tag(distro, **env):
    return subprocess.run(
        [str(BUILD), "--print-tag"],
        env={**os.environ, "MOLECULE_DISTRO": distro, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_each_platform_has_its_own_image_and_tag():
    tags = [tag(d) for d in DISTROS]
    assert [t.returncode for t in tags] == [0] * len(DISTROS)
    names = [t.stdout.strip() for t in tags]
    assert [n.split(":")[0] for n in names] == [f"gpuops-molecule/{d}" for d in DISTROS]
    assert len({n.split(":")[1] for n in names}) == len(DISTROS)


def test_the_default_platform_is_debian12():
    env = {k: v for k, v in os.environ.items() if k != "MOLECULE_DISTRO"}
    out = subprocess.run([str(BUILD), "--print-tag"], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("gpuops-molecule/debian12:")


def test_a_mirror_is_part_of_the_recipe():
    assert tag("ubuntu2404").stdout != tag("ubuntu2404", UBUNTU_MIRROR="http://mirror.example/ubuntu").stdout


@pytest.mark.parametrize("distro", ["ubuntu2004", "debian11", "rhel9", "Ubuntu 24.04"])
def test_an_unknown_platform_is_refused_naming_the_supported_ones(distro):
    out = tag(distro)
    assert out.returncode == 2
    assert out.stdout == ""
    assert "debian12, debian13, ubuntu2204 and ubuntu2404" in out.stderr
