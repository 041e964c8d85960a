# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hardware is read once per run, and a fact cache never stands in for a measure.

playbooks/site_facts.yml (site.yml's first play) runs here through ansible-playbook against localhost
with Ansible's jsonfile fact cache and a fake nvidia-smi that logs each call and answers a real
capture: a run limited by --tags that does not validate takes the hardware from a fresh cache;
a run without --tags, one that validates, a stale cache or site_facts_max_age=0 reads it. The
validate role's own reads (its task file's first tasks, as written) read the hardware when the
facts came from the cache: before, validate.yml with a fact cache measured a node on an earlier
run's read, and a GPU that failed since passed."""

from __future__ import annotations

import os
import sys
import time

import pytest
import yaml
from conftest import ROOT, ansible_playbook

# One H100 of a lent machine, as nvidia-smi answered there (tests/unit/fixtures/SOURCES.md).
FIXTURES = ROOT / "tests/unit/fixtures"
CAPTURE = FIXTURES / "smi_xml/h100_sxm5_80gb_vm_1gpu_driver580_open_device_capture.xml"
TOPO = FIXTURES / "topo/h100_vm_1gpu_real_escape_codes_device_capture.txt"
NVLINK = FIXTURES / "nvlink/h100_vm_1gpu_no_nvlink_empty_output_device_capture.txt"

NVIDIA_SMI = f"""#!/bin/sh
echo "$*" >> "$FAKE_SMI_CALLS"
case "$*" in
  "-q -x") cat {CAPTURE} ;;
  "topo -m") cat {TOPO} ;;
  "nvlink -s") cat {NVLINK} ;;
  *) exit 0 ;;
esac
"""


@pytest.fixture
def run(tmp_path):
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    calls = tmp_path / "calls"
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_CACHE_PLUGIN="jsonfile",
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "cache"),
        ANSIBLE_GATHERING="smart",
        FAKE_SMI_CALLS=str(calls),
        PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    )

    def reads(playbook, *args):
        """The number of times the run read the GPUs (nvidia-smi -q -x)."""
        calls.unlink(missing_ok=True)
        done = ansible_playbook(
            playbook,
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            *args,
            env=env,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        return calls.read_text().splitlines().count("-q -x") if calls.exists() else 0

    reads.cache_dir = tmp_path / "cache"
    reads.tmp = tmp_path
    return reads


FACTS = ROOT / "playbooks" / "site_facts.yml"


def test_a_tagged_run_takes_the_hardware_from_a_fresh_cache_and_no_other_run_does(run):
    assert run(FACTS) == 1
    assert "NVIDIA H100 80GB HBM3" in next(run.cache_dir.iterdir()).read_text()
    assert run(FACTS, "--tags", "slurm") == 0
    assert run(FACTS, "--tags", "slurm,dcgm") == 0
    # Each of these reads it.
    assert run(FACTS) == 1
    assert run(FACTS, "--tags", "validate") == 1
    assert run(FACTS, "--tags", "slurm,validate_health") == 1
    assert run(FACTS, "--tags", "slurm", "-e", "site_facts_max_age=0") == 1
    # Older than the bound: stale.
    time.sleep(2)
    assert run(FACTS, "--tags", "slurm", "-e", "site_facts_max_age=1") == 1
    assert run(FACTS, "--tags", "slurm", "-e", "site_facts_max_age=60") == 0


def test_a_read_of_another_playbook_is_not_taken_for_a_dated_one(run):
    """GPU facts in the cache from a playbook that did not date them (a user's own gpu_facts task)."""
    other = run.tmp / "other.yml"
    other.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "all",
                    "tasks": [
                        {"gpuops.cluster.gpu_facts": None},
                        {"gpuops.cluster.ib_facts": None},
                        {"gpuops.cluster.dpkg_facts": None},
                    ],
                }
            ]
        )
    )
    assert run(other) == 1
    assert run(FACTS, "--tags", "slurm") == 1
    assert run(FACTS, "--tags", "slurm") == 0


def test_validation_measures_on_a_read_of_its_own_run(run):
    """The validate role's reads, as its task file writes them, after site_facts.yml (site.yml) and alone
    (validate.yml) over a fact cache that holds the GPUs."""
    reads = yaml.safe_load((ROOT / "roles/validate/tasks/main.yml").read_text())[:2]
    assert [next(key for key in task if "." in key) for task in reads] == [
        "gpuops.cluster.gpu_facts",
        "gpuops.cluster.ib_facts",
    ]
    play = {"name": "Validate", "hosts": "all", "gather_facts": True, "tasks": reads}
    site = run.tmp / "site.yml"
    site.write_text(yaml.safe_dump([{"ansible.builtin.import_playbook": str(FACTS)}, play], sort_keys=False))
    alone = run.tmp / "validate.yml"
    alone.write_text(yaml.safe_dump([play], sort_keys=False))
    # site.yml: the facts play reads, validation takes that read.
    assert run(site) == 1
    # validate.yml alone over the cache: the validation reads.
    assert run(alone) == 1
    # A run whose facts play took the cache (a tagged run): the validation still reads.
    site_tagged = run.tmp / "site-tagged.yml"
    play_always = dict(play, tags=["always"])
    site_tagged.write_text(
        yaml.safe_dump([{"ansible.builtin.import_playbook": str(FACTS)}, play_always], sort_keys=False)
    )
    assert run(site_tagged, "--tags", "slurm") == 1
