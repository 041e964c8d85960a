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


# ---------------------------------------------------------------------------------------------
# dcgmi health -c -j: DCGM's health watches, checked

HEALTH_COMMAND = "dcgmi health -c -j"
HEALTH_RESULTS = ("Healthy", "Warning", "Failure")
_HEALTH_OFF = "health watches not enabled"
_MAX_INCIDENTS = 1000


def _health(value, where):
    value = value.strip() if isinstance(value, str) else value
    if value not in HEALTH_RESULTS:
        raise ParseError(
            f"unknown health {value!r} (DCGM prints {', '.join(HEALTH_RESULTS)})", HEALTH_COMMAND, None, where
        )
    return value


def _value(node, where):
    if not isinstance(node, dict) or not isinstance(node.get("value"), str):
        raise ParseError("a health entry without its value", HEALTH_COMMAND, None, where)
    return node["value"]


def _children(node, where):
    """A health entry's ``children`` object ({} where it has none); any other shape is a ParseError."""
    if not isinstance(node, dict):
        raise ParseError("a health entry is not an object", HEALTH_COMMAND, None, where)
    children = node.get("children") or {}
    if not isinstance(children, dict):
        raise ParseError("a health entry's children are not an object", HEALTH_COMMAND, None, where)
    return children


def _incidents(body):
    """Each system's incident of each entity, in DCGM's order: ``body[group].children[id].children
    .Errors.children[system]`` with the system's health as ``value`` and its messages, wrapped at 54
    characters, as ``overflow`` (dcgmi/Health.cpp, HandleOneEntity)."""
    incidents = []
    for group, entities in body.items():
        if group == "Overall Health":
            continue
        if not isinstance(entities, dict) or not isinstance(entities.get("children", {}), dict):
            raise ParseError(f"entity group {group!r} is not an object", HEALTH_COMMAND, None, str(group))
        for entity, node in entities.get("children", {}).items():
            where = f"{group} {entity}"
            entity_health = _health(_value(node, where), where)
            errors = _children(_children(node, where).get("Errors") or {}, where)
            for system, detail in errors.items():
                text = detail.get("overflow") if isinstance(detail, dict) else None
                if text is not None and not (isinstance(text, list) and all(isinstance(t, str) for t in text)):
                    raise ParseError("an incident's message is not a list of text", HEALTH_COMMAND, None, where)
                incidents.append(
                    {
                        "entity": where,
                        "system": str(system),
                        "health": _health(_value(detail, where), where),
                        "message": " ".join(" ".join(text or []).split()),
                    }
                )
                if len(incidents) > _MAX_INCIDENTS:
                    raise ParseError(f"more than {_MAX_INCIDENTS} incidents", HEALTH_COMMAND, None, where)
            if not errors and entity_health != "Healthy":
                incidents.append({"entity": where, "system": "", "health": entity_health, "message": ""})
    return incidents


def parse_dcgmi_health(text):
    """Parse ``dcgmi health -c -j`` (DCGM 3 and 4; the JSON of dcgmi's DcgmiOutputJson).

    Returns ``{"watches": bool, "overall": str or None, "incidents": [{"entity", "system",
    "health", "message"}]}``. ``watches`` is false, and ``overall`` None, where DCGM answers that no
    health watch is enabled on the group (they are not kept across a restart of the host engine);
    ``overall`` and each ``health`` are Healthy, Warning or Failure; ``entity`` is ``GPU 2``, and
    ``message`` the incident's messages joined. Any other ``Error:`` line is a ParseError naming it.
    """
    lines = text_lines(text, HEALTH_COMMAND)
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("{")), None)
    if start is None:
        for number, line in enumerate(lines, 1):
            if _HEALTH_OFF in line.lower():
                return {"watches": False, "overall": None, "incidents": []}
            if line.strip().startswith("Error"):
                raise ParseError("DCGM refused the health check", HEALTH_COMMAND, number, line)
        raise ParseError("no health report (dcgmi's JSON)", HEALTH_COMMAND)
    try:
        document = json.loads("\n".join(lines[start:]))
    except ValueError as exc:
        number = start + getattr(exc, "lineno", 1)
        line = lines[number - 1] if number <= len(lines) else None
        raise ParseError(f"malformed JSON ({getattr(exc, 'msg', exc)})", HEALTH_COMMAND, number, line) from None
    body = document.get("body") if isinstance(document, dict) else None
    if not isinstance(body, dict) or "Overall Health" not in body:
        raise ParseError("no Overall Health in the report's body", HEALTH_COMMAND, start + 1, lines[start])
    overall = _health(_value(body["Overall Health"], "Overall Health"), "Overall Health")
    return {"watches": True, "overall": overall, "incidents": _incidents(body)}


