# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dependency_args.py ROOT: every argument that the roles and playbooks under ROOT pass to a module of
a collection galaxy.yml depends on is an option (or an alias) of that module as the running
ansible-doc documents it: the installed dependency, at whatever version the environment holds, takes
every call the collection makes. Prints one line per module checked; exits 1 naming each argument
a module does not take (file, task, argument, what to do)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

KEYWORDS = {"args", "block", "rescue", "always"}


def tasks(node):
    """Every task dict in a parsed tasks/playbook file, blocks and plays included."""
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            if isinstance(node.get(key), list):
                yield from tasks(node[key])


def calls(root, collections):
    """(file, task name, module, argument names) for each call of a dependency's module."""
    for path in sorted([*root.glob("roles/*/tasks/*.yml"), *root.glob("roles/*/handlers/*.yml"),
                        *root.glob("playbooks/**/*.yml")]):  # fmt: skip
        for task in tasks(yaml.safe_load(path.read_text()) or []):
            for key, value in task.items():
                if key.count(".") == 2 and key.rsplit(".", 1)[0] in collections:
                    args = dict(value) if isinstance(value, dict) else {}
                    args.update(task.get("args") or {})
                    yield path.relative_to(root), task.get("name", "?"), key, sorted(args)


def main():
    root = Path(sys.argv[1])
    collections = set(yaml.safe_load((root / "galaxy.yml").read_text()).get("dependencies") or {})
    found = list(calls(root, collections))
    modules = sorted({module for _f, _t, module, _a in found})
    docs = json.loads(subprocess.run(["ansible-doc", "--json", "-t", "module", *modules],
                                     capture_output=True, text=True, check=True).stdout)  # fmt: skip
    accepted = {}
    for module in modules:
        if module not in docs:
            print(f"ERROR: {module} is not in this environment (ansible-doc does not know it): raise galaxy.yml's "
                  f"floor of {module.rsplit('.', 1)[0]} to a version that has it.")  # fmt: skip
            return 1
        options = docs[module]["doc"].get("options") or {}
        accepted[module] = {n for name, o in options.items() for n in [name, *(o.get("aliases") or [])]}
        print(f"{module}: {len(options)} options")
    bad = [(f, t, m, a) for f, t, m, args in found for a in args if a not in accepted[m]]
    for f, t, m, a in bad:
        print(f"ERROR: {f}, task {t!r}: {m} takes no argument {a!r} in this environment's version: raise galaxy.yml's "
              f"floor of {m.rsplit('.', 1)[0]} to one that has it, or do without it.")  # fmt: skip
    print(f"{len(found)} calls of {len(modules)} modules of {', '.join(sorted(collections))}: "
          f"{'every argument accepted' if not bad else f'{len(bad)} not accepted'}")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
