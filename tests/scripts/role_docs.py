# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's README variables table, written from its meta/argument_specs.yml, so the two cannot
drift: name, default and description of every public variable, between the README's markers.

    python tests/scripts/role_docs.py           # write the tables (make role-docs)
    python tests/scripts/role_docs.py --check   # fail when one differs (make lint)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml
from stack_spec import between

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "<!-- BEGIN variables: written from meta/argument_specs.yml by make role-docs -->"
END = "<!-- END variables -->"


def cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def row(name, spec, defaults):
    text = spec.get("description") or ""
    text = " ".join(text) if isinstance(text, list) else text
    choices = spec.get("choices")
    if choices and not all(str(choice) in text for choice in choices):
        text += " One of: {}.".format(", ".join(str(choice) for choice in choices))
    # A default the spec cannot hold (a Jinja expression for a bool) is the role's defaults/main.yml one.
    value = spec["default"] if "default" in spec else defaults.get(name)
    default = "`" + json.dumps(value) + "`"
    return f"| `{name}` | {default} | {cell(text)} |"


def table(options, defaults):
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    lines += [row(name, spec, defaults) for name, spec in options.items()]
    return "\n".join(lines) + "\n"


def rendered(readme, options, defaults):
    return between(readme.read_text(), table(options, defaults), BEGIN, END)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when a README's table differs")
    args = parser.parse_args()
    stale = []
    for specs in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        readme = specs.parents[1] / "README.md"
        options = yaml.safe_load(specs.read_text())["argument_specs"]["main"].get("options") or {}
        role_defaults = specs.parents[1] / "defaults" / "main.yml"
        defaults = (yaml.safe_load(role_defaults.read_text()) if role_defaults.exists() else None) or {}
        text = rendered(readme, options, defaults)
        if text != readme.read_text():
            stale.append(str(readme.relative_to(ROOT)))
            if not args.check:
                readme.write_text(text)
    if args.check and stale:
        sys.exit("Variables tables out of date with argument_specs: {}. Run make role-docs.".format(", ".join(stale)))
    print("role READMEs: {} table(s) {}".format(len(stale), "written" if stale else "up to date"))


if __name__ == "__main__":
    main()