# ---------------------------------------------------------------------------------------------
# dcgmi mndiag --json (DCGM 4.3 and later): the JSON dcgmi's MnDiag.cpp builds (DCGM 4.6.0). Its
# top level has "name" ("DCGM Multi-Node Diagnostic"), "metadata" (num_hosts, num_entities),
# "hosts" (host_id, hostname, dcgm_version, driver_version, entities: entity_group, entity_id,
# serial_num), "test_categories" (one category of tests: name, status, results per entity with
# host_id, entity_group, entity_id, status and warnings), "global_errors" (warning,
# error_category, host_id), and "runtime_error" when the run itself failed.

MNDIAG_COMMAND = "dcgmi mndiag"
MNDIAG_RESULTS = ("Pass", "Fail", "Warn", "Skip", "Not Run", "Unknown")
_MAX_MNDIAG = 10000


def _mndiag_status(value, where):
    if value not in MNDIAG_RESULTS:
        raise ParseError(f"unknown result {value!r} at {where}", MNDIAG_COMMAND)
    return value


def _mndiag_list(document, key, where):
    value = document.get(key, [])
    if not isinstance(value, list) or len(value) > _MAX_MNDIAG:
        raise ParseError(f"{where}{key} is not a list of at most {_MAX_MNDIAG} entries", MNDIAG_COMMAND)
    for number, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ParseError(f"{where}{key}[{number}] is not an object", MNDIAG_COMMAND)
    return value


def _mndiag_messages(entries):
    return [str(entry.get("warning") or "").strip() for entry in entries if str(entry.get("warning") or "").strip()]


def _mndiag_results(test, hosts, where):
    results = []
    for number, result in enumerate(_mndiag_list(test, "results", where)):
        host_id = result.get("host_id")
        entity = result.get("entity_id")
        if isinstance(host_id, bool) or not isinstance(host_id, int) or isinstance(entity, bool):
            raise ParseError(f"{where}results[{number}] has no numeric host_id", MNDIAG_COMMAND)
        results.append(
            {
                "host": hosts.get(host_id, f"host {host_id}"),
                "entity": f"{result.get('entity_group') or 'GPU'} {entity}",
                "status": _mndiag_status(result.get("status"), f"{where}results[{number}].status"),
                "messages": _mndiag_messages(_mndiag_list(result, "warnings", f"{where}results[{number}].")),
            }
        )
    return results


def parse_dcgmi_mndiag(text):
    """Parse ``dcgmi mndiag --json``.

    Returns ``{"status", "runtime_error", "hosts": {host_id: hostname}, "results": [{"host",
    "entity", "status", "messages"}], "errors": [messages]}``: ``status`` the worst test status
    (Pass, Fail, Warn, Skip, Not Run; None without a test), ``results`` each GPU's result named by
    its host, ``errors`` the errors of no GPU (an MPI failure, a host that did not answer).
    Anything else is a ParseError naming the command and what is missing.
    """
    lines = text_lines(text, MNDIAG_COMMAND)
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("{")), None)
    if start is None:
        for number, line in enumerate(lines, 1):
            if line.strip().startswith("Error"):
                raise ParseError("the multi-node diagnostic did not run", MNDIAG_COMMAND, number, line)
        raise ParseError("no report (dcgmi's JSON)", MNDIAG_COMMAND)
    try:
        document = json.loads("\n".join(lines[start:]))
    except (ValueError, RecursionError) as exc:
        raise ParseError(
            f"malformed JSON ({getattr(exc, 'msg', exc)})", MNDIAG_COMMAND, start + 1, lines[start]
        ) from None
    if not isinstance(document, dict) or document.get("name") != "DCGM Multi-Node Diagnostic":
        raise ParseError(
            'not the report of a multi-node diagnostic (no "name": "DCGM Multi-Node Diagnostic")', MNDIAG_COMMAND
        )
    hosts = {}
    for number, host in enumerate(_mndiag_list(document, "hosts", "")):
        if isinstance(host.get("host_id"), int) and isinstance(host.get("hostname"), str):
            hosts[host["host_id"]] = host["hostname"]
        else:
            raise ParseError(f"hosts[{number}] has no host_id and hostname", MNDIAG_COMMAND)
    statuses, results = [], []
    for number, category in enumerate(_mndiag_list(document, "test_categories", "")):
        for index, test in enumerate(_mndiag_list(category, "tests", f"test_categories[{number}].")):
            where = f"test_categories[{number}].tests[{index}]."
            statuses.append(_mndiag_status(test.get("status"), where + "status"))
            results += _mndiag_results(test, hosts, where)
    errors = _mndiag_messages(_mndiag_list(document, "global_errors", ""))
    runtime = document.get("runtime_error")
    status = next((s for s in ("Fail", "Warn", "Not Run", "Unknown", "Pass", "Skip") if s in statuses), None)
    return {
        "status": status,
        "runtime_error": str(runtime).strip() if runtime else None,
        "hosts": hosts,
        "results": results,
        "errors": errors,
    }
