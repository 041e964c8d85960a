# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU use per Slurm job (slurm_job_gpu_metrics): the Prolog and Epilog as the slurm role renders
them, run by the real sh with the environment slurmd gives them, and the slurm.conf decision that
names them only once every compute node of the plan has recorded them."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.gpuops.cluster.plugins.module_utils import fleet
from conftest import ROOT, trusted

ROLE = ROOT / "roles" / "slurm"
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


@pytest.fixture
def scripts(tmp_path):
    """The script rendered with the role's defaults (the textfile folder moved into tmp_path), under
    both names slurmd runs it by."""
    folder = tmp_path / "textfile"
    folder.mkdir()
    variables = dict(DEFAULTS, slurm_job_gpu_metrics_dir=str(folder), ansible_managed="managed")
    text = Templar(loader=DataLoader(), variables=trusted(variables)).template(
        trusted((ROLE / "templates" / "gpuops-slurm-job-gpus.j2").read_text())
    )
    paths = {}
    for mode in ("prolog", "epilog"):
        paths[mode] = tmp_path / f"gpuops-slurm-{mode}"
        paths[mode].write_text(text)
        paths[mode].chmod(0o755)
    return folder, paths


def run(path, **env):
    done = subprocess.run(
        [str(path)], env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_prolog_writes_one_series_per_gpu_and_the_epilog_removes_them(scripts):
    folder, paths = scripts
    job = {
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_USER": "alice",
        "SLURM_JOB_ACCOUNT": 'vision"lab\\x',
        "SLURM_JOB_PARTITION": "gpu",
        "SLURM_JOB_GPUS": "0,2-3",
    }
    run(paths["prolog"], **job)
    written = (folder / "gpuops-slurm-job-4242.prom").read_text().splitlines()
    labels = 'jobid="4242",user="alice",account="vision\\"lab\\\\x",partition="gpu"'
    assert written[2:] == [f'gpuops_slurm_job_gpu_info{{{labels},gpu="{gpu}"}} 1' for gpu in ("0", "2", "3")]
    assert written[1] == "# TYPE gpuops_slurm_job_gpu_info gauge"
    assert oct((folder / "gpuops-slurm-job-4242.prom").stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in folder.iterdir()] == ["gpuops-slurm-job-4242.prom"]  # no temporary file left
    run(paths["epilog"], **job)
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(
    "env",
    [
        {"SLURM_JOB_ID": "7"},  # a job without GPUs
        {"SLURM_JOB_ID": "../../etc/x", "SLURM_JOB_GPUS": "0"},  # not a job id: nothing is written anywhere
        {"SLURM_JOB_GPUS": "0"},
        {"SLURM_JOB_ID": "8", "SLURM_JOB_GPUS": "a,$(reboot)"},
    ],
)
def test_what_is_not_a_job_s_gpus_writes_nothing_and_never_fails(scripts, env):
    folder, paths = scripts
    run(paths["prolog"], **env)
    files = [p.read_text().count("gpuops_slurm_job_gpu_info{") for p in folder.iterdir()]
    assert files in ([], [0])


def test_without_the_textfile_folder_the_prolog_does_nothing(scripts):
    folder, paths = scripts
    folder.rmdir()
    run(paths["prolog"], SLURM_JOB_ID="9", SLURM_JOB_GPUS="0")
    assert not folder.exists()


def decision(nodes, extra=None):
    variables = dict(DEFAULTS)
    variables.update(VARS)
    variables.update(__slurm_plan={"nodes": nodes}, slurm_conf_extra=extra or {})
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    return templar.template(trusted(VARS["__slurm_job_gpu_metrics"]))


def test_slurm_conf_names_the_scripts_only_when_every_compute_node_recorded_them():
    both = {"gpu01": {"job_gpu_metrics": True}, "gpu02": {"job_gpu_metrics": True}}
    assert decision(both) is True
    # A node recorded by an earlier collection (no key), or with slurm_job_gpu_metrics false, keeps
    # them out: it has no Prolog, and a missing Prolog drains the node.
    assert decision(dict(both, gpu03={})) is False
    assert decision(dict(both, gpu03={"job_gpu_metrics": False})) is False
    assert decision({}) is False
    # An operator's own Prolog, Epilog or PrologFlags (slurm_conf_extra) wins.
    assert decision(both, {"Prolog": "/site/prolog"}) is False
    assert decision(both, {"PrologFlags": "Contain"}) is False


def test_the_slurm_conf_lines():
    text = (ROLE / "templates" / "slurm.conf.j2").read_text()
    block = text[text.index("{% if __slurm_job_gpu_metrics %}") :]
    block = block[: block.index("{% endif %}")]
    assert "Prolog={{ __slurm_job_prolog }}" in block and "Epilog={{ __slurm_job_epilog }}" in block
    assert "PrologFlags=Alloc" in block


def test_the_fleet_state_refuses_a_record_whose_flag_is_not_true_or_false():
    spec = {key: 1 for key in fleet._SPEC_INTS} | {"gres": "", "gres_devices": []}
    fleet.check_section("slurm", {"hostname": "gpu01", "spec": spec, "job_gpu_metrics": True}, "gpu01", None)
    with pytest.raises(fleet.FleetError, match="job_gpu_metrics 'yes' is not true or false"):
        fleet.check_section("slurm", {"hostname": "gpu01", "spec": spec, "job_gpu_metrics": "yes"}, "gpu01", None)
