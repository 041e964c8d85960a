# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""make test's time table: each tier and each Molecule scenario with its time, and the tests passed.

    test_times.py record FILE KIND NAME SECONDS [LOG]   append one row; LOG is pytest's output, read
                                                       for its "N passed" (unit tier, Molecule verify)
    test_times.py report FILE [--budget S]             print the table, the total and the share of CI

KIND is setup, tier, scenario, failed (a scenario that failed: LOG is its digest of reasons,
printed again after the table, so that they are in the last lines of a long CI log), wall (the
Molecule tier's own wall time: scenarios run side by side, so the total counts it instead of their
sum) or beside (a step that ran beside others, shown indented: the total counts its group's wall
time, or the time waited for it, instead). A scenario's verify count is the last pytest summary in
its log (testinfra runs in Molecule's verify step), and its Molecule steps' times come from the
stamps molecule-all.sh puts on their first lines. Standard library only: it runs before the
virtualenv.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# pytest's summary line ("==== 18 passed, 6 skipped in 14.51s ===="); Molecule prefixes it with a frame.
PASSED = re.compile(r"=+ (?:\d+ \w+, )*(\d+) passed\b")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def passed(log: Path) -> int | None:
    """The 'N passed' of the last pytest summary line in LOG, or None without one."""
    if not log.is_file():
        return None
    count = None
    for line in log.read_text(errors="replace").splitlines():
        m = PASSED.search(ANSI.sub("", line))
        if m:
            count = int(m.group(1))
    return count


# A Molecule step's first line, stamped by molecule-all.sh with the seconds since the scenario began.
# Molecule writes "site ➜ converge: Executing" on a terminal, "[site > converge] Executing" in a plain
# locale (CI).
STEP = re.compile(r"^\[\+(\d+)s\] .*?(?:➜ (\w+):| > (\w+)\]) Executing")


def steps(log: Path, seconds: int) -> str:
    """Each Molecule step of LOG with its seconds ("create 41 prepare 63 ..."), or "" without stamps."""
    if not log.is_file():
        return ""
    starts: list[tuple[str, int]] = []
    for line in log.read_text(errors="replace").splitlines():
        m = STEP.match(ANSI.sub("", line))
        name = m and (m.group(2) or m.group(3))
        if name and not (starts and starts[-1][0] == name):
            starts.append((name, int(m.group(1))))
    if not starts:
        return ""
    ends = [start[1] for start in starts[1:]] + [seconds]
    return " ".join(f"{name} {end - at}" for (name, at), end in zip(starts, ends, strict=True))


def record(args: argparse.Namespace) -> None:
    log = Path(args.log) if args.log else None
    if args.kind == "failed":
        # No count; the detail is the reasons' file, read back by report.
        count, detail = None, str(log)
    else:
        count = passed(log) if log else None
        detail = steps(log, int(args.seconds)) if log and args.kind == "scenario" else ""
    with Path(args.file).open("a", encoding="utf-8") as f:
        f.write(f"{args.kind}\t{args.name}\t{int(args.seconds)}\t{'' if count is None else count}\t{detail}\n")


def fmt(seconds: int) -> str:
    return f"{seconds // 60}:{seconds % 60:02d}"


def report(args: argparse.Namespace) -> None:
    path = Path(args.file)
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            kind, name, seconds, count, *detail = line.split("\t")
            rows.append((kind, name, int(seconds), int(count) if count else None, "".join(detail)))
    failed = [r for r in rows if r[0] == "failed"]
    rows = [r for r in rows if r[0] != "failed"]
    # Setup steps and tiers in the order they ran, then Molecule's wall time, then its scenarios.
    rows.sort(key=lambda r: {"setup": 0, "tier": 0, "beside": 0, "wall": 1, "scenario": 2}[r[0]])
    walls = [r for r in rows if r[0] == "wall"]
    total = sum(r[2] for r in rows if r[0] not in ("beside", "scenario" if walls else "wall"))
    unit = sum(r[3] or 0 for r in rows if r[0] in ("tier", "beside") and r[1] == "unit")
    verify = sum(r[3] or 0 for r in rows if r[0] == "scenario")
    print()
    print("==> make test: time per tier and scenario")
    print(f"  {'step':<28} {'seconds':>8} {'m:ss':>6} {'tests passed':>13}")
    for kind, name, seconds, count, detail in rows:
        label = (
            f"  {name}"
            if kind == "scenario" and walls
            else f"molecule {name}"
            if kind == "scenario"
            else f"  {name}"
            if kind == "beside"
            else name
        )
        print(f"  {label:<28} {seconds:>8} {fmt(seconds):>6} {'' if count is None else count:>13}")
        if detail:
            print(f"      steps (s): {detail}")
    print(f"  {'total':<28} {total:>8} {fmt(total):>6}")
    print(f"  share of CI's {args.budget} s: {100 * total / args.budget:.0f} %")
    print(f"  unit tests passed: {unit}; Molecule verify tests passed: {verify}")
    for row in failed:
        name, seconds, why = row[1], row[2], row[4]
        print(f"\n==> scenario {name} FAILED after {seconds} s")
        reasons = Path(why)
        print(reasons.read_text(errors="replace").rstrip() if reasons.is_file() else f"  (no reasons: {why})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("file")
    rec.add_argument("kind", choices=["setup", "tier", "scenario", "failed", "wall", "beside"])
    rec.add_argument("name")
    rec.add_argument("seconds", type=float)
    rec.add_argument("log", nargs="?")
    rep = sub.add_parser("report")
    rep.add_argument("file")
    rep.add_argument("--budget", type=int, default=5400)
    args = parser.parse_args()
    {"record": record, "report": report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
