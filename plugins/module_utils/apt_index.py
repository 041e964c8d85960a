# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Debian repository's ``Packages`` index, read the way apt reads it, for the air-gap manifest.

What a pinned request takes (the newest version that matches its pin, as ``apt-get install
name=version*`` does) and what it pulls from the same repository (its Depends and Pre-Depends,
followed while they name packages the index has, and its Recommends for an install with them); a
relation the index cannot satisfy at all comes from the distribution's own mirror and is listed as
such. Pure functions over text.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.dpkg import version_matches as matches_pin
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError

COMMAND = "Packages index"

_FIELD = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*):[ \t]*(.*)$")
_RELATION = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9+.-]*)(?::(?P<arch>[a-z0-9-]+))?"
    r"(?:\s*\(\s*(?P<op><<|<=|=|>=|>>|<|>)\s*(?P<version>[^\s)]+)\s*\))?"
    r"(?:\s*\[[^\]]*\])?(?:\s*<[^>]*>)*$"
)
_VERSION = re.compile(r"(?:(?P<epoch>[0-9]+):)?(?P<rest>[A-Za-z0-9.+~:-]+)\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
# ASCII digits only: str.isdigit() takes "1²", which int() refuses.
_SIZE = re.compile(r"[0-9]{1,15}")
# Fields a bundle needs from each stanza: where the file is, and how to check it.
_NEEDED = ("package", "version", "architecture", "filename", "size", "sha256")
_SHOWN = {"sha256": "SHA256"}
# The relation fields read (Recommends: for an install with recommends, as the cuda role's).
_RELATIONS = ("depends", "pre-depends", "recommends", "provides")


# --- Debian version ordering (Debian Policy 5.6.12) -------------------------------------------------


def _order(char):
    """dpkg's weight of one character of a non-digit run: ~ sorts before the end, letters first."""
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_part(a, b):
    """dpkg's comparison of an upstream version or a revision: alternate non-digit and digit runs."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return -1 if ac < bc else 1
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = (a[i] > b[j]) - (a[i] < b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def split_version(version):
    """``(epoch, upstream, revision)`` of a Debian version; ParseError when it is not one."""
    match = _VERSION.match(version or "")
    if not match:
        raise ParseError(f"{version!r} is not a Debian version", COMMAND)
    rest = match.group("rest")
    upstream, _sep, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    if not upstream or not upstream[0].isdigit():
        raise ParseError(f"{version!r} is not a Debian version: its upstream part must start with a digit", COMMAND)
    return int(match.group("epoch") or 0), upstream, revision


def compare_versions(a, b):
    """-1, 0 or 1 as Debian version ``a`` sorts before, with or after ``b`` (dpkg --compare-versions)."""
    ea, ua, ra = split_version(a)
    eb, ub, rb = split_version(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def satisfies(version, op, wanted):
    """Whether ``version`` meets a relation ``(op wanted)`` of a Depends field."""
    if op is None:
        return True
    order = compare_versions(version, wanted)
    return {
        "<<": order < 0,
        "<": order <= 0,  # obsolete spelling of <=
        "<=": order <= 0,
        "=": order == 0,
        ">=": order >= 0,
        ">": order >= 0,  # obsolete spelling of >=
        ">>": order > 0,
    }[op]


# --- the index --------------------------------------------------------------------------------------


def parse_relations(field, source=COMMAND):
    """``[[{"name", "arch", "op", "version"}]]`` of a Depends field: AND of OR-groups."""
    groups = []
    for raw in (field or "").split(","):
        clause = raw.strip()
        if not clause:
            continue
        group = []
        for alternative in clause.split("|"):
            match = _RELATION.match(alternative.strip())
            if not match:
                raise ParseError(f"cannot read the relation {alternative.strip()!r}", source)
            group.append(
                {
                    "name": match.group("name"),
                    "arch": match.group("arch"),
                    "op": match.group("op"),
                    "version": match.group("version"),
                }
            )
        groups.append(group)
    return groups


def parse_packages(text, source=COMMAND):
    """``{package: [entry]}`` of a ``Packages`` index (or ``apt-cache show`` output), each entry
    ``{"package", "version", "architecture", "depends", "pre_depends", "recommends", "provides", "filename",
    "size", "sha256"}``, versions newest first.

    A stanza without one of Package, Version, Architecture, Filename, Size or SHA256 is an error
    naming its line: a bundle cannot fetch or check such a file. One pass over the lines.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", source)
    index = {}
    fields, start, last = {}, None, None

    def flush():
        if not fields:
            return
        missing = [name for name in _NEEDED if not fields.get(name)]
        if missing:
            raise ParseError(
                "a stanza has no {}; the index must come from a repository (Packages with checksums)".format(
                    ", ".join(_SHOWN.get(n, n.title()) for n in missing)
                ),
                source,
                start,
                fields.get("package", ""),
            )
        if not _SHA256.match(fields["sha256"]):
            raise ParseError(f"{fields['package']}: SHA256 is not 64 hex digits", source, start, fields["sha256"])
        if not _SIZE.fullmatch(fields["size"]):
            raise ParseError(f"{fields['package']}: Size is not a number", source, start, fields["size"])
        split_version(fields["version"])
        entry = {
            "package": fields["package"],
            "version": fields["version"],
            "architecture": fields["architecture"],
            "depends": parse_relations(fields.get("depends"), source),
            "pre_depends": parse_relations(fields.get("pre-depends"), source),
            "recommends": parse_relations(fields.get("recommends"), source),
            "provides": [r["name"] for group in parse_relations(fields.get("provides"), source) for r in group],
            "filename": fields["filename"],
            "size": int(fields["size"]),
            "sha256": fields["sha256"],
        }
        versions = index.setdefault(entry["package"], [])
        if not any(e["version"] == entry["version"] and e["architecture"] == entry["architecture"] for e in versions):
            versions.append(entry)

    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            flush()
            fields, start, last = {}, None, None
            continue
        if line[0] in " \t":
            if last in _RELATIONS:
                fields[last] += " " + line.strip()
            continue
        match = _FIELD.match(line)
        if not match:
            raise ParseError("not a field of a Packages stanza", source, number, line)
        if start is None:
            start = number
        last = match.group(1).lower()
        if last in _NEEDED or last in _RELATIONS:
            fields[last] = match.group(2).strip()
    flush()
    for versions in index.values():
        _sort_newest_first(versions)
    return index


def _sort_newest_first(entries):
    # Insertion sort with compare_versions: an index holds a few versions of a package.
    for i in range(1, len(entries)):
        entry = entries[i]
        j = i - 1
        while j >= 0 and compare_versions(entries[j]["version"], entry["version"]) < 0:
            entries[j + 1] = entries[j]
            j -= 1
        entries[j + 1] = entry


# --- what a set of requests takes from the index ------------------------------------------------------


def _for_arch(entries, arch):
    return [e for e in entries if e["architecture"] in (arch, "all")]


def _provided(index, arch):
    """``{virtual name: [entry]}`` of the index's Provides, for ``arch``."""
    out = {}
    for entries in index.values():
        for entry in _for_arch(entries, arch):
            for name in entry["provides"]:
                out.setdefault(name, []).append(entry)
    return out


def closure(requests, index, arch="amd64", recommends=False):
    """What ``requests`` (``[(name, pin or None)]``) take from ``index`` for ``arch``.

    Returns ``(artifacts, outside, problems)``: the index's entries the install takes, sorted by
    package; the relations no alternative of which the index has (``"libc6 (>= 2.34)"``: the
    distribution's mirror provides them); and problems, each naming the package and what the index
    offers instead. Each package takes its newest version that meets every relation the taken
    packages state on it (and a request's pin), as apt's resolver settles it; the relations are
    gathered again from the packages taken until the choice no longer changes. With ``recommends``
    (``apt-get install`` with recommends), each Recommends the index can meet is taken as a Depends;
    one it cannot meet is left out, as apt leaves it.
    """
    provided = _provided(index, arch)
    pins = {}
    problems = []
    for name, pin in requests:
        offered = _for_arch(index.get(name, []), arch)
        if not any(matches_pin(e["version"], pin) for e in offered):
            problems.append(
                "{}{}: not in the repository for {} (versions there: {})".format(
                    name, f"={pin}" if pin else "", arch, ", ".join(e["version"] for e in offered) or "none"
                )
            )
            continue
        pins[name] = pin
    chosen = {}
    outside = set()
    # Each round: the relations of what is taken, then the newest version of each needed package
    # that meets them all. A chain of dependencies settles in as many rounds as it is long.
    for _round in range(64):
        wanted = {name: [("pin", pin, f"{name}{'=' + pin if pin else ''}")] for name, pin in pins.items()}
        outside, unmet = set(), []
        for entry in chosen.values():
            by = f"{entry['package']} {entry['version']}"
            soft = entry["recommends"] if recommends else []
            for number, group in enumerate(entry["pre_depends"] + entry["depends"] + soft):
                target = _alternative(group, index, provided, chosen, arch)
                if target is None and number >= len(entry["pre_depends"]) + len(entry["depends"]):
                    continue
                if target is None:
                    if any(_for_arch(index.get(r["name"], []), arch) or provided.get(r["name"]) for r in group):
                        unmet.append(f"{by}: needs {_describe(group)}, which no version in the repository meets")
                    else:
                        outside.add(_describe(group))
                    continue
                name, relation = target
                wanted.setdefault(name, []).append(("relation", relation, by))
        settled = {}
        for name, needs in wanted.items():
            offered = _for_arch(index.get(name, []), arch)
            fits = [e for e in offered if all(_meets(e, need) for need in needs)]
            if fits:
                settled[name] = fits[0]
            else:
                unmet.append(
                    "{}: {} want versions of which the repository has none (versions there: {})".format(
                        name,
                        " and ".join(sorted({need[2] for need in needs})),
                        ", ".join(e["version"] for e in offered) or "none",
                    )
                )
        if settled == chosen:
            problems.extend(sorted(set(unmet)))
            break
        chosen = settled
    else:
        problems.append("the dependencies did not settle in 64 rounds: " + ", ".join(sorted(chosen)))
    artifacts = sorted(chosen.values(), key=lambda e: (e["package"], e["architecture"]))
    return artifacts, sorted(outside), problems


def _meets(entry, need):
    kind, value, _by = need
    if kind == "pin":
        return matches_pin(entry["version"], value)
    return satisfies(entry["version"], value["op"], value["version"])


def _alternative(group, index, provided, chosen, arch):
    """``(package, relation)`` of the alternative of an OR-group the install takes: one already
    taken that meets it, else the first the index can meet; None when none can."""
    options = []
    for relation in group:
        real = _for_arch(index.get(relation["name"], []), arch)
        if real:
            if any(satisfies(e["version"], relation["op"], relation["version"]) for e in real):
                options.append((relation["name"], relation))
        elif provided.get(relation["name"]):
            # A virtual package: its newest provider, unversioned.
            options.append((provided[relation["name"]][0]["package"], {"op": None, "version": None}))
    for name, relation in options:
        taken = chosen.get(name)
        if taken is not None and satisfies(taken["version"], relation["op"], relation["version"]):
            return name, relation
    return options[0] if options else None


def _describe(group):
    return " | ".join(
        r["name"] + (":" + r["arch"] if r["arch"] else "") + (f" ({r['op']} {r['version']})" if r["op"] else "")
        for r in group
    )
