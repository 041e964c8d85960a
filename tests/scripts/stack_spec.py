# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack variables are declared once, in roles/preflight/meta/argument_specs.yml (every option
not prefixed ``preflight_``). This writes what is derived from that declaration, and checks it:

    plugins/module_utils/stack_spec.py   STACK_SPEC, the argument spec stack_check takes
    plugins/doc_fragments/stack.py       stack_check's documentation of those options
    roles/preflight/defaults/main.yml    the defaults, between the "stack" markers
    roles/ROLE/meta/argument_specs.yml   the role that installs what a stack variable pins documents
                                         it too (ansible-doc -t role), between the "stack" markers:
                                         a copy of preflight's entry, saying where it is declared

    python tests/scripts/stack_spec.py           # write them (make stack-spec)
    python tests/scripts/stack_spec.py --check   # fail when one differs (make lint)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "roles" / "preflight" / "meta" / "argument_specs.yml"
KEYS = ("type", "elements", "choices", "default")
HEADER = (
    "# Copyright: (c) 2026, gpuops.cluster contributors\n"
    "# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)\n"
)
GENERATED = "Written by tests/scripts/stack_spec.py from roles/preflight/meta/argument_specs.yml: edit that."
BEGIN, END = "BEGIN stack variables", "END stack variables"


def stack_options():
    options = yaml.safe_load(SPECS.read_text())["argument_specs"]["main"]["options"]
    return {name: spec for name, spec in options.items() if not name.startswith("preflight_")}


def literal(value):
    """A Python literal in the project's format (double quotes, as ruff writes them)."""
    if value is None or isinstance(value, bool) or isinstance(value, int):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r}")


def description(spec):
    text = spec["description"]
    return " ".join(text) if isinstance(text, list) else text


def module_utils(options):
    lines = [
        HEADER + '"""The declared stack variables as stack_check takes them.\n\n' + GENERATED + '\n"""',
        "",
        "from __future__ import annotations",
        "",
        "STACK_SPEC = {",
    ]
    for name, spec in options.items():
        entry = {key: spec[key] for key in KEYS if key in spec and not (key == "default" and spec[key] is None)}
        lines.append(f"    {literal(name)}: {literal(entry)},")
    lines += ["}", "STACK_VARIABLES = tuple(STACK_SPEC)", ""]
    return "\n".join(lines)


def doc_fragment(options):
    doc = {}
    for name, spec in options.items():
        entry = {"description": spec["description"] if isinstance(spec["description"], list) else [spec["description"]]}
        entry.update({key: spec[key] for key in KEYS if key in spec and not (key == "default" and spec[key] is None)})
        doc[name] = entry
    body = yaml.safe_dump({"options": doc}, sort_keys=False, default_flow_style=False, width=100)
    return (
        HEADER
        + "from __future__ import annotations\n\n\n"
        + "class ModuleDocFragment:\n"
        + f"    # {GENERATED}\n"
        + '    DOCUMENTATION = r"""\n'
        + body
        + '"""\n'
    )


def between(text, block, begin, end):
    """``text`` with the lines between the ``begin`` and ``end`` marker lines replaced by ``block``."""
    head, sep, rest = text.partition(begin + "\n")
    if not sep or end not in rest:
        raise SystemExit(f"the markers {begin!r} and {end!r} are missing")
    return head + begin + "\n" + block + rest[rest.index(end) :]


def scalar(value):
    """A default as YAML (JSON's spelling, which YAML reads the same): "580", ["12.8"], true, null."""
    return json.dumps(value)


def defaults_block(options):
    return "".join(f"{name}: {scalar(spec.get('default'))}\n" for name, spec in options.items())


# The role that installs what each stack variable pins, by the variable's prefix.
USED_BY = {"nvidia_driver_": "nvidia_driver", "cudnn_": "cudnn", "cuda_": "cuda", "nccl_": "nccl", "ofed_": "ofed",
           "dcgm_": "dcgm"}  # fmt: skip
WHERE = (
    "Declared once, in gpuops.cluster.preflight, which checks it against the node before any change; this "
    "role installs what preflight resolved from it (gpuops_stack)."
)
INDENT = " " * 6  # an option's indentation under argument_specs.main.options


class _Indented(yaml.SafeDumper):
    """A list indented under its key, as yamllint's rules (and the rest of the specs) want it."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def role_of(name):
    return next(role for prefix, role in USED_BY.items() if name.startswith(prefix))


def role_block(options, role):
    """The stack variables ``role`` uses, as entries of its argument spec's options."""
    entries = {}
    for name, spec in options.items():
        if role_of(name) != role:
            continue
        text = spec["description"] if isinstance(spec["description"], list) else [spec["description"]]
        entry = {key: spec[key] for key in ("type", "elements", "choices") if key in spec}
        entry["description"] = [WHERE, *text]
        if spec.get("default") is not None:
            entry["default"] = spec["default"]
        entries[name] = entry
    body = yaml.dump(entries, Dumper=_Indented, sort_keys=False, default_flow_style=False, width=100 - len(INDENT))
    return "".join(INDENT + line + "\n" for line in body.splitlines())


def outputs():
    options = stack_options()
    defaults = ROOT / "roles" / "preflight" / "defaults" / "main.yml"
    written = {
        ROOT / "plugins" / "module_utils" / "stack_spec.py": module_utils(options),
        ROOT / "plugins" / "doc_fragments" / "stack.py": doc_fragment(options),
        defaults: between(defaults.read_text(), defaults_block(options), f"# {BEGIN}", f"# {END}"),
    }
    for role in sorted(set(USED_BY.values())):
        specs = ROOT / "roles" / role / "meta" / "argument_specs.yml"
        written[specs] = between(specs.read_text(), role_block(options, role), f"{INDENT}# {BEGIN}", f"{INDENT}# {END}")
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when a derived file differs")
    args = parser.parse_args()
    stale = []
    for path, text in outputs().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        sys.exit(
            "Derived from roles/preflight/meta/argument_specs.yml but out of date: {}. Run make stack-spec.".format(
                ", ".join(map(str, stale))
            )
        )
    print("stack variables: {} derived file(s) {}".format(len(stale), "written" if stale else "up to date"))


if __name__ == "__main__":
    main()
