# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mig role tells Slurm 22.05's two exits 1 of `scontrol show node` apart, templated from the
role's own task. The outputs are Debian 12's scontrol 22.05.8, taken in molecule/fleet's cluster:
a node slurm.conf does not name, and a controller address nothing listens on."""

from __future__ import annotations

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import ROOT, trusted

BLOCK = next(t for t in yaml.safe_load((ROOT / "roles" / "mig" / "tasks" / "apply.yml").read_text()) if "block" in t)[
    "block"
]
TASK = next(
    t
    for t in BLOCK
    if t.get("name") == "Refuse to change the layout when slurmctld cannot say whether the node runs jobs"
)


def passes(rc, stdout, stderr=""):
    variables = {"__mig_slurm_before": {"rc": rc, "stdout": stdout, "stderr": stderr}}
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    return templar.template(trusted("{{ " + TASK["ansible.builtin.assert"]["that"].strip() + " }}"))


@pytest.mark.parametrize(
    "rc, stdout, stderr, ok",
    [
        (0, "NodeName=gpu01 Arch=x86_64 CoresPerSocket=32 State=IDLE", "", True),
        (1, "", "Node gpu01 not found", True),  # not in Slurm yet: nothing to drain
        (1, "", "slurm_load_node error: Unable to contact slurm controller (connect failure)", False),
        (1, "", "", False),
        (2, "", "[Errno 2] No such file or directory: b'scontrol'", True),  # Slurm not installed yet
    ],
)
def test_only_a_node_slurm_does_not_know_skips_the_drain(rc, stdout, stderr, ok):
    assert passes(rc, stdout, stderr) is ok
