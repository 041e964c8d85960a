# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parser for the output of nccl-tests (``all_reduce_perf`` and the other ``*_perf``).

The result table's columns are read from its own header, so the layouts of every nccl-tests
release parse the same way: the older one (``size count type redop | time algbw busbw error``
twice), the one with a ``root`` column and ``#wrong`` counts, and 2.18's wider ``#wrong``.
Launcher output around the table (mpirun and srun lines, ``NCCL INFO`` lines) is skipped, and the
prefixes launchers put on each line are taken off: OpenMPI's ``[1,0]<stdout>:`` tag, Ray's and
SkyPilot's ``(head, rank=0, pid=3808)``, ``srun --label``'s ``0:``, ``kubectl logs --prefix``'s
``[pod/name/container]``, alone or in front of OpenMPI's tag.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError, text_lines

COMMAND = "all_reduce_perf (nccl-tests)"
_TEST = re.compile(r"#\s*Collective test (?:starting|concluded):\s*(\S+)")
# nccl-tests before 2.12 print no "Group N" field in the rank lines.
_RANK = re.compile(r"#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s")
# nccl-tests' own reading of -b, -e and -f (or -i): "minBytes 8 maxBytes 8589934592 step: 2(factor)".
_BANNER = re.compile(r"#.*\bmaxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_FLOAT = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z")
_INT = re.compile(r"\d+\Z")
_MEASURES = ("time", "algbw", "busbw")
_CHECK = ("#wrong", "wrong", "error")
_MAX_ROWS = 10000
# What launchers put in front of each line (before OpenMPI's "[1,0]<stdout>:" tag, or in its
# place): Ray's and SkyPilot's "(head, rank=0, pid=3808) ", srun --label's "0: ", kubectl logs
# --prefix's "[pod/name/container] ". Anchored, bounded by their closing character: linear.
_LAUNCHER = re.compile(r"\([^()\n]{0,200}\bpid=\d+[^()\n]{0,200}\) ?|\[pod/[^\]\s]{1,300}\] ?|\s{0,8}\d{1,6}: ")
_MPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")


def _untagged(line):
    """The line without a launcher's prefix and OpenMPI's tag, in either order."""
    for _attempt in range(3):
        match = _LAUNCHER.match(line) or _MPI_TAG.match(line)
        if not match or not match.end():
            break
        rest = match.end()
        line = line[rest:]
    return line


def _number(token, what, line_number, line):
    if not _FLOAT.match(token):
        raise ParseError(f"{what} is not a number: {token!r}", COMMAND, line_number, line)
    return float(token)


def _header(line):
    """The column names of a ``# size count type ...`` line, or None for any other line."""
    words = line.lstrip("#").split()
    if words[:2] != ["size", "count"] or "busbw" not in words:
        return None
    return words


def _side(tokens, names, line_number, line):
    side = {}
    for token, name in zip(tokens, names):
        if token == "N/A":
            side[name] = None
        elif name in _CHECK:
            if name == "error":
                side["wrong"] = _number(token, "the error column", line_number, line)
            elif _INT.match(token):
                side["wrong"] = int(token)
            else:
                raise ParseError(f"#wrong is not a count: {token!r}", COMMAND, line_number, line)
            continue
        else:
            side[name] = _number(token, name, line_number, line)
        if name in _CHECK:
            side["wrong"] = None
    out = {"time_us": side.get("time"), "algbw": side.get("algbw"), "busbw": side.get("busbw")}
    out["wrong"] = side.get("wrong")
    return out


