# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.plugins.loader import init_plugin_loader
from hypothesis import settings

# Tests don't time (bench/ does): hypothesis' 200 ms deadline per example failed a hostlist test when
# the machine was loaded (399 ms once, 0.12 ms again), so no example has a deadline.
settings.register_profile("gpuops", deadline=None)
settings.load_profile("gpuops")

ROOT = Path(__file__).resolve().parents[2]
GPUSIM = ROOT / "tests" / "gpusim"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# The checkout's .collections/ansible_collections/gpuops/cluster links back to the checkout. Ansible's
# collection loader serves it from there, before anything imports ansible_collections: the
# collection's module_utils import the way they do on a managed node, and a template in a test
# finds the collection's filters (gpuops.cluster.workload_tiers) as a play does.
init_plugin_loader([str(ROOT / ".collections")])
PROFILE_NAMES = sorted(p.stem for p in (GPUSIM / "profiles").glob("*.yml"))

from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts  # noqa: E402
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci  # noqa: E402
from module_harness import Node  # noqa: E402


def load_script(path: Path, name: str):
    """Import a script of the test harness (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def ansible_playbook(*args, env=None, timeout=300):
    """The checkout's ansible-playbook run from the repository's root with ARGS (a playbook, an
    inventory, options); the finished process, its output captured."""
    return subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ansible-playbook"), *(str(arg) for arg in args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def trusted(value):
    """``value`` with every string marked as a template Ansible may render (variables of a play or
    a role read from YAML, as Ansible's loader marks them)."""
    from ansible.template import trust_as_template  # noqa: PLC0415

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


@pytest.fixture(scope="session")
def assemble():
    return load_script(GPUSIM / "assemble.py", "gpusim_assemble")


@pytest.fixture(scope="session")
def repo_builder():
    return load_script(GPUSIM / "repo" / "build.py", "gpusim_repo_build")


@pytest.fixture(scope="session")
def repo(tmp_path_factory, repo_builder):
    """The stand-in repository, built once per test session: ``(www folder, the build module)``."""
    base = tmp_path_factory.mktemp("gpusim")
    repo_builder.build(base / "www", base / "cache")
    return base / "www", repo_builder


def profile_summary(name: str) -> dict:
    return json.loads((GPUSIM / "profiles" / name / "profile.json").read_text())


def fixtures(kind: str) -> list[Path]:
    """The captured outputs of one kind (topo, smi_xml, ibstat, ibdev2netdev, lspci)."""
    return sorted((FIXTURES / kind).iterdir())


def fixture(kind: str, name: str) -> str:
    return (FIXTURES / kind / name).read_text()


def profile_facts(name: str) -> dict:
    """nvidia_gpu facts of a gpusim profile before the driver (lspci only)."""
    return build_gpu_facts(classify(parse_lspci((GPUSIM / "profiles" / name / "lspci-Dnn.txt").read_text())))


@pytest.fixture
def module_exits(monkeypatch):
    """A module's exit_json and fail_json raise Exited (for run_module) on the real AnsibleModule."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", Node.exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", Node.fail_json)
