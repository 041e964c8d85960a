# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""make test's time table (tests/scripts/test_times.py): the counts it reads from logs and what it prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test_times.py"
sys.path.insert(0, str(SCRIPT.parent))

import test_times  # noqa: E402


@pytest.mark.parametrize(
    ("line", "count"),
    [
        ("============================= 499 passed in 23.05s =============================", 499),
        # Molecule's verify output: a frame in colour before pytest's line, no closing bar.
        ("  \x1b[2m\u2502\x1b[0m ======================== 18 passed, 6 skipped in 14.51s", 18),
        ("==== 2 failed, 14 passed, 1 warning in 9.1s ====", 14),
        ("collected 18 items", None),
        ("test_x.py::test_passed PASSED", None),
    ],
)
def test_the_passed_count_comes_from_pytests_summary_line(tmp_path, line, count):
    log = tmp_path / "x.log"
    log.write_text(f"start\n{line}\nend\n")
    assert test_times.passed(log) == count


def test_the_last_summary_in_a_log_counts(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("=== 3 passed in 1s ===\n...\n=== 5 passed in 2s ===\n")
    assert test_times.passed(log) == 5


def test_the_report_sums_steps_and_tests_and_gives_the_share_of_ci(tmp_path):
    times = tmp_path / "times.tsv"
    unit = tmp_path / "unit.log"
    unit.write_text("==== 537 passed in 28s ====\n")
    verify = tmp_path / "site.log"
    verify.write_text("\u2502 ==== 16 passed in 20s\n")
    for args in (["setup", "image", "64"], ["tier", "unit", "29", str(unit)], ["scenario", "site", "607", str(verify)]):
        subprocess.run([sys.executable, str(SCRIPT), "record", str(times), *args], check=True)
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "report", str(times)], check=True, capture_output=True, text=True
    ).stdout
    assert "molecule site" in out
    assert "  total                             700  11:40" in out
    assert "share of CI's 5400 s: 13 %" in out
    assert "unit tests passed: 537; Molecule verify tests passed: 16" in out


def recorded_and_reported(tmp_path, rows):
    """The report of ROWS, each recorded through the script as make test records it."""
    times = tmp_path / "times.tsv"
    for args in rows:
        subprocess.run([sys.executable, str(SCRIPT), "record", str(times), *args], check=True)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "report", str(times)], check=True, capture_output=True, text=True
    ).stdout


def test_with_scenarios_side_by_side_the_total_counts_molecules_wall_time(tmp_path):
    rows = [["tier", "lint", "48"], ["scenario", "site", "600"], ["scenario", "gpusim", "90"],
            ["wall", "molecule, 2 at a time", "620"]]  # fmt: skip
    out = recorded_and_reported(tmp_path, rows)
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[3:7]] == ["lint", "molecule,", "site", "gpusim"]
    assert "  total                             668  11:08" in out


def test_steps_side_by_side_are_shown_and_only_their_groups_wall_and_the_wait_count(tmp_path):
    rows = [["beside", "docker, images", "150"], ["beside", "lint", "90"], ["beside", "sanity", "100"],
            ["tier", "lint + sanity (side by side)", "100"], ["setup", "waiting for the images", "20"],
            ["wall", "molecule, 2 at a time", "600"]]  # fmt: skip
    out = recorded_and_reported(tmp_path, rows)
    assert "    docker, images                  150   2:30" in out
    assert "    sanity                          100   1:40" in out
    assert "  total                             720  12:00" in out


def test_a_scenarios_steps_come_from_the_stamps_on_molecules_step_lines(tmp_path):
    log = tmp_path / "site.log"
    log.write_text(
        "[+1s] \x1b[36mINFO    \x1b[0m \x1b[32msite\x1b[0m \u279c \x1b[33mdestroy\x1b[0m: \x1b[36mExecuting\x1b[0m\n"
        "[+9s] INFO     site \u279c create: Executing\n"
        "[+40s] INFO     site \u279c converge: Executing\n"
        "[+300s] INFO     site \u279c verify: Executing\n"
        # testinfra's own line in the same step is not a new step.
        "[+301s] INFO     site \u279c verify: Executing Testinfra tests found in molecule/site/tests/...\n"
        "INFO     site \u279c destroy: Executed: Successful\n"
    )
    assert test_times.steps(log, 330) == "destroy 8 create 31 converge 260 verify 30"
    assert test_times.steps(tmp_path / "none.log", 10) == ""


def test_the_steps_of_a_log_written_in_a_plain_locale_count_too(tmp_path):
    """Molecule without a terminal or a UTF-8 locale (CI) writes "[scenario > step] Executing"."""
    log = tmp_path / "os_tuning.log"
    log.write_text(
        "[+2s] INFO     [os_tuning > destroy] Executing\n"
        "[+12s] INFO     [os_tuning > create] Executing\n"
        "INFO     [os_tuning > create] Executed: Successful\n"
        "[+40s] INFO     [os_tuning > converge] Executing\n"
    )
    assert test_times.steps(log, 89) == "destroy 10 create 28 converge 49"


def test_the_report_prints_a_scenarios_steps_under_it(tmp_path):
    log = tmp_path / "slurm.log"
    log.write_text("[+0s] INFO     slurm \u279c create: Executing\n[+20s] INFO     slurm \u279c converge: Executing\n")
    times = tmp_path / "times.tsv"
    subprocess.run([sys.executable, str(SCRIPT), "record", str(times), "scenario", "slurm", "50", str(log)], check=True)
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "report", str(times)], check=True, capture_output=True, text=True
    ).stdout
    assert "steps (s): create 20 converge 30" in out


def test_a_failed_scenarios_reasons_come_again_after_the_table(tmp_path):
    why = tmp_path / "slurm_cluster@ubuntu2204.why"
    why.write_text("==> why it failed\nTASK [Enable and start this host's daemons]\nchanged: [slurm-h100]\n")
    rows = [["tier", "unit", "29"], ["failed", "slurm_cluster@ubuntu2204", "512", str(why)],
            ["scenario", "gpusim", "90"]]  # fmt: skip
    out = recorded_and_reported(tmp_path, rows)
    table, reasons = out.split("Molecule verify tests passed: 0\n")
    # The failed scenario is no row of the table and adds nothing to its total.
    assert "slurm_cluster" not in table
    assert "  total                             119   1:59" in table
    assert reasons.strip().splitlines() == [
        "==> scenario slurm_cluster@ubuntu2204 FAILED after 512 s",
        "==> why it failed",
        "TASK [Enable and start this host's daemons]",
        "changed: [slurm-h100]",
    ]


def test_a_failed_scenario_without_its_reasons_file_says_so(tmp_path):
    out = recorded_and_reported(tmp_path, [["failed", "site", "10", str(tmp_path / "gone.why")]])
    assert out.rstrip().endswith(f"(no reasons: {tmp_path / 'gone.why'})")
