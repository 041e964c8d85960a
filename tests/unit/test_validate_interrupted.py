# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A validation interrupted while it holds drained nodes resumed for its NCCL runs (Ctrl-C, a lost
controller: main.yml's always section never runs) left them in service, and the next run deleted its
reservation without draining them again. The role's own task files run here, through ansible-playbook,
against a fake Slurm (scontrol and sinfo that log each call and keep a reservation)."""

from __future__ import annotations

import json
import os
import sys
import textwrap

from conftest import ROOT, ansible_playbook

SCONTROL = """#!/bin/sh
echo "scontrol $*" >> "$FAKE_SLURM/calls"
case "$*" in
  "create reservation"*) echo "ReservationName=gpuops-validate StartTime=now Nodes=x" > "$FAKE_SLURM/reservation" ;;
  "delete ReservationName=gpuops-validate") rm -f "$FAKE_SLURM/reservation" ;;
  "--oneliner show reservation") cat "$FAKE_SLURM/reservation" 2>/dev/null || echo "No reservations in the system" ;;
esac
"""

HELD = [
    {"key": "gpu01", "value": "gpuops-validate: nvlink GPU3, pcie GPU5"},
    {"key": "gpu02", "value": "gpuops-validate: burn-in"},
]


def play(tmp_path, tasks_from, variables):
    playbook = tmp_path / f"{tasks_from}.yml"
    playbook.write_text(
        textwrap.dedent(
            f"""\
            - hosts: localhost
              connection: local
              gather_facts: false
              tasks:
                - ansible.builtin.set_fact:
                    __validate_drained_reasons: "{{{{ drained_now | default({{}}) }}}}"
                - ansible.builtin.include_role:
                    name: gpuops.cluster.validate
                    tasks_from: {tasks_from}
                - ansible.builtin.copy:
                    content: "{{{{ __validate_drained_reasons | default({{}}) | to_json }}}}"
                    dest: {tmp_path}/drained-after.json
                    mode: "0600"
            """
        )
    )
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        FAKE_SLURM=str(tmp_path),
        PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    )
    extra = {
        "validate_slurm_controller": "localhost",
        "__validate_held_file": str(tmp_path / "var" / "held.json"),
        "ansible_python_interpreter": sys.executable,
    }
    extra.update(variables)
    done = ansible_playbook(playbook, "-i", "localhost,", "-e", json.dumps(extra), env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    (tmp_path / "calls").unlink(missing_ok=True)
    return calls, json.loads((tmp_path / "drained-after.json").read_text())


def test_the_next_run_drains_again_what_an_interrupted_validation_resumed(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "scontrol").write_text(SCONTROL)
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    held = tmp_path / "var" / "held.json"

    # The run holds the two drained nodes and resumes them for its reservation, and is interrupted
    # there: main.yml's always section (drain them again, remove the reservation) never runs.
    calls, _drained = play(tmp_path, "hold", {"__validate_held": HELD})
    assert calls == [
        "scontrol create reservation ReservationName=gpuops-validate Nodes=gpu01,gpu02 Users=root StartTime=now "
        "Duration=UNLIMITED Flags=FLEX,IGNORE_JOBS",
        "scontrol update NodeName=gpu01,gpu02 State=RESUME",
    ]
    assert oct(held.stat().st_mode & 0o777) == "0o600"
    assert json.loads(held.read_text()) == {item["key"]: item["value"] for item in HELD}

    # The next run: gpu02 was drained meanwhile by someone else (kept as it is); gpu01 is in service.
    calls, drained = play(tmp_path, "interrupted", {"drained_now": {"gpu02": "cable check"}})
    assert calls == [
        "scontrol update NodeName=gpu01 State=DRAIN Reason=gpuops-validate: nvlink GPU3, pcie GPU5",
        "scontrol --oneliner show reservation",
        "scontrol delete ReservationName=gpuops-validate",
    ]
    assert drained == {"gpu01": "gpuops-validate: nvlink GPU3, pcie GPU5", "gpu02": "cable check"}
    assert not held.exists() and not (tmp_path / "reservation").exists()

    # A run after a run that ended well: nothing recorded, nothing to do.
    calls, drained = play(tmp_path, "interrupted", {"drained_now": {}})
    assert calls == [] and drained == {}
