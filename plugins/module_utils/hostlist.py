# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm hostlist expressions: expand ``node[01-04,07]`` to names, and compress names back.

Slurm's semantics: several ranges in one bracket, zero padding taken from a range's first bound,
several bracketed parts in one name (their product), several comma-separated expressions.
"""

from __future__ import annotations

import itertools
import re


class HostlistError(ValueError):
    """A hostlist expression or host name Slurm would not take."""


TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")
RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text):
    """Split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"hostlist {text!r}: brackets inside brackets are not a hostlist.")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"hostlist {text!r}: a ']' without its '['.")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"hostlist {text!r}: a '[' without its ']'.")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _bound(text, inner, size):
    """Refuse a bracket whose ranges alone would exceed MAX_HOSTS, before expanding them."""
    total = 0
    for item in inner.split(","):
        match = RANGE.match(item.strip())
        if match:
            total += max(0, int(match.group(2) or match.group(1)) - int(match.group(1)) + 1)
    if total * size > MAX_HOSTS:
        raise HostlistError(f"hostlist {text[:80]!r} names more than {MAX_HOSTS} hosts; is a range mistyped?")


def _numbers(text, inner):
    out = []
    for item in inner.split(","):
        match = RANGE.match(item.strip())
        if not match:
            raise HostlistError(
                f"hostlist {text!r}: {item!r} is not a number or a range like 01-08 inside the brackets."
            )
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise HostlistError(f"hostlist {text!r}: the range {item!r} runs backwards.")
        width = len(low)
        out += [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
    return out


# The most hosts one expression may name: far beyond any Slurm cluster, and a bound on memory (an
# expression of a few brackets can name billions).
MAX_HOSTS = 100000


def hostlist_expand(expression):
    if isinstance(expression, (list, tuple)):
        expression = ",".join(expression)
    if not isinstance(expression, str):
        raise HostlistError(f"hostlist_expand wants a string such as node[01-04], not {type(expression).__name__}.")
    hosts, seen = [], set()
    for part in _split_top(expression):
        pieces = re.split(r"\[([^\]]*)\]", part)
        choices = []
        size = 1
        for i, piece in enumerate(pieces):
            if i % 2:
                _bound(expression, piece, size)
            choices.append([piece] if i % 2 == 0 else _numbers(expression, piece))
            size *= len(choices[-1])
            if size + len(hosts) > MAX_HOSTS:
                raise HostlistError(
                    f"hostlist {expression[:80]!r} names more than {MAX_HOSTS} hosts; is a range mistyped?"
                )
        for combo in itertools.product(*choices):
            name = "".join(combo)
            if name not in seen:
                seen.add(name)
                hosts.append(name)
    return hosts


def _ranges(numbers):
    values = sorted(set(numbers))
    out, start, prev = [], values[0], values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        out.append((start, prev))
        start = prev = value
    out.append((start, prev))
    return out


def hostlist_compress(hosts):
    if isinstance(hosts, str):
        hosts = hostlist_expand(hosts)
    groups, plain = {}, set()
    for raw in hosts:
        host = str(raw).strip()
        if not host:
            continue
        if any(c in host for c in "[],"):
            raise HostlistError(f"hostlist_compress: {host!r} is not a host name; expand it first.")
        match = TRAILING_NUMBER.match(host)
        if not match:
            plain.add(host)
            continue
        prefix, digits, suffix = match.groups()
        # A zero-padded number fixes its group's width; others have none (yet).
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault((prefix, suffix, width), set()).add(int(digits))
    # node10 belongs with node01..node09 (width 2), as Slurm writes node[01-10].
    for (prefix, suffix, width), numbers in list(groups.items()):
        if width:
            continue
        for number in sorted(numbers):
            padded = (prefix, suffix, len(str(number)))
            if len(str(number)) > 1 and padded in groups:
                groups[padded].add(number)
                numbers.discard(number)
        if not numbers:
            del groups[(prefix, suffix, width)]
    items = [(host, -1, host) for host in plain]
    for (prefix, suffix, width), numbers in groups.items():
        if suffix:
            # Slurm 22.05 (Debian 12's, the one the slurm role installs) answers "Invalid hostlist"
            # to a bracket with text after it (node-[01-02]-gpu): such hosts are listed one by one.
            items += [(prefix, number, f"{prefix}{str(number).zfill(width)}{suffix}") for number in sorted(numbers)]
            continue
        ranges = _ranges(numbers)
        text = ",".join(
            str(low).zfill(width) if low == high else f"{str(low).zfill(width)}-{str(high).zfill(width)}"
            for low, high in ranges
        )
        single = len(ranges) == 1 and ranges[0][0] == ranges[0][1]
        items.append((prefix, min(numbers), f"{prefix}{text}{suffix}" if single else f"{prefix}[{text}]{suffix}"))
    return ",".join(text for _prefix, _first, text in sorted(items))
