# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parser for ``dcgmi diag``: its JSON (``-j``) and its table.

The JSON shapes: DCGM 3 (``"DCGM GPU Diagnostic"``, a status per GPU under ``results``) and
DCGM 4 (``"DCGM Diagnostic"``, ``test_summary.status`` per test, results per entity), as
DCGM's own schema (``testing/python3/dcgm_diag_schema.json``) describes them. Test names
changed in DCGM 4.4.2 (NVIDIA/DCGM#296); they are kept as DCGM prints them.
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError, text_lines

COMMAND = "dcgmi diag"
RESULTS = ("Pass", "Fail", "Warn", "Skip")
_ROW = re.compile(r"\|([^|]*)\|([^|]*)\|\Z")
_META = ("DCGM Version", "Driver Version Detected", "GPU Device IDs Detected", "GPU Device Serials Detected")
_RESULT_WORD = re.compile(r"(Pass|Fail|Warn|Skip)\b")
_MAX_TESTS = 1000


def _normal(status, where):
    status = (status or "").strip()
    for result in RESULTS:
        if status.lower().startswith(result.lower()):
            return result
    raise ParseError(f"unknown test result {status!r}", COMMAND, None, where)


def _worst(statuses):
    for result in ("Fail", "Warn", "Pass", "Skip"):
        if result in statuses:
            return result
    return "Skip"


def _json_tests(document):
    root = document.get("DCGM Diagnostic", document.get("DCGM GPU Diagnostic"))
    if not isinstance(root, dict):
        raise ParseError("the JSON has no 'DCGM Diagnostic' object", COMMAND)
    error = root.get("runtime_error")
    tests = []
    categories = root.get("test_categories", [])
    if not isinstance(categories, list):
        raise ParseError("'test_categories' is not a list", COMMAND)
    for category in categories:
        if not isinstance(category, dict) or not isinstance(category.get("tests", []), list):
            raise ParseError("a test category is not an object with a list of tests", COMMAND)
        for test in category.get("tests", []):
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                raise ParseError("a test has no name", COMMAND)
            results = test.get("results") or []
            if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
                raise ParseError("the results of test {!r} are not a list of objects".format(test["name"]), COMMAND)
            summary = test.get("test_summary")
            if isinstance(summary, dict) and isinstance(summary.get("status"), str):
                result = _normal(summary["status"], test["name"])
            elif results:
                result = _worst([_normal(str(r.get("status")), test["name"]) for r in results])
            else:
                raise ParseError("test {!r} has no status".format(test["name"]), COMMAND)
            info = []
            for entry in results:
                for warning in entry.get("warnings") or []:
                    text = warning.get("warning") if isinstance(warning, dict) else warning
                    if isinstance(text, str) and text not in info:
                        info.append(text)
                extra = entry.get("info")
                for text in extra if isinstance(extra, list) else [extra]:
                    if isinstance(text, str) and text not in info:
                        info.append(text)
            tests.append({"name": test["name"], "result": result, "info": "; ".join(info) or None})
            if len(tests) > _MAX_TESTS:
                raise ParseError(f"more than {_MAX_TESTS} tests", COMMAND)
    return tests, error if isinstance(error, str) and error else None


def _section(line):
    """A section border such as ``|-----  Deployment  --------+----...|``: a pipe, dashes, the name
    between spaces, dashes, a plus. String operations, not a regular expression: a lazy pattern
    took 10 s on a 30k-space line (quadratic backtracking)."""
    if not line.startswith("|-"):
        return False
    rest = line[1:].lstrip("-")
    head, plus, _tail = rest.partition("+")
    name = head.rstrip("-")
    return bool(plus) and name != head and rest[:1].isspace() and name[-1:].isspace() and bool(name.strip())


def _table_tests(lines):
    tests = []
    last = None
    seen_border = False
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("+") or _section(stripped):
            seen_border = True
            continue
        match = _ROW.match(stripped)
        if not match:
            if seen_border:
                raise ParseError("not a row of the diagnostic table", COMMAND, number, line)
            continue  # "Successfully ran diagnostic for group." and the like
        name, raw = match.group(1).strip(), match.group(2)
        value = raw.strip()
        # A wrapped cell is cut at the column's width, mid-word: keep its text as printed, less
        # the padding (one space before, two after in dcgmi's 48-wide cell) so the pieces join back.
        chunk = raw[1:-2] if raw.endswith("  ") else raw[1:-1]
        if name in ("Diagnostic",) or name in _META:
            last = None
            continue
        if name == "Info" or (not name and last is not None):
            if last is None:
                raise ParseError("an Info row before any test", COMMAND, number, line)
            if name == "Info" and last["info"]:
                last["info"] += "; "
            last["info"] = (last["info"] or "") + chunk
            continue
        if name == "Warning":
            if last is None:
                raise ParseError("a Warning row before any test", COMMAND, number, line)
            # Its text wraps onto continuation rows as Info's does: kept as printed, so the words
            # join back at the wrap.
            last["info"] = ((last["info"] + "; ") if last["info"] else "") + chunk
            continue
        if not name:
            raise ParseError("a continuation row before any test", COMMAND, number, line)
        word = _RESULT_WORD.match(value)
        if not word:
            raise ParseError(f"the result of {name!r} is not Pass, Fail, Warn or Skip", COMMAND, number, line)
        last = {"name": name, "result": word.group(1), "info": None}
        tests.append(last)
        if len(tests) > _MAX_TESTS:
            raise ParseError(f"more than {_MAX_TESTS} tests", COMMAND, number, line)
    for test in tests:
        if test["info"]:
            test["info"] = " ".join(test["info"].split())
    return tests


def parse_dcgmi_diag(text):
    """Parse ``dcgmi diag -r N`` (table) or ``dcgmi diag -r N -j`` (JSON).

    Returns ``{"tests": [{"name", "result", "info"}], "passed": bool, "error": str or None}``:
    ``result`` is Pass, Fail, Warn or Skip (without " - All" or GPU lists), ``info`` the test's
    Info and Warning text (None when there is none), ``passed`` true when no test failed and DCGM
    reported no runtime error.
    """
    lines = text_lines(text, COMMAND)
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("{")), None)
    if start is not None:
        body = "\n".join(lines[start:])
        try:
            document = json.loads(body)
        except ValueError as exc:
            line_number = start + getattr(exc, "lineno", 1)
            line = lines[line_number - 1] if line_number <= len(lines) else None
            raise ParseError(
                f"malformed JSON ({exc.msg})" if hasattr(exc, "msg") else "malformed JSON", COMMAND, line_number, line
            ) from None
        if not isinstance(document, dict):
            raise ParseError("the JSON is not an object", COMMAND, start + 1, lines[start])
        tests, error = _json_tests(document)
    else:
        tests, error = _table_tests(lines), None
        for line in lines:
            if line.strip().startswith("Error"):
                error = line.strip()
                break
    if not tests and error is None:
        raise ParseError("no test results (neither dcgmi's JSON nor its table)", COMMAND)
    return {
        "tests": tests,
        "passed": error is None and all(test["result"] != "Fail" for test in tests),
        "error": error,
    }
