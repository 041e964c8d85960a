# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped inventories: hk's pinned stack passes stack_check on its hardware, every variable
they set is one a role or site.yml reads, its secrets come from the vault, and its groups are the
ones site.yml runs on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci
from ansible_collections.gpuops.cluster.plugins.module_utils.stack import check_stack, errors, format_problems
from ansible_collections.gpuops.cluster.plugins.modules.stack_check import STACK_OPTIONS
from conftest import GPUSIM, ROOT

HK = ROOT / "inventories" / "hk"
DEMO = ROOT / "inventories" / "demo"


def group_vars(inventory: Path) -> dict:
    values = {}
    for path in sorted((inventory / "group_vars").rglob("*.yml")):
        values.update(yaml.safe_load(path.read_text()) or {})
    return values


def role_defaults() -> dict:
    values = {}
    for path in sorted((ROOT / "roles").glob("*/defaults/main.yml")):
        values.update(yaml.safe_load(path.read_text()) or {})
    return values


def public_variables() -> set:
    names = set()
    for path in (ROOT / "roles").glob("*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():  # every entry point's
            names |= set(entry.get("options") or {})
    return names


def declared_stack(inventory: Path) -> dict:
    declared = dict(role_defaults(), **group_vars(inventory))
    stack = {name: declared.get(name) for name in STACK_OPTIONS}
    stack.update(
        kernel="6.1.0-28-amd64", distribution="Debian", distribution_major_version="12", cpu_architecture="x86_64"
    )
    return stack


def profile(name: str) -> dict:
    return build_gpu_facts(classify(parse_lspci((GPUSIM / "profiles" / name / "lspci-Dnn.txt").read_text())))


@pytest.mark.parametrize("name", ["dgx-h100", "pcie-l40s"])
def test_demo_stack_passes_stack_check_on_its_profiles(name):
    problems, resolved = check_stack(declared_stack(DEMO), profile(name), today="2026-11-21")
    assert not errors(problems), format_problems(problems)
    assert resolved["driver"]["version"] == "580.95.05"


def test_demo_sets_only_variables_that_something_reads():
    known = public_variables()
    assert [name for name in group_vars(DEMO) if name not in known] == []


def test_hk_stack_passes_stack_check_on_a_dgx_h100():
    stack = declared_stack(HK)
    hardware = profile("dgx-h100")
    assert hardware["count"] == 8
    assert hardware["nvswitch_count"] == 4
    problems, resolved = check_stack(stack, hardware, today="2026-11-21")
    assert not errors(problems), format_problems(problems)
    # Exact pins, not "the branch's newest": every node of hk gets the same packages.
    assert resolved["driver"]["version"] == "580.95.05"
    assert resolved["fabricmanager"] == {"required": True, "version": "580.95.05", "nvswitch_count": 4}


def test_hk_sets_only_variables_that_something_reads():
    known = public_variables()
    # site_* and bundle_* are site.yml's and bundle.yml's own variables.
    unknown = [name for name in group_vars(HK) if name not in known and not name.startswith(("site_", "bundle_"))]
    assert not unknown, f"not a role variable (typo?): {unknown}"


def test_hk_keeps_its_secrets_in_the_vault():
    secrets = yaml.safe_load((HK / "group_vars/all/secrets.yml").read_text())
    assert set(secrets) == {"slurm_munge_key", "slurm_dbd_storage_pass"}
    for name, value in secrets.items():
        assert value == "{{ vault_" + name + " | default('') }}", name
    # No file of the inventory carries anything shaped like a key or a password.
    for path in HK.rglob("*"):
        if path.is_file():
            assert not re.search(r"[A-Za-z0-9+/]{40,}", path.read_text()), path
    assert not (HK / "group_vars/all/vault.yml").exists() or (HK / "group_vars/all/vault.yml").read_text().startswith(
        "$ANSIBLE_VAULT;"
    )


def test_vault_example_placeholders_are_refused_by_the_slurm_role():
    example = yaml.safe_load((HK / "group_vars/all/vault.yml.example").read_text())
    slurm_vars = yaml.safe_load((ROOT / "roles/slurm/vars/main.yml").read_text())
    munge = re.search(r"slurm_munge_key is match\('([^']+)'\)", slurm_vars["__slurm_munge_key_wellformed"]).group(1)
    password = slurm_vars["__slurm_dbd_pass_pattern"]
    assert "slurm_dbd_storage_pass is match(__slurm_dbd_pass_pattern)" in slurm_vars["__slurm_dbd_pass_wellformed"]
    # ... and the role's check uses both.
    main = (ROOT / "roles/slurm/tasks/inputs.yml").read_text()
    assert "__slurm_munge_key_wellformed" in main and "__slurm_dbd_pass_wellformed" in main
    assert not re.match(munge, example["vault_slurm_munge_key"])
    assert not re.match(password, example["vault_slurm_dbd_storage_pass"])


def ansible_inventory(*sources: Path) -> dict:
    """What ansible-inventory --list makes of the sources, with this checkout's ansible.cfg."""
    sources_args = [arg for source in sources for arg in ("-i", str(source))]
    listing = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-inventory")), *sources_args, "--list"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")),
        cwd=ROOT,
    )
    return json.loads(listing.stdout)


@pytest.mark.parametrize("inventory", ["hk"])
def test_inventory_groups_are_the_ones_site_yml_runs_on(inventory):
    data = ansible_inventory(ROOT / "inventories" / inventory)

    def hosts(group):
        found = set(data.get(group, {}).get("hosts", []))
        for child in data.get(group, {}).get("children", []):
            found |= hosts(child)
        return found

    gpu = {f"hk-gpu{i:02d}" for i in range(1, 9)}
    assert hosts("gpu_nodes") == gpu
    assert hosts("slurm_compute") == gpu
    for group in ("slurm_controller", "slurm_dbd", "slurm_login", "sharp_am", "prometheus"):
        assert hosts(group) == {"hk-mgmt01"}, group
    site = (ROOT / "playbooks/site.yml").read_text()
    for group in ("gpu_nodes", "sharp_am", "slurm_controller", "slurm_compute", "slurm_login", "slurm_dbd"):
        assert group in site


def test_make_demo_reaches_each_demo_host_in_the_container_up_yml_starts():
    """tests/demo/connection.yml, laid over inventories/demo, must name the containers that
    tests/demo/up.yml starts (<prefix>-<host>, cluster.yml), over Docker, and leave the real
    inventory alone."""
    hostvars = ansible_inventory(ROOT / "inventories/demo/hosts.yml", ROOT / "tests/demo/connection.yml")["_meta"][
        "hostvars"
    ]
    prefix = yaml.safe_load((ROOT / "tests/demo/cluster.yml").read_text())["gpusim_container_prefix"]
    assert set(hostvars) == {"demo-head", "demo-h100", "demo-l40s"}
    for host, hv in hostvars.items():
        assert hv["ansible_connection"] == "community.docker.docker"
        # Each host's own container by name, not a template: a template of inventory_hostname is
        # the delegating host's under delegate_to, which sent delegated tasks to the wrong node.
        assert hv["ansible_host"] == f"{prefix}-{host}"
    demo = "\n".join(p.read_text() for p in (ROOT / "inventories/demo").rglob("*.yml"))
    assert "ansible_connection" not in demo
