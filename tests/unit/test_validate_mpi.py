# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate role's srun options for NCCL across nodes: mpi/pmix where srun offers it, mpi/pmi2
where Slurm was built without it (Ubuntu 22.04's 21.08), the user's own --mpi where given. The
srun --mpi=list outputs are those of Debian 12's Slurm 22.05 and Ubuntu 22.04's 21.08."""

from __future__ import annotations

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import ROOT, trusted

TASKS = yaml.safe_load((ROOT / "roles" / "validate" / "tasks" / "main.yml").read_text())
BLOCK = next(t for t in TASKS if any(b.get("name") == "Measure NCCL across nodes" for b in t.get("block", [])))
MEASURE = next(b for b in BLOCK["block"] if b["name"] == "Measure NCCL across nodes")
MNDIAG = next(b for b in BLOCK["block"] if b["name"].startswith("Run DCGM's multi-node diagnostic"))
READ = next(b for b in BLOCK["block"] if b["name"] == "Read the MPI plugins srun offers")

SLURM_22_05 = {"stdout": "MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\n"
               "specific pmix plugin versions available: pmix_v4", "stderr": ""}  # fmt: skip
SLURM_21_08 = {"stdout": "", "stderr": "srun: MPI types are...\nsrun: none\nsrun: cray_shasta\nsrun: pmi2"}


def srun(listing, args=(), partitions="a|gpu\nb|gpu\na|debug\n"):
    variables = {
        "item": {"hosts": ["a", "b"], "gpus_per_node": 4},
        "__validate_names": ["a", "b"],
        "__validate_held": [],
        "validate_nccl_srun_args": list(args),
        "__validate_mpi_list": listing,
        "__validate_partitions": {"stdout": partitions},
        "__validate_held_in": MEASURE["vars"]["__validate_held_in"],
    }
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    return templar.template(trusted(MEASURE["vars"]["__validate_srun_multi"]))


@pytest.mark.parametrize(("listing", "mpi"), [(SLURM_22_05, "--mpi=pmix"), (SLURM_21_08, "--mpi=pmi2")])
def test_pmix_where_srun_offers_it_else_pmi2(listing, mpi):
    assert srun(listing)[-1] == mpi
    assert [a for a in srun(listing) if a.startswith("--mpi")] == [mpi]


def test_an_mpi_the_user_names_is_kept_and_srun_is_not_asked():
    assert srun({"skipped": True}, ["--mpi=pmix_v4"])[-1] == "--mpi=pmix_v4"
    assert [a for a in srun({"skipped": True}, ["--mpi=pmix_v4"]) if a.startswith("--mpi")] == ["--mpi=pmix_v4"]
    names = {"validate_nccl_srun_args": ["--mpi=pmix_v4"], "__validate_multi_srun": True}
    templar = Templar(loader=DataLoader(), variables=trusted(names))
    assert not all(templar.template(trusted("{{ " + c + " }}")) for c in READ["when"])


def test_srun_asks_for_the_partition_that_holds_both_nodes_not_the_default_one():
    """A node outside the default partition (a PCIe node of its own partition beside a rack's) is
    reached through a partition that holds it; where none holds every node, srun is left to say so."""
    assert "--partition=gpu" in srun(SLURM_22_05)
    assert not [a for a in srun(SLURM_22_05, partitions="a|gpu\nb|pcie\n") if a.startswith("--partition")]
    variables = {
        "item": {"hosts": ["t1", "t2"], "subject": "2 trays"},
        "__validate_slurm_names": {"t1": "rack-t1", "t2": "rack-t2"},
        "__validate_multi_srun": True,
        "__validate_held": [],
        "__validate_partitions": {"stdout": "rack-t1|nvl72\nrack-t2|nvl72\nrack-x|pcie\n"},
        **MNDIAG["vars"],
    }
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    launcher = templar.template(trusted(MNDIAG["gpuops.cluster.mndiag_run"]["launcher"]))
    assert launcher == [
        "srun", "-J", "gpuops-validate", "-N", "2", "-w", "rack-t1,rack-t2", "--ntasks-per-node=1", "--exclusive",
        "--partition=nvl72",
    ]  # fmt: skip
    hosts = templar.template(trusted(MNDIAG["gpuops.cluster.mndiag_run"]["hosts"]))
    assert hosts == {"rack-t1": "t1", "rack-t2": "t2"}


def test_mpirun_exports_each_variable_of_the_run():
    """Without Slurm, mpirun carries the run's environment to every rank: NCCL_ALGO and
    NCCL_MNNVL_ENABLE=0 over the NICs, NCCL_MNNVL_ENABLE=1 across an NVLink domain."""
    for environment in ({"NCCL_ALGO": "Ring", "NCCL_MNNVL_ENABLE": "0"}, {"NCCL_MNNVL_ENABLE": "1"}):
        variables = {
            "item": {"hosts": ["a", "b"], "gpus_per_node": 4, "environment": environment},
            "__validate_names": ["a", "b"],
        }
        templar = Templar(loader=DataLoader(), variables=trusted(variables))
        argv = templar.template(trusted(MEASURE["vars"]["__validate_mpirun"]))
        exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
        assert exported == list(environment) and argv[-2:] == ["-H", "a:4,b:4"]
