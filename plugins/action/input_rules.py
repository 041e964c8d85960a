# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side check of a role's input rules: every broken rule in one failure, opt-outs as warnings."""

from __future__ import annotations

import re

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

_ARGS = frozenset(("role", "rules", "warnings", "downloads"))
# What a download's checksum variable may hold: get_url's algorithm:digest or algorithm:URL of a
# checksum file, with a SHA-2 algorithm; or the explicit opt-out, warned about on every run.
CHECKSUM = re.compile(r"(sha256|sha384|sha512):\S+")
UNVERIFIED = "unverified"


def _truthy(value):
    """A rule's ``ok`` as the role wrote it: a bool, or the string a template gave."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    return boolean(str(value).strip(), strict=False)


def download_rules(role, downloads):
    """Rules and warnings for the downloads a role makes: each one checked against a SHA-2 checksum."""
    rules, warnings = [], []
    if not isinstance(downloads, list):
        raise ValueError(f"input_rules ({role}): downloads must be a list of {{variable, value, url, use}} items")
    for index, item in enumerate(downloads):
        if not isinstance(item, dict) or not {"variable", "value", "url", "use"} <= set(item):
            raise ValueError(f"input_rules ({role}): download {index + 1} needs a variable, value, url and use")
        if "needed" in item and not _truthy(item["needed"]):
            continue
        variable, value, url, use = (
            "" if item[k] is None else str(item[k]) for k in ("variable", "value", "url", "use")
        )
        name = url.rstrip("/").rsplit("/", 1)[-1] or url
        if value == UNVERIFIED:
            warnings.append(f"{variable} is {UNVERIFIED}: {url} {use} without a checksum check.")
            continue
        rules.append(
            {
                "ok": CHECKSUM.fullmatch(value) is not None,
                "msg": f"{variable} must be the checksum of {name}, sha256:DIGEST or sha256:URL of the checksum file "
                f'next to it, so that it is verified before it {use} (got "{value}"); "{UNVERIFIED}" turns the '
                "check off, with a warning on every run.",
            }
        )
    return rules, warnings


def evaluate(role, rules, warnings, downloads=None):
    """Return (errors, warnings, message) for one role's rules; pure, for the unit tests."""
    if not isinstance(role, str) or not role:
        raise ValueError("input_rules: role must be the role's name, e.g. role: slurm")
    if not isinstance(rules, list):
        raise ValueError(f"input_rules ({role}): rules must be a list of {{ok, msg}} items")
    extra_rules, extra_warnings = download_rules(role, downloads or [])
    errors = []
    for index, rule in enumerate(rules + extra_rules):
        if not isinstance(rule, dict) or "ok" not in rule or "msg" not in rule:
            raise ValueError(f"input_rules ({role}): rule {index + 1} needs an ok and a msg, got {rule!r}")
        if not _truthy(rule["ok"]):
            errors.append(" ".join(str(rule["msg"]).split()))
    kept = [" ".join(str(w).split()) for w in (warnings or []) if w] + extra_warnings
    message = ""
    if errors:
        lines = [f"The {role} role cannot run with these inputs ({len(errors)} to fix):"]
        lines += [f"  - {e}" for e in errors]
        message = "\n".join(lines)
    return errors, kept, message


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        unknown = sorted(set(args) - _ARGS)
        if unknown:
            return dict(result, failed=True, msg=f"input_rules: unknown option(s) {', '.join(unknown)}")
        try:
            errors, warnings, message = evaluate(
                args.get("role"), args.get("rules", []), args.get("warnings", []), args.get("downloads", [])
            )
        except ValueError as exc:
            return dict(result, failed=True, msg=str(exc))
        result.update(changed=False, errors=errors, role=args["role"])
        if warnings:
            result["warnings"] = [f"{args['role']}: {w}" for w in warnings]
        if errors:
            result.update(failed=True, msg=message)
        else:
            result["msg"] = f"The {args['role']} role's inputs are sound"
        return result
