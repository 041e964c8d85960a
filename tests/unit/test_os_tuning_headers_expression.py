# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""os_tuning names os_tuning_kernel_headers when no package list has the running kernel's headers,
instead of apt's error (in check mode too), templated from the role's own task. The policy texts
are apt-cache policy's layout on Debian 12."""

from __future__ import annotations

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import ROOT, trusted

TASK = next(
    t
    for t in yaml.safe_load((ROOT / "roles" / "os_tuning" / "tasks" / "packages.yml").read_text())
    if t.get("name") == "Refuse kernel headers that no package list has"
)
FOUND = "linux-headers-6.1.0-41-amd64:\n  Installed: (none)\n  Candidate: 6.1.158-1\n  Version table:\n"
NONE = "linux-headers-6.8.0-1015-gcp:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n"


def passes(policy):
    variables = {"__os_tuning_headers_policy": {"stdout": policy}}
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    return templar.template(trusted("{{ " + TASK["ansible.builtin.assert"]["that"].strip() + " }}"))


@pytest.mark.parametrize(
    ("policy", "ok"),
    [
        (FOUND, True),
        (NONE, False),  # a kernel no list has (read after lists older than a day are refreshed)
        ("", False),  # apt-cache knows no such package
    ],
)
def test_headers_no_list_has_are_refused_by_the_variable(policy, ok):
    assert passes(policy) is ok
    assert "os_tuning_kernel_headers" in TASK["ansible.builtin.assert"]["fail_msg"]
