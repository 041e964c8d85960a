# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the facts modules share to run a command and read its output."""

from __future__ import annotations

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError


def first_line(*texts):
    """The first non-blank line of the first text that has one."""
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return None


def run(module, argv):
    """Run ``argv`` in the C locale: the parsers read English output."""
    return module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})


def parse_or_fail(module, parser, text, argv):
    """``parser(text)``, or fail_json naming the command, the line number and the line."""
    try:
        return parser(text)
    except ParseError as exc:
        module.fail_json(
            msg="Could not read the output of `{}`: {}".format(" ".join(argv), exc),
            cmd=argv,
            line_number=exc.line_number,
            line=exc.line,
        )
