# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Canonical's driver packages as a source, decided from Ubuntu's real package indexes
(tests/unit/fixtures/ubuntu_archive: noble and jammy, restricted and multiverse, 2026-11-27)."""

from __future__ import annotations

import pathlib

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import canonical
from ansible_collections.gpuops.cluster.plugins.module_utils.stack import check_stack, errors, format_decisions
from conftest import profile_facts

FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures" / "ubuntu_archive"
NOBLE = canonical.parse_index((FIXTURES / "noble-apt-cache-show.txt").read_text())
JAMMY = canonical.parse_index((FIXTURES / "jammy-apt-cache-show.txt").read_text())
NOBLE_KERNEL = "6.8.0-149-generic"
JAMMY_KERNEL = "5.15.0-160-generic"
H100, L40S, V100 = (profile_facts(n) for n in ("dgx-h100", "pcie-l40s", "dgx1-v100"))
STACK = {
    "nvidia_driver_branch": "580",
    "nvidia_driver_kernel_module": "auto",
    "nvidia_driver_source": "ubuntu",
    "cuda_versions": ["12.8"],
    "cuda_forward_compat": True,
    "cudnn_version": "9.10.2.21",
    "nccl_version": "2.26.5",
    "ofed_flavour": "doca",
    "ofed_gpudirect": "auto",
    "dcgm_major": 4,
    "kernel": "6.18.0-1-amd64",
    "distribution": "Ubuntu",
    "distribution_major_version": "24",
    "cpu_architecture": "x86_64",
}


def run(hw, index="noble", **changes):
    index = NOBLE if index == "noble" else index
    return check_stack(dict(STACK, **changes), hw, today="2026-11-27", index=index)


def pkgs(resolved, component):
    return [(p["name"], p["version"]) for p in resolved["packages"][component]]


def test_the_index_reads_every_stanza_of_the_real_archive():
    assert NOBLE["nvidia-utils-580-server"] == [
        {"version": "580.178.04-0ubuntu0.24.04.1", "depends": NOBLE["nvidia-utils-580-server"][0]["depends"]}
    ]
    entry = NOBLE[f"linux-modules-nvidia-580-server-open-{NOBLE_KERNEL}"][0]
    assert entry["version"] == "6.8.0-149.149"
    assert canonical.module_driver(entry, "580") == "580.178.04"
    # On jammy the 5.15.0-160 modules were built for an older release than the archive's user space.
    old = JAMMY[f"linux-modules-nvidia-580-server-open-{JAMMY_KERNEL}"][0]
    assert canonical.module_driver(old, "580") == "580.95.05"


def test_noble_h100_takes_canonical_s_signed_modules_and_fabric_manager_at_the_same_release():
    problems, resolved = run(H100, nvidia_driver_kernel=NOBLE_KERNEL)
    assert not errors(problems), problems
    assert not [p for p in problems if p["variable"] == "nvidia_driver_kernel"]
    assert resolved["driver"]["version"] == "580.178.04"
    assert resolved["driver"]["apt_pin"] == "580.178.04-*"
    assert resolved["driver"]["source"] == "ubuntu"
    assert resolved["driver"]["modules"] == "precompiled"
    assert resolved["driver"]["kernel"] == NOBLE_KERNEL
    assert pkgs(resolved, "driver") == [
        ("nvidia-headless-no-dkms-580-server-open", "580.178.04-0ubuntu0.24.04.1"),
        ("nvidia-utils-580-server", "580.178.04-0ubuntu0.24.04.1"),
        (f"linux-modules-nvidia-580-server-open-{NOBLE_KERNEL}", "6.8.0-149.149"),
    ]
    assert pkgs(resolved, "fabricmanager") == [
        ("nvidia-fabricmanager-580", "580.178.04-0ubuntu0.24.04.1"),
        ("libnvidia-nscq-580", "580.178.04-0ubuntu0.24.04.1"),
    ]
    assert resolved["fabricmanager"]["version"] == "580.178.04"
    assert pkgs(resolved, "driver_pinning") == []
    table = format_decisions(resolved["decisions"], "d")
    assert "precompiled for kernel 6.8.0-149-generic" in table
    assert "Canonical's signed modules for kernel 6.8.0-149-generic" in table


def test_the_running_kernel_is_the_default_and_without_its_modules_dkms_is_a_warning():
    problems, resolved = run(L40S)
    assert not errors(problems)
    assert resolved["driver"]["modules"] == "dkms"
    assert resolved["driver"]["kernel"] == "6.18.0-1-amd64"
    assert pkgs(resolved, "driver")[-1] == ("nvidia-dkms-580-server-open", "580.178.04-0ubuntu0.24.04.1")
    (warning,) = [p for p in problems if p["variable"] == "nvidia_driver_kernel"]
    assert "no linux-modules-nvidia-580-server-open-6.18.0-1-amd64" in warning["message"]
    assert "DKMS" in warning["message"]


def test_jammy_modules_built_for_a_release_the_mirror_lacks_fall_back_to_dkms_at_the_newest():
    problems, resolved = run(L40S, index=JAMMY, distribution_major_version="22", nvidia_driver_kernel=JAMMY_KERNEL)
    assert not errors(problems)
    assert resolved["driver"]["version"] == "580.178.04"
    assert resolved["driver"]["modules"] == "dkms"
    (warning,) = [p for p in problems if p["variable"] == "nvidia_driver_kernel"]
    assert "built for driver 580.95.05" in warning["message"]
    assert "580.178.04 only" in warning["message"]


def test_volta_takes_the_proprietary_flavour():
    problems, resolved = run(V100, nvidia_driver_kernel=NOBLE_KERNEL)
    assert not errors(problems), problems
    assert pkgs(resolved, "driver")[0] == ("nvidia-headless-no-dkms-580-server", "580.178.04-0ubuntu0.24.04.1")
    assert pkgs(resolved, "driver")[2][0] == f"linux-modules-nvidia-580-server-{NOBLE_KERNEL}"


@pytest.mark.parametrize(
    ("changes", "index", "variable", "words"),
    [
        # Canonical moved R570 to R580: the 570 names are transitional packages.
        ({"nvidia_driver_branch": "570"}, NOBLE, "nvidia_driver_branch", 'set nvidia_driver_branch: "580"'),
        ({"nvidia_driver_version": "580.95.05"}, NOBLE, "nvidia_driver_version", "not 580.95.05"),
        ({"distribution": "Debian", "distribution_major_version": "12"}, NOBLE, "nvidia_driver_source", "Debian"),
        ({}, {}, "nvidia_driver_source", "restricted component"),
        ({}, None, "nvidia_driver_source", "apt-get update"),
    ],
)
def test_what_the_archive_cannot_give_is_refused_naming_the_variable(changes, index, variable, words):
    problems, _resolved = run(H100, index=index, nvidia_driver_kernel=NOBLE_KERNEL, **changes)
    found = [p for p in errors(problems) if p["variable"] == variable]
    assert found and words in found[0]["message"] + found[0]["fix"], problems


def test_an_nvswitch_node_without_multiverse_is_refused_before_anything_changes():
    index = {name: entries for name, entries in NOBLE.items() if "fabricmanager" not in name and "nscq" not in name}
    problems, _resolved = run(H100, index=index, nvidia_driver_kernel=NOBLE_KERNEL)
    found = [p for p in errors(problems) if "nvidia-fabricmanager-580" in p["message"]]
    assert found and "multiverse" in found[0]["fix"]


def test_a_fabric_manager_of_an_unreadable_version_is_refused_with_what_the_index_has():
    """Found by the fuzzer: a version without a dotted upstream part broke the message."""
    index = dict(NOBLE, **{"nvidia-fabricmanager-580": [{"version": "junk", "depends": ""}]})
    problems, _resolved = run(H100, index=index, nvidia_driver_kernel=NOBLE_KERNEL)
    (found,) = [p for p in errors(problems) if "nvidia-fabricmanager-580" in p["message"]]
    assert "at no version, not at driver 580.178.04" in found["message"]


def test_a_pcie_node_needs_no_fabric_manager_from_the_archive():
    problems, resolved = run(L40S, nvidia_driver_kernel=NOBLE_KERNEL)
    assert not errors(problems)
    assert pkgs(resolved, "fabricmanager") == []


def test_the_nvidia_source_is_unchanged_and_says_dkms():
    problems, resolved = run(H100, index=None, nvidia_driver_source="nvidia")
    assert not errors(problems)
    assert resolved["driver"]["source"] == "nvidia" and resolved["driver"]["modules"] == "dkms"
    assert pkgs(resolved, "driver") == [("nvidia-open-580", None)]


def test_index_names_cover_both_flavours_once():
    names = canonical.index_names("580", NOBLE_KERNEL)
    assert len(names) == len(set(names)) == 9
    assert "nvidia-headless-no-dkms-580-server" in names and "nvidia-headless-no-dkms-580-server-open" in names


@pytest.mark.parametrize(
    "text",
    ["", "\n\n\n", "Package: x\n", "Version: 1\n", "Package: a\nVersion: 1\nDepends: (\n", ":::\n \n\tDepends: y"],
)
def test_a_broken_index_parses_to_what_it_has(text):
    index = canonical.parse_index(text)
    assert all(isinstance(v, list) for v in index.values())


def test_a_huge_depends_field_is_read_whole():
    """bench/facts.py times this input ("hostile input"); here: the answer is right."""
    text = "Package: p\nVersion: 1\nDepends: " + "a (>= 1), " * 20000 + "nvidia-kernel-common-580-server (>= 580.1)\n"
    entry = canonical.parse_index(text)["p"][0]
    assert canonical.module_driver(entry, "580") == "580.1"


def test_an_index_whose_driver_versions_name_no_release_is_refused_not_a_crash():
    """Found by the parser fuzz: a userspace package whose every version lacks a dotted release."""
    name = canonical.names("580", "open", "6.8.0-149-generic")["userspace"]
    problems, plan = canonical.plan(
        branch="580",
        flavour="open",
        kernel="6.8.0-149-generic",
        exact=None,
        index={name: [{"version": "abc", "depends": ""}]},
        fabricmanager=True,
        distribution="Ubuntu 24",
    )
    assert plan is None
    assert problems[0][:2] == ("error", "nvidia_driver_source")
    assert "only at versions with no driver release in them (abc)" in problems[0][2]
