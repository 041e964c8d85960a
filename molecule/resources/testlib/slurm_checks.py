# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks shared by the scenarios that run a Slurm cluster (slurm_cluster, site)."""

from __future__ import annotations

import re
import time


def assert_idle_with_gres(host, gres: dict, partition: str = "", timeout: float = 180) -> None:
    """Wait until every node of `gres` (name -> gpu:type:count) is idle, then check its Gres."""
    command = "sinfo -N -h -o '%N %T %G'" + (f" -p {partition}" if partition else "")
    deadline = time.monotonic() + timeout
    while True:
        rows = dict(line.split(None, 1) for line in host.check_output(command).splitlines())
        if all(rows.get(node, "").startswith("idle") for node in gres) or time.monotonic() > deadline:
            break
        time.sleep(2)
    for node, expected in gres.items():
        state, reported = rows[node].split()
        assert state == "idle", f"{node}: {state}"
        # Each type with its sockets: gpu:h100_1g.10gb:16(S:0),gpu:h100:5(S:0-1).
        assert re.sub(r"\([^)]*\)", "", reported).startswith(expected), f"{node}: {reported}"


def accounted_gpu_job(host, gres: str, name: str, options: str = "", timeout: float = 120) -> dict:
    """Run a batch job named `name` asking for `gres` to its end; return its sacct record once
    slurmdbd has the whole of it.

    On a loaded machine sacct has shown the job already COMPLETED on its node but named
    "allocation", before the record with the job's own name; so the wait is for that name too.
    """
    job = host.check_output(
        f"sbatch --parsable --wait --job-name={name} {options} --gres={gres} --output=/dev/null"
        " --wrap 'printenv CUDA_VISIBLE_DEVICES'"
    ).strip()
    fields = ("JobName", "State", "NodeList", "AllocTRES")
    deadline = time.monotonic() + timeout
    while True:
        row = host.check_output(f"sacct -X -n -P -j {job} --format={','.join(fields)}").strip()
        record = dict(zip(fields, row.split("|"), strict=True)) if row else {}
        if (record.get("JobName"), record.get("State")) == (name, "COMPLETED") or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert record, f"job {job} is not in sacct"
    record["AllocTRES"] = set(record["AllocTRES"].split(","))
    return record
