# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm role's handlers: a config-less slurmd restarts only once slurmctld answers.

Slurm 21.08's config-less slurmd (Ubuntu 22.04) exits with "failed to load configs" when slurmctld
does not answer its fetch within about ten seconds, and a slurmctld restarted by the handler before
it answers `scontrol ping` with DOWN for a few seconds (seen on the slurm_cluster scenario's nodes).
"""

from __future__ import annotations

from pathlib import Path

import yaml

HANDLERS = Path(__file__).resolve().parents[2] / "roles" / "slurm" / "handlers" / "main.yml"
WAIT = "Wait until slurmctld answers before a config-less slurmd restarts"


def handlers() -> list[dict]:
    return yaml.safe_load(HANDLERS.read_text())


def test_the_wait_runs_after_slurmctlds_restarts_and_before_slurmds():
    names = [handler["name"] for handler in handlers()]
    wait = names.index(WAIT)
    assert names.index("Restart slurmctld") < wait
    assert names.index("Restart slurmctld on the controller out of this run") < wait
    assert wait < names.index("Restart slurmd")


def test_the_wait_listens_to_slurmds_restart_and_asks_the_controller_for_a_bounded_time():
    wait = next(handler for handler in handlers() if handler["name"] == WAIT)
    assert wait["listen"] == "Restart slurmd"
    assert wait["ansible.builtin.command"]["argv"] == ["scontrol", "ping"]
    assert wait["delegate_to"] == "{{ __slurm_controller }}"
    assert "'is UP' in __slurm_ctld_ping.stdout" in wait["until"]
    assert wait["retries"] * wait["delay"] <= 120
    # Only a config-less node waits; a node with its own slurm.conf starts without slurmctld.
    assert "__slurm_configless_node | default(false) | bool" in wait["when"]
    assert "not ansible_check_mode" in wait["when"]
