# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's public variables: defaults, argument_specs and README agree; bad values are refused."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuops.cluster.plugins.module_utils.stack_spec import STACK_VARIABLES
from conftest import ROOT

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks" / "main.yml").exists())


def role_files(role, stack=False):
    """The role's folder, its defaults and its main argument spec's options; an install role's copies
    of the stack variables (documentation, written by make stack-spec) only with ``stack``."""
    base = ROOT / "roles" / role
    defaults = yaml.safe_load((base / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((base / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    if not stack and role != "preflight":
        specs = {name: spec for name, spec in specs.items() if name not in STACK_VARIABLES}
    return base, defaults, specs


def entry_point_defaults(role):
    """{option: default} of the entry points other than main, for the options that have one."""
    points = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return {
        name: spec["default"]
        for point, body in points.items()
        if point != "main"
        for name, spec in (body.get("options") or {}).items()
        if "default" in spec
    }


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_specs_declare_the_same_variables(role):
    _base, defaults, specs = role_files(role)
    # A required option (an entry point's parameter, such as fleet_section) has no default.
    public = {name for name, spec in specs.items() if not spec.get("required")}
    assert set(defaults) == public | set(entry_point_defaults(role))
    for name, spec in specs.items():
        assert spec.get("description"), name
        if spec.get("required"):
            assert "default" not in spec, name
            continue
        if "default" not in spec:
            # A default the spec cannot hold, a Jinja expression for a bool (antsibull-docs and Galaxy
            # refuse it there): only in defaults/main.yml, and the description says so.
            assert str(defaults[name]).startswith("{{"), name
            text = spec["description"]
            assert "defaults/main.yml" in (" ".join(text) if isinstance(text, list) else text), name
            continue
        assert spec["default"] == defaults[name], name
        if "choices" in spec:
            chosen = defaults[name] if spec.get("type") == "list" else [defaults[name]]
            assert set(chosen) <= set(spec["choices"]), name


@pytest.mark.parametrize("role", ROLES)
def test_other_entry_points_take_their_defaults_from_defaults_main(role):
    """include_role with tasks_from: X loads defaults/main.yml (not defaults/X.yml, unless the caller
    names defaults_from), and an argument spec's default only documents: so an entry point's
    documented default must be defaults/main.yml's value, or the variable is undefined when a caller
    leaves it out (slurm's drain entry point had slurm_drain_timeout: 3600 in its spec only; found by
    ansible-docsmith validate, whose own rule looks for defaults/drain.yml)."""
    _base, defaults, _specs = role_files(role)
    for name, default in entry_point_defaults(role).items():
        assert name in defaults, name
        assert defaults[name] == default, name


@pytest.mark.parametrize("role", ROLES)
def test_readme_documents_every_public_variable(role):
    base, defaults, _specs = role_files(role)
    readme = (base / "README.md").read_text()
    missing = [name for name in defaults if f"`{name}`" not in readme]
    assert not missing


def test_stack_variables_are_declared_once_in_preflight():
    """No install role declares a stack variable (no default of its own); the one role that installs
    what a variable pins documents it with preflight's entry (ansible-doc -t role shows it there);
    preflight's task passes each one to stack_check."""
    _base, _defaults, specs = role_files("preflight")
    assert set(STACK_VARIABLES) == {name for name in specs if not name.startswith("preflight_")}
    documented = []
    for role in ROLES:
        if role == "preflight":
            continue
        _base, defaults, with_stack = role_files(role, stack=True)
        assert not set(STACK_VARIABLES) & set(defaults), role
        for name in set(STACK_VARIABLES) & set(with_stack):
            documented.append(name)
            assert with_stack[name]["description"][0].startswith("Declared once, in gpuops.cluster.preflight"), name
            assert with_stack[name].get("default") == specs[name].get("default"), (role, name)
            assert with_stack[name]["type"] == specs[name]["type"], (role, name)
    assert sorted(documented) == sorted(STACK_VARIABLES)
    tasks = yaml.safe_load((ROOT / "roles" / "preflight" / "tasks" / "stack.yml").read_text())
    (check,) = [t for t in tasks if "gpuops.cluster.stack_check" in t]
    passed = {name for name in check["gpuops.cluster.stack_check"] if name in STACK_VARIABLES}
    assert passed == set(STACK_VARIABLES)
    for name in STACK_VARIABLES:
        assert check["gpuops.cluster.stack_check"][name] == "{{ " + name + " }}", name


@pytest.mark.parametrize("script", ["stack_spec.py", "role_docs.py"])
def test_files_derived_from_argument_specs_are_current(script):
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "scripts" / script), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def run_preflight(tmp_path, extra_vars):
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  roles: [{role: gpuops.cluster.preflight}]\n"
    )
    varfile = tmp_path / "vars.yml"
    varfile.write_text(extra_vars)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            str(playbook),
            "-e",
            f"@{varfile}",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_argument_specs_refuse_wrong_types_and_choices_before_any_task(tmp_path):
    result = run_preflight(
        tmp_path,
        "dcgm_major: 5\nnvidia_driver_kernel_module: closed\ncuda_versions: {twelve: 8}\npreflight_min_free_gib: 12\n",
    )
    assert result.returncode != 0
    out = " ".join(result.stdout.split())
    assert "Validating arguments against arg spec" in out
    for text in (
        "value of dcgm_major must be one of: 3, 4, got: 5",
        "value of nvidia_driver_kernel_module must be one of: auto, open, proprietary, got: closed",
        "cuda_versions",
        "preflight_min_free_gib",
    ):
        assert text in out, text
    assert "Check the declared stack" not in out


def test_malformed_versions_are_named_with_the_form_to_use(tmp_path):
    result = run_preflight(tmp_path, 'nvidia_driver_branch: "R570"\ncuda_versions: "12,8"\n')
    assert result.returncode != 0
    out = result.stdout
    assert "nvidia_driver_branch: 'R570' is not a driver branch. Fix: write the branch number only" in out
    assert "cuda_versions: '12' is not a CUDA version MAJOR.MINOR" in out
    assert "cuda_versions: '8' is not a CUDA version MAJOR.MINOR" in out


# Variables that hold a secret, and the tasks' keys that never show a value.
SECRETS = re.compile(
    r"\b(slurm_munge_key|__slurm_munge_key|__slurm_munge_current|slurm_dbd_storage_pass|__slurm_dbd_pass"
    r"|__slurm_dbd_conf_current)\b"
)
NOT_SHOWN = {"name", "when", "that", "no_log", "register", "notify", "tags", "loop_control"}


def tasks_of(node):
    for task in node or []:
        for key in ("block", "rescue", "always"):
            yield from tasks_of(task.get(key))
        if not {"block", "rescue", "always"} & task.keys():
            yield task


def role_vars(base):
    path = base / "vars" / "main.yml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


@pytest.mark.parametrize("role", ROLES)
def test_every_task_that_handles_a_secret_has_no_log(role):
    base = ROOT / "roles" / role
    for path in sorted((base / "tasks").glob("*.yml")):
        for task in tasks_of(yaml.safe_load(path.read_text())):
            args = {k: v for k, v in task.items() if k not in NOT_SHOWN}
            if "ansible.builtin.assert" in args:  # assert shows its fail_msg, never the values in "that"
                args["ansible.builtin.assert"] = args["ansible.builtin.assert"].get("fail_msg", "")
            shown = yaml.safe_dump(args, width=1000)
            module = next((v for k, v in task.items() if k.endswith(".template")), None)
            if module:
                items = task["loop"] if isinstance(task.get("loop"), list) else [None]
                if isinstance(task.get("loop"), str) and "{{ item }}" in module["src"]:
                    # A loop over a role variable (slurm's __slurm_conf_files): every name it can list.
                    items = sorted({f"{name}" for name in re.findall(r"'([\w.-]+)'", str(role_vars(base)))})
                    items = [name for name in items if (base / "templates" / f"{name}.j2").is_file()] or [None]
                for item in items:
                    src = module["src"].replace("{{ item }}", str(item))
                    shown += (base / "templates" / src).read_text()
            expressions = re.findall(r"\{\{.*?\}\}|\{%.*?%\}", shown, re.S)
            if any(SECRETS.search(e) for e in expressions):
                assert task.get("no_log") is True, f"{path.name}: {task['name']}"


def test_slurmdbd_conf_is_readable_by_slurm_only():
    tasks = yaml.safe_load((ROOT / "roles/slurm/tasks/dbd.yml").read_text())
    conf = next(t for t in tasks if t.get("ansible.builtin.template", {}).get("src") == "slurmdbd.conf.j2")
    assert conf["ansible.builtin.template"]["mode"] == "0600"
    assert conf["ansible.builtin.template"]["owner"] == "slurm"
    assert conf["no_log"] is True


@pytest.mark.parametrize("role", ROLES)
def test_every_secret_option_is_no_log_in_the_argument_specs(role):
    """Role argument validation prints a bad value in its error: a secret option must not be shown."""
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    for name, option in specs["argument_specs"]["main"]["options"].items():
        if SECRETS.search(name) and option.get("type") in ("str", "raw", None):
            assert option.get("no_log") is True, f"{role}: {name}"


def _role_var(role, expression, variables):
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415 - only this test templates
    from ansible.template import Templar, trust_as_template  # noqa: PLC0415

    role_vars = yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    values = {**defaults, **variables}

    def trusted(value):
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, dict):
            return {k: trusted(v) for k, v in value.items()}
        return [trusted(v) for v in value] if isinstance(value, list) else value

    values.update(trusted(role_vars))
    return Templar(loader=DataLoader(), variables=values).template(trust_as_template(expression))


@pytest.mark.parametrize(
    ("role", "expression", "variables", "key"),
    [
        (
            "container_toolkit",
            "{{ __container_toolkit_key_url }}",
            {"container_toolkit_repository_url": "https://mirror.site/libnvidia-container/stable/deb/"},
            "https://mirror.site/libnvidia-container/gpgkey",
        ),
        (
            "container_toolkit",
            "{{ __container_toolkit_key_url }}",
            {},
            "https://nvidia.github.io/libnvidia-container/gpgkey",
        ),
        (
            "ofed",
            "{{ __ofed_repository.mlnx_ofed.key_url }}",
            {"ofed_mlnx_ofed_url": "https://mirror.site/MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64/DEBS/"},
            "https://mirror.site/MLNX_OFED_LINUX-24.10-1.1.4.0-ubuntu22.04-x86_64/RPM-GPG-KEY-Mellanox",
        ),
        (
            "ofed",
            "{{ __ofed_repository.doca.key_url }}",
            {"ofed_doca_mirror": "https://mirror.site/doca"},
            "https://mirror.site/doca/GPG-KEY-Mellanox.pub",
        ),
    ],
)
def test_every_key_url_follows_its_mirror_variable(role, expression, variables, key):
    """One variable per upstream: with the key URL variables unset, each key comes from the mirror."""
    assert _role_var(role, expression, variables).strip() == key
