# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception type the parsers of this collection raise."""

from __future__ import annotations


class ParseError(ValueError):
    """Output of a command that the parser cannot read.

    ``command`` names the command whose output it was, ``line_number`` (1-based) and ``line``
    point at the offending line when there is one.
    """

    def __init__(self, message, command=None, line_number=None, line=None):
        self.reason = message
        self.command = command
        self.line_number = line_number
        self.line = line
        where = ""
        if line_number is not None:
            where = " at line {}: {!r}".format(line_number, (line or "")[:200])
        prefix = f"{command}: " if command else ""
        super().__init__(f"{prefix}{message}{where}")


# OpenMPI's --tag-output prefix ("[1,0]<stdout>:") on each line of a launched command.
_MPI_TAG = "<stdout>:"


def text_lines(text, command):
    """The lines of a command's output, CRLF and OpenMPI's ``[1,0]<stdout>:`` tags taken off.

    Raises :class:`ParseError` naming ``command`` when ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", command)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out = []
    for line in lines:
        tagged = line.startswith("[") and _MPI_TAG in line[:24]
        out.append(line.split(_MPI_TAG, 1)[1] if tagged else line)
    return out