def parse_nccl_tests(text):
    """Parse nccl-tests output.

    Returns ``{"test", "nranks", "rows", "avg_busbw", "out_of_bounds", "complete"}``: ``test`` from the
    ``# Collective test starting:`` line (or None), ``nranks`` the ranks under ``# Using
    devices`` (or None), ``rows`` one per message size in order, each ``{"size", "count", "type",
    "redop", "oop": {"time_us", "algbw", "busbw", "wrong"}, "ip": {...}}`` (``wrong`` is the
    ``#wrong`` count, the older layout's error value, or None for ``N/A``), ``avg_busbw`` the
    ``# Avg bus bandwidth`` line (an average over every size, not a gate), ``out_of_bounds``, and
    ``complete``: whether the closing lines (``# Out of bounds values`` or ``# Avg bus
    bandwidth``) follow the table. A run cut off after some size prints neither, and its last row
    is not the largest size it was asked for. ``max_bytes`` and ``step`` (``{"factor": 2}`` or
    ``{"bytes": 1048576}``) are nccl-tests' own reading of ``-e`` and ``-f``/``-i`` from its
    ``# nThread ... maxBytes N step: S(factor)`` line, or None without it.
    """
    lines = text_lines(text, COMMAND)
    result = {
        "test": None,
        "nranks": None,
        "rows": [],
        "avg_busbw": None,
        "out_of_bounds": None,
        "complete": False,
        "max_bytes": None,
        "step": None,
    }
    columns = None
    ranks = 0
    for number, line in enumerate(lines, 1):
        stripped = _untagged(line).strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            match = _TEST.match(stripped)
            if match:
                result["test"] = match.group(1)
                continue
            if _RANK.match(stripped):
                ranks += 1
                continue
            match = _BANNER.match(stripped)
            if match:
                result["max_bytes"] = int(match.group(1))
                result["step"] = {match.group(3): int(match.group(2))}
                continue
            match = _AVG.match(stripped)
            if match:
                result["avg_busbw"] = _number(match.group(1), "Avg bus bandwidth", number, line)
                result["complete"] = bool(result["rows"])
                continue
            match = _OOB.match(stripped)
            if match:
                result["out_of_bounds"] = int(match.group(1))
                result["complete"] = bool(result["rows"])
                continue
            header = _header(stripped)
            if header is not None:
                if columns is not None and result["rows"]:
                    raise ParseError("a second result table", COMMAND, number, line)
                columns = header
            continue
        words = stripped.split()
        if columns is None or not _INT.match(words[0]):
            continue  # launcher and NCCL INFO lines
        if len(words) != len(columns):
            raise ParseError(
                f"{len(words)} values where the table header has {len(columns)} columns",
                COMMAND,
                number,
                line,
            )
        if len(result["rows"]) >= _MAX_ROWS:
            raise ParseError(f"more than {_MAX_ROWS} rows", COMMAND, number, line)
        result["rows"].append(_row(columns, words, number, line))
    if columns is None:
        raise ParseError("no result table (a '#  size  count  type ...' header); did the test start?", COMMAND)
    if not result["rows"]:
        raise ParseError("the result table has no rows; the test stopped before its first size", COMMAND)
    result["nranks"] = ranks or None
    return result


def _row(columns, words, number, line):
    measures = [i for i, name in enumerate(columns) if name == "time"]
    if len(measures) != 2:
        raise ParseError("the table header does not have out-of-place and in-place columns", COMMAND, number, line)
    oop, ip = measures
    fixed = dict(zip(columns[:oop], words[:oop]))
    if not _INT.match(fixed.get("count", "")):
        raise ParseError("count is not a number", COMMAND, number, line)
    redop = fixed.get("redop")
    row = {
        "size": int(words[0]),
        "count": int(fixed["count"]),
        "type": fixed.get("type"),
        "redop": None if redop in (None, "none") else redop,
        "oop": _side(words[oop:ip], columns[oop:ip], number, line),
        "ip": _side(words[ip:], columns[ip:], number, line),
    }
    return row


def reached_max(result):
    """Whether the largest size printed is the last step below ``max_bytes`` (True when the banner
    did not say): a table that stops earlier did not measure what was asked."""
    row, step, top = largest(result), result.get("step"), result.get("max_bytes")
    if row is None or not step or top is None:
        return row is not None
    if "factor" in step and step["factor"] > 1:
        return row["size"] * step["factor"] > top
    return row["size"] + step.get("bytes", step.get("factor", 1)) > top


def largest(result):
    """The row of the largest message size (the gate's measurement), or None."""
    rows = result["rows"]
    return max(rows, key=lambda row: row["size"]) if rows else None


# The older layout's error column is the largest difference from the expected result; what a
# correct reduction leaves depends on the type's precision.
ERROR_TOLERANCE = {"half": 5e-2, "bfloat16": 5e-2, "fp8_e4m3": 0.5, "fp8_e5m2": 0.5}
DEFAULT_ERROR_TOLERANCE = 1e-3


def wrong_rows(result):
    """Rows where either side reports wrong values: a non-zero ``#wrong``, or an error column
    above the tolerance of the row's type (``ERROR_TOLERANCE``)."""
    bad = []
    for row in result["rows"]:
        tolerance = ERROR_TOLERANCE.get(row["type"], DEFAULT_ERROR_TOLERANCE)
        for side in ("oop", "ip"):
            wrong = row[side]["wrong"]
            if wrong is not None and (wrong > tolerance if isinstance(wrong, float) else wrong > 0):
                bad.append(row)
                break
    return bad
