# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parser for the output of nccl-tests (``all_reduce_perf`` and the other ``*_perf``).

The result table's columns are read from its own header, so the layouts of every nccl-tests
release parse the same way: the older one (``size count type redop | time algbw busbw error``
twice), the one with a ``root`` column and ``#wrong`` counts, and 2.18's wider ``#wrong``.
Launcher output around the table (mpirun and srun lines, ``NCCL INFO`` lines, OpenMPI's
``[1,0]<stdout>:`` tags) is skipped.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError, text_lines

COMMAND = "all_reduce_perf (nccl-tests)"
_TEST = re.compile(r"#\s*Collective test (?:starting|concluded):\s*(\S+)")
_RANK = re.compile(r"#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_FLOAT = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z")
_INT = re.compile(r"\d+\Z")
_MEASURES = ("time", "algbw", "busbw")
_CHECK = ("#wrong", "wrong", "error")
_MAX_ROWS = 10000


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

    Returns ``{"test", "nranks", "rows", "avg_busbw", "out_of_bounds"}``: ``test`` from the
    ``# Collective test starting:`` line (or None), ``nranks`` the ranks under ``# Using
    devices`` (or None), ``rows`` one per message size in order, each ``{"size", "count", "type",
    "redop", "oop": {"time_us", "algbw", "busbw", "wrong"}, "ip": {...}}`` (``wrong`` is the
    ``#wrong`` count, the older layout's error value, or None for ``N/A``), ``avg_busbw`` the
    ``# Avg bus bandwidth`` line (an average over every size, not a gate) and ``out_of_bounds``.
    """
    lines = text_lines(text, COMMAND)
    result = {"test": None, "nranks": None, "rows": [], "avg_busbw": None, "out_of_bounds": None}
    columns = None
    ranks = 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
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
            match = _AVG.match(stripped)
            if match:
                result["avg_busbw"] = _number(match.group(1), "Avg bus bandwidth", number, line)
                continue
            match = _OOB.match(stripped)
            if match:
                result["out_of_bounds"] = int(match.group(1))
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
