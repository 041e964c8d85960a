# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The air-gap manifest: what a site must mirror for the hosts of an inventory, from what each role
asks for (each role's ``tasks/artifacts.yml``, which reads the variables its install tasks read).

A host's requests are ``[{"kind": "apt" | "file" | "os", ...}]``:

- ``apt``: packages from a vendor repository. ``variable`` is the upstream variable that points at it,
  ``repository`` the URL of the flat repository (where ``Packages`` is), ``arch``, ``key_url``,
  ``key_fingerprint`` (list) with its ``fingerprint_variable``, and ``packages``: ``[{"name",
  "version"}]``, the version a pin as apt takes it (``580.95.05-*``) or empty for the newest; a
  package with ``same_version_as`` takes the upstream version the repository gives that other
  package (Fabric Manager follows the driver); an ``optional`` one only where the repository has it.
  ``recommends`` (true where the role installs with recommends) takes the Recommends the
  repository can meet as well.
- ``file``: one download, ``url`` with its ``checksum`` (``sha256:DIGEST`` or ``sha256:URL``), and
  the variables that name them.
- ``os``: packages the distribution's own mirror provides (``packages``: names, or ``name=version``).

:func:`plan` reads each repository's ``Packages`` index once (a callback, so the module fetches and
the tests pass text), takes what apt would install there (module_utils/apt_index.py), and returns the
manifest. Pure functions.
"""

from __future__ import annotations

import json
import posixpath
import re
from urllib.parse import unquote, urlsplit

from ansible_collections.gpuops.cluster.plugins.module_utils import apt_index, compat
from ansible_collections.gpuops.cluster.plugins.module_utils.dpkg import version_matches
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import hostlist_compress

FORMAT = 1
KINDS = ("apt", "file", "os")
_DIGEST = re.compile(r"^sha256:([0-9a-fA-F]{64})$")
_CHECKSUM_URL = re.compile(r"^sha256:((?:https?|file)://\S+)$")
_SCHEMES = ("http", "https", "file")
_SEGMENT = re.compile(r"^[A-Za-z0-9._~:+%=,@-]+$")


class BundleError(ValueError):
    """A request, an index or a path the bundle cannot take; the message names what to fix."""


# --- where a URL lives in the bundle ------------------------------------------------------------------


def mirror_path(url, variable="the URL"):
    """``host/upstream/path`` of ``url`` in the bundle: the upstream's host name as the first folder,
    then its path unchanged, so a site mirror of the bundle keeps the upstream paths and each mirror
    variable only changes its host part (``http://srv/developer.download.nvidia.com/compute/...``)."""
    parts = urlsplit(url or "")
    if parts.scheme not in _SCHEMES:
        raise BundleError(f"{variable}: {url!r} is not an http, https or file URL.")
    host = (parts.hostname or "local") + (f"_{parts.port}" if parts.port else "")
    return safe_join(host, unquote(parts.path), variable)


def safe_join(folder, relative, what):
    """``folder/relative`` with every segment checked: no ``..``, no empty or odd segment. The paths
    come from indexes and URLs a mirror serves; one that climbs out of the bundle is refused."""
    segments = [s for s in str(relative).split("/") if s not in ("", ".")]
    for segment in segments:
        if segment == ".." or not _SEGMENT.match(segment):
            raise BundleError(
                f"{what}: the path {relative!r} has the segment {segment!r}, which a bundle does not take."
            )
    return posixpath.join(folder, *segments) if segments else folder


def join_url(base, relative):
    return base.rstrip("/") + "/" + relative.lstrip("/")


# --- the requests ---------------------------------------------------------------------------------------


def _need(request, keys, where):
    """Each of ``keys`` must be set; the message names the inventory variable behind it."""
    variables = {
        "key_fingerprint": request.get("fingerprint_variable"),
        "checksum": request.get("checksum_variable"),
        "repository": request.get("variable"),
        "url": request.get("variable"),
    }
    for key in keys:
        if not request.get(key):
            variable = variables.get(key)
            raise BundleError(
                "{}: {} is empty, and {} needs it to list what it installs; set it in the inventory.".format(
                    where, variable, request.get("role", "a role")
                )
                if variable
                else f"{where}: the request has no {key} ({request.get('role', 'unknown role')}'s artifacts)."
            )


def _package(package, where):
    """``{"name", "version", ...}`` of a package given as a dict or as apt's ``name=version``."""
    if isinstance(package, str) and package:
        name, _sep, version = package.partition("=")
        package = {"name": name, "version": version or None}
    if not isinstance(package, dict) or not package.get("name"):
        raise BundleError(f"{where}: a package without a name: {package!r}.")
    return package


def _check_request(request):
    """Refuse one malformed request, naming its role and the variable to set."""
    if not isinstance(request, dict) or request.get("kind") not in KINDS:
        raise BundleError(f"{request!r:.200}: kind must be one of {', '.join(KINDS)}.")
    where = str(request.get("role") or "a request")
    if request["kind"] == "apt":
        _need(request, ("role", "variable", "repository", "key_url", "key_fingerprint"), where)
        request["packages"] = [_package(p, where) for p in request.get("packages") or []]
    elif request["kind"] == "file":
        _need(request, ("role", "variable", "url", "checksum", "checksum_variable"), where)
        checksum = str(request["checksum"])
        if not (_DIGEST.match(checksum) or _CHECKSUM_URL.match(checksum)):
            raise BundleError(
                f"{where}: {request['checksum_variable']} is {checksum!r}; write sha256:DIGEST or "
                "sha256:URL of a checksum file, as the role's download takes it."
            )
    else:
        _need(request, ("role",), where)


def check_requests(hosts):
    """Refuse malformed requests (a role's artifacts.yml, or a hand-made hosts dict): every problem
    once, with the hosts it was found on."""
    if not isinstance(hosts, dict) or not hosts:
        raise BundleError("hosts: no host has requests; run bundle.yml against an inventory with hosts.")
    found = {}
    for host, data in sorted(hosts.items()):
        if not isinstance(data, dict):
            found.setdefault("expected a dict with platform, arch and requests.", []).append(host)
            continue
        for key in ("platform", "arch"):
            if not data.get(key):
                found.setdefault(f"no {key}.", []).append(host)
        for request in data.get("requests") or []:
            try:
                _check_request(request)
            except BundleError as err:
                found.setdefault(str(err), []).append(host)
    if found:
        raise BundleError(
            "{} problem(s) in what the roles ask for:\n- {}".format(
                len(found),
                "\n- ".join(f"{message} (hosts: {hostlist_compress(names)})" for message, names in found.items()),
            )
        )


def repositories(hosts):
    """The apt requests of every host grouped by repository: ``{repository URL: group}``."""
    groups = {}
    for host in sorted(hosts):
        for request in hosts[host].get("requests") or []:
            if request["kind"] != "apt":
                continue
            url = request["repository"].rstrip("/") + "/"
            group = groups.setdefault(
                url,
                {
                    "variable": request["variable"],
                    "base": request.get("base") or url,
                    "key_url_variable": request.get("key_url_variable") or None,
                    "url": url,
                    "arch": request.get("arch") or hosts[host]["arch"],
                    "key": {
                        "url": request["key_url"],
                        "fingerprints": sorted({str(f).replace(" ", "").upper() for f in request["key_fingerprint"]}),
                        "variable": request.get("fingerprint_variable") or request["variable"],
                    },
                    "hosts": set(),
                    "roles": set(),
                    "requests": {},
                    "optional": set(),
                    "recommends": False,
                },
            )
            # apt-get install with recommends (the cuda role): their Recommends come too.
            group["recommends"] = group["recommends"] or bool(request.get("recommends"))
            group["hosts"].add(host)
            group["roles"].add(request["role"])
            for package in request.get("packages") or []:
                key = (package["name"], package.get("version") or None, package.get("same_version_as") or None)
                group["requests"][key] = request["role"]
                if package.get("optional"):
                    group["optional"].add(package["name"])
    return groups


def _requested(group, index):
    """``[(name, pin)]`` of a group, a ``same_version_as`` request pinned to what apt takes for the
    other package (its upstream version: Fabric Manager's revision need not be the driver's)."""
    pins = {name: pin for (name, pin, _same) in group["requests"] if not _same}
    out = []
    for name, declared, same in sorted(group["requests"], key=lambda key: (key[0], key[1] or "", key[2] or "")):
        if name in group["optional"] and not index.get(name):
            continue  # taken where the repository has it (NVIDIA's pinning package), left out elsewhere
        pin = declared
        if same:
            offered = [e for e in index.get(same, []) if e["architecture"] in (group["arch"], "all")]
            taken = next((e for e in offered if version_matches(e["version"], pins.get(same))), None)
            if taken is None:
                pin = None  # the closure names the missing package
            else:
                _epoch, upstream, _revision = apt_index.split_version(taken["version"])
                pin = upstream + "-*"
        out.append((name, pin))
    return sorted(set(out), key=lambda item: (item[0], item[1] or ""))


def plan(hosts, read_index):
    """The manifest's repositories for ``hosts`` and the problems found, each naming its variable.

    ``read_index(url)`` returns the text of a repository's ``Packages`` index (or raises
    BundleError). Returns ``(repositories, problems)``.
    """
    check_requests(hosts)
    out, problems = [], []
    for url, group in sorted(repositories(hosts).items()):
        where = "{} ({})".format(group["variable"], url)
        try:
            index = apt_index.parse_packages(read_index(join_url(url, "Packages")), source=url + "Packages")
        except ParseError as err:
            problems.append(f"{where}: the Packages index cannot be read: {err}")
            continue
        except BundleError as err:
            problems.append(f"{where}: {err}")
            continue
        requests = _requested(group, index)
        artifacts, outside, unmet = apt_index.closure(requests, index, group["arch"], recommends=group["recommends"])
        problems.extend(f"{where}: {line}" for line in unmet)
        packages = []
        for entry in artifacts:
            try:
                path = safe_join(mirror_path(url, group["variable"]), entry["filename"], f"{url}Packages")
            except BundleError as err:
                problems.append(str(err))
                continue
            packages.append(
                {
                    "package": entry["package"],
                    "version": entry["version"],
                    "architecture": entry["architecture"],
                    "filename": entry["filename"],
                    "size": entry["size"],
                    "sha256": entry["sha256"],
                    "path": path,
                }
            )
        out.append(
            {
                "variable": group["variable"],
                "base": group["base"],
                "key_url_variable": group["key_url_variable"],
                "url": url,
                "path": mirror_path(url, group["variable"]),
                "arch": group["arch"],
                "key": dict(group["key"], path=mirror_path(group["key"]["url"], group["key"]["variable"])),
                "hosts": sorted(group["hosts"]),
                "roles": sorted(group["roles"]),
                "requested": ["{}{}".format(name, "=" + pin if pin else "") for name, pin in requests],
                "packages": packages,
                "from_os_mirror": outside,
            }
        )
    return out, problems


def checksum_of(checksum):
    """``(digest, None)`` of a ``sha256:DIGEST`` checksum, ``(None, URL)`` of a ``sha256:URL`` one."""
    match = _DIGEST.match(checksum)
    if match:
        return match.group(1).lower(), None
    return None, _CHECKSUM_URL.match(checksum).group(1)


def digest_from_list(text, name, source):
    """The digest of ``name`` in a ``sha256sum`` list (one line, or ``DIGEST  NAME`` lines)."""
    lines = [line.split() for line in (text or "").splitlines() if line.strip()]
    for fields in lines:
        if re.fullmatch(r"[0-9a-fA-F]{64}", fields[0] or "") and (
            len(fields) == 1 or posixpath.basename(fields[-1].lstrip("*")) == name
        ):
            if len(fields) == 1 and len(lines) > 1:
                continue
            return fields[0].lower()
    raise BundleError(f"{source}: no sha256 line for {name} (expected 'DIGEST  {name}' or a single digest).")


def files(hosts, read_text):
    """The manifest's files: each URL once, its digest resolved, the hosts and roles that need it."""
    by_url, problems = {}, []
    for host in sorted(hosts):
        for request in hosts[host].get("requests") or []:
            if request["kind"] != "file":
                continue
            entry = by_url.setdefault(
                request["url"],
                {
                    "variable": request["variable"],
                    "base": request.get("base") or request["url"],
                    "checksum_variable": request["checksum_variable"],
                    "url": request["url"],
                    "checksum": request["checksum"],
                    "hosts": set(),
                    "roles": set(),
                },
            )
            entry["hosts"].add(host)
            entry["roles"].add(request["role"])
    out = []
    for url, entry in sorted(by_url.items()):
        try:
            path = mirror_path(url, entry["variable"])
            digest, list_url = checksum_of(str(entry["checksum"]))
            if digest is None:
                digest = digest_from_list(read_text(list_url), posixpath.basename(urlsplit(url).path), list_url)
        except BundleError as err:
            problems.append(f"{entry['checksum_variable']} ({url}): {err}")
            continue
        out.append(
            {
                "variable": entry["variable"],
                "base": entry["base"],
                "checksum_variable": entry["checksum_variable"],
                "url": url,
                "path": path,
                "sha256": digest,
                "checksum_url": list_url,
                "checksum_path": mirror_path(list_url, entry["checksum_variable"]) if list_url else None,
                "hosts": sorted(entry["hosts"]),
                "roles": sorted(entry["roles"]),
            }
        )
    return out, problems


def os_packages(hosts):
    """``[{"platform", "packages", "roles"}]``: what each platform's own mirror must hold."""
    by_platform = {}
    for host in sorted(hosts):
        platform = "{}/{}".format(hosts[host]["platform"], hosts[host]["arch"])
        for request in hosts[host].get("requests") or []:
            if request["kind"] != "os":
                continue
            slot = by_platform.setdefault(platform, {"packages": {}, "hosts": set()})
            slot["hosts"].add(host)
            for name in request.get("packages") or []:
                slot["packages"].setdefault(str(name), set()).add(request["role"])
    return [
        {
            "platform": platform,
            "hosts": sorted(slot["hosts"]),
            "packages": [{"name": name, "roles": sorted(roles)} for name, roles in sorted(slot["packages"].items())],
        }
        for platform, slot in sorted(by_platform.items())
    ]


def mirror_variables(repos, downloads, charts=()):
    """``({variable: value}, conflicts)``: what the inventory sets to take every upstream from the
    bundle's server. A URL variable becomes ``{{ gpuops_bundle_url }}/`` and the upstream's path in
    the bundle; a key URL the inventory set follows its key; a file's checksum its digest, or the
    bundle's copy of its checksum list."""
    values, conflicts = {}, []

    def put(variable, value):
        if variable in values and values[variable] != value:
            conflicts.append(f"{variable}: {values[variable]} and {value} (set it per host or group)")
            return
        values[variable] = value

    for repo in repos:
        put(repo["variable"], "{{ gpuops_bundle_url }}/" + mirror_path(repo["base"], repo["variable"]))
        if repo.get("key_url_variable"):
            put(repo["key_url_variable"], "{{ gpuops_bundle_url }}/" + repo["key"]["path"])
    for item in downloads:
        put(item["variable"], "{{ gpuops_bundle_url }}/" + mirror_path(item["base"], item["variable"]))
        # A checksum list stays a list (one variable serves the archives of several platforms).
        put(
            item["checksum_variable"],
            "sha256:{{ gpuops_bundle_url }}/" + item["checksum_path"]
            if item.get("checksum_path")
            else "sha256:" + item["sha256"],
        )
    for chart in charts:
        put(chart["variable"], "{{ gpuops_bundle_url }}/" + posixpath.dirname(chart["index_path"]))
        if chart["images"]:
            put(chart["values_variable"], chart["registry_values"])
    return values, sorted(set(conflicts))


def mirrors_yaml(doc):
    """mirrors.yml of the bundle: group variables that point the inventory at the bundle's server."""
    lines = [
        "---",
        "# Written by gpuops.cluster's bundle.yml with manifest.json: every upstream from the bundle's server.",
        "# Set gpuops_bundle_url to the URL that serves the bundle's folder (no trailing slash), and put this",
        "# file in the inventory's group_vars/all/.",
    ]
    if any(chart["images"] for chart in doc.get("charts") or []):
        lines.append(
            "# Set gpuops_bundle_registry to the registry the bundle's images are pushed to (README, air-gap steps)."
        )
    for variable, value in sorted(doc["mirrors"]["variables"].items()):
        # A map (a chart's values) as JSON, which YAML reads as it is.
        text = json.dumps(value, sort_keys=True) if isinstance(value, dict) else f'"{value}"'
        lines.append(f"{variable}: {text}")
    for conflict in doc["mirrors"]["conflicts"]:
        lines.append(f"# differs between hosts: {conflict}")
    return "\n".join(lines) + "\n"


def manifest(hosts, repos, downloads, collection_version, charts=()):
    """The manifest as written to manifest.json."""
    charts = list(charts)
    totals = {
        "charts": len(charts),
        "images": len({i["ref"] for c in charts for i in c["images"]}),
        "repositories": len(repos),
        "packages": sum(len(r["packages"]) for r in repos),
        "package_bytes": sum(p["size"] for r in repos for p in r["packages"]),
        "files": len(downloads),
        "keys": len({r["key"]["url"] for r in repos}),
    }
    return {
        "format": FORMAT,
        "collection": {"name": "gpuops.cluster", "version": collection_version},
        "hosts": {
            host: {
                "platform": data["platform"],
                "arch": data["arch"],
                "roles": sorted({r["role"] for r in data.get("requests") or []}),
            }
            for host, data in sorted(hosts.items())
        },
        "repositories": repos,
        "files": downloads,
        "charts": charts,
        "os_packages": os_packages(hosts),
        "mirrors": dict(zip(("variables", "conflicts"), mirror_variables(repos, downloads, charts))),
        "totals": totals,
    }


def _mib(size):
    return f"{size / 1048576:.1f} MiB"


def markdown(doc):
    """manifest.md: the same content for a person, per upstream variable."""
    totals = doc["totals"]
    lines = [
        "# Air-gap bundle manifest",
        "",
        "gpuops.cluster {} · {} hosts · {} repositories, {} packages ({}) · {} files · {} keys · {} charts, "
        "{} images".format(
            doc["collection"]["version"],
            len(doc["hosts"]),
            totals["repositories"],
            totals["packages"],
            _mib(totals["package_bytes"]),
            totals["files"],
            totals["keys"],
            totals.get("charts", 0),
            totals.get("images", 0),
        ),
        "",
        "| host | platform | roles |",
        "|---|---|---|",
    ]
    lines += [f"| {h} | {d['platform']}/{d['arch']} | {', '.join(d['roles'])} |" for h, d in doc["hosts"].items()]
    for repo in doc["repositories"]:
        lines += [
            "",
            f"## `{repo['variable']}`: {repo['url']}",
            "",
            "Key {} ({}), fingerprint {}. Hosts: {}. Roles: {}.".format(
                repo["key"]["url"],
                repo["key"]["variable"],
                ", ".join(repo["key"]["fingerprints"]),
                ", ".join(repo["hosts"]),
                ", ".join(repo["roles"]),
            ),
            "",
            "Requested: " + ", ".join(f"`{r}`" for r in repo["requested"]),
            "",
            "| package | version | arch | size | sha256 |",
            "|---|---|---|---|---|",
        ]
        lines += [
            "| {package} | {version} | {architecture} | {size} | {short}… |".format(short=p["sha256"][:16], **p)
            for p in repo["packages"]
        ]
        if repo["from_os_mirror"]:
            lines += ["", "From the OS mirror: " + ", ".join(f"`{r}`" for r in repo["from_os_mirror"])]
    if doc["files"]:
        lines += ["", "## Files", "", "| variable | URL | sha256 | hosts |", "|---|---|---|---|"]
        lines += [
            "| `{}` | {} | {}… | {} |".format(f["variable"], f["url"], f["sha256"][:16], ", ".join(f["hosts"]))
            for f in doc["files"]
        ]
    for chart in doc.get("charts") or []:
        lines += [
            "",
            f"## `{chart['variable']}`: {chart['repository']}",
            "",
            "Chart {} {} (app {}), {}, sha256 {}… (index.yaml). Hosts: {}.".format(
                chart["chart"],
                chart["version"],
                chart["appVersion"] or "-",
                _mib(chart["size"]),
                chart["sha256"][:16],
                ", ".join(chart["hosts"]),
            ),
            "",
            f"Images it deploys with the derived values (`{chart['values_variable']}` takes them from "
            "`gpuops_bundle_registry`):",
            "",
            "| image | digest | components |",
            "|---|---|---|",
        ]
        lines += [
            "| {} | {} | {} |".format(
                i["ref"], (i.get("digest") or "not resolved")[:23] + "…", ", ".join(i["components"])
            )
            for i in chart["images"]
        ]
    if doc["os_packages"]:
        lines += ["", "## From each distribution's own mirror (not in the bundle)", ""]
        for slot in doc["os_packages"]:
            lines.append(
                "- {} ({}): {}".format(
                    slot["platform"], ", ".join(slot["hosts"]), ", ".join(p["name"] for p in slot["packages"])
                )
            )
    return "\n".join(lines) + "\n"


# --- hosts the connected host does not reach -------------------------------------------------------------

# What bundle_hardware must say of a host, and how (the facts site.yml would read on it).
DECLARED_OS = {"Debian": ("12", "13"), "Ubuntu": ("22.04", "24.04")}
DEBIAN_ARCH = {name: names["debian"] for name, names in compat.CPU_ARCHITECTURES.items()}
RELEASES = {
    ("Debian", "12"): "bookworm",
    ("Debian", "13"): "trixie",
    ("Ubuntu", "22.04"): "jammy",
    ("Ubuntu", "24.04"): "noble",
}
# Where Canonical's driver packages of a declared Ubuntu host are read from (bundle_ubuntu_mirror's
# default by architecture): the server drivers and their signed modules are in restricted, Fabric
# Manager and NSCQ in multiverse (the archive's Section fields), released and updated in three pockets.
UBUNTU_MIRRORS = {name: names["ubuntu_archive"] for name, names in compat.CPU_ARCHITECTURES.items()}
UBUNTU_DRIVER_COMPONENTS = ("restricted", "multiverse")
UBUNTU_POCKETS = ("", "-updates", "-security")
_PCI_ID = re.compile(r"^(?:(10de|15b3):)?([0-9a-f]{4})$")


def _pci_counts(value, vendor, what):
    """``{device_id: count}`` of a declared ``{"10de:2330": 8}`` or ``{"2330": 8}``."""
    out = {}
    for key, count in (value or {}).items():
        match = _PCI_ID.match(str(key).strip().lower())
        if not match or (match.group(1) and match.group(1) != vendor):
            raise BundleError(
                f"bundle_hardware.{what}: {key!r} is not a PCI device ID of vendor {vendor} "
                f"(write it as lspci -nn prints it, e.g. '{vendor}:2330')."
            )
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise BundleError(
                f"bundle_hardware.{what}: the count of {key} must be a whole number above 0, not {count!r}."
            )
        out[match.group(2)] = out.get(match.group(2), 0) + count
    return out


def declared_devices(hardware):
    """lspci devices (as pci.parse_lspci gives them) for a host's declared hardware, numbered on
    made-up buses: enough for pci.classify and gpu_inventory.build_gpu_facts."""
    devices = []

    def add(vendor, device, klass):
        number = len(devices) + 1
        devices.append(
            {
                "pci_bus_id": f"0000:{number // 32:02x}:{number % 32:02x}.0",
                "class_id": klass,
                "class_name": None,
                "vendor_id": vendor,
                "vendor_name": None,
                "device_id": device,
                "device_name": None,
                "revision": None,
            }
        )

    for device, count in _pci_counts(hardware.get("gpus"), "10de", "gpus").items():
        for _copy in range(count):
            add("10de", device, "0302")
    nvswitches = hardware.get("nvswitches", 0)
    if not isinstance(nvswitches, int) or isinstance(nvswitches, bool) or nvswitches < 0:
        raise BundleError(f"bundle_hardware.nvswitches: a count of NVSwitches (0 or more), not {nvswitches!r}.")
    for _copy in range(nvswitches):
        add("10de", "22a3", "0680")
    for device, count in _pci_counts(hardware.get("hcas"), "15b3", "hcas").items():
        for _copy in range(count):
            add("15b3", device, "0207")
    return devices


def declared_platform(hardware):
    """The platform facts of a declared host, refused where the collection does not support it."""
    if not isinstance(hardware, dict):
        raise BundleError("bundle_hardware: a dict with distribution, distribution_version, architecture and gpus.")
    known = {"distribution", "distribution_version", "architecture", "kernel", "gpus", "nvswitches", "hcas"}
    unknown = sorted(set(hardware) - known)
    if unknown:
        raise BundleError(
            "bundle_hardware: {} not known; the keys are {}.".format(", ".join(unknown), ", ".join(sorted(known)))
        )
    distribution = hardware.get("distribution")
    version = str(hardware.get("distribution_version") or "")
    if distribution not in DECLARED_OS or version not in DECLARED_OS[distribution]:
        raise BundleError(
            "bundle_hardware: {} {} is not supported; declare one of {}.".format(
                distribution,
                version,
                ", ".join(f"{d} {v}" for d, vs in DECLARED_OS.items() for v in vs),
            )
        )
    architecture = hardware.get("architecture") or "x86_64"
    if architecture not in DEBIAN_ARCH:
        raise BundleError(f"bundle_hardware.architecture: {architecture!r}; declare x86_64 or aarch64.")
    kernel = str(hardware.get("kernel") or "")
    if not kernel:
        raise BundleError(
            "bundle_hardware.kernel: the kernel the nodes run (uname -r): the driver's modules and headers follow it."
        )
    return {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_release": RELEASES[(distribution, version)],
        "distribution_major_version": version.split(".", maxsplit=1)[0],
        "os_family": "Debian",
        "architecture": architecture,
        "kernel": kernel,
        "virtualization_type": "",
        "virtualization_role": "",
    }


def ubuntu_indexes(facts, mirror=""):
    """The Ubuntu archive's ``Packages`` files a declared Ubuntu host's Canonical driver packages are
    read from (stack_check's package_indexes); none for Debian."""
    if facts["distribution"] != "Ubuntu":
        return []
    base = (mirror or UBUNTU_MIRRORS[facts["architecture"]]).rstrip("/")
    arch = DEBIAN_ARCH[facts["architecture"]]
    return [
        f"{base}/dists/{facts['distribution_release']}{pocket}/{component}/binary-{arch}/Packages.xz"
        for pocket in UBUNTU_POCKETS
        for component in UBUNTU_DRIVER_COMPONENTS
    ]


# --- a repository's signed index ---------------------------------------------------------------------------

INDEX_FILES = ("InRelease", "Release", "Release.gpg")
RELEASE = "Release file"
_RELEASE_LINE = re.compile(r"^\s+([0-9a-fA-F]{64})\s+(\d+)\s+(\S+)\s*$")


_CLEAR_SIGNED = "-----BEGIN PGP SIGNED MESSAGE-----"


def release_text(text, clear_signed=False):
    """The signed text of an ``InRelease`` (clear-signed: ``clear_signed``) file, or ``text`` itself for a
    ``Release`` (its detached signature covers every byte). A clear-signed file is taken exactly as apt
    takes it: the header first, only ``Hash:`` armour headers, one signed body, one signature block and
    nothing but blank lines after it. Text before or after the signed block is refused: gpgv says "Good
    signature" for the block inside it, but none of that text is signed."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", RELEASE)
    if not clear_signed and not text.startswith(_CLEAR_SIGNED):
        return text
    if not text.startswith(_CLEAR_SIGNED + "\n"):
        raise ParseError(
            "an InRelease that does not begin with the clear-sign header: the text before the signed block is not "
            "signed (refused, as apt refuses it)",
            RELEASE,
        )
    head, sep, rest = text.partition("\n\n")
    if not sep:
        raise ParseError("no blank line after the armour header of a clear-signed InRelease", RELEASE)
    for line in head.split("\n")[1:]:
        if not line.startswith("Hash: "):
            raise ParseError(
                f"a clear-signed InRelease with the armour header {line[:60]!r} (only Hash: is allowed)", RELEASE
            )
    body, sep, signature = rest.partition("\n-----BEGIN PGP SIGNATURE-----")
    if not sep:
        raise ParseError("a clear-signed InRelease without its signature block", RELEASE)
    _block, sep, after = signature.partition("-----END PGP SIGNATURE-----")
    if not sep or after.strip() or _CLEAR_SIGNED in body:
        raise ParseError(
            "a clear-signed InRelease with text after its signature block, or a second signed message: that text is "
            "not signed (refused, as apt refuses it)",
            RELEASE,
        )
    # Dash-escaped lines (RFC 9580 section 7.1).
    return "\n".join(line[2:] if line.startswith("- ") else line for line in body.split("\n")) + "\n"


def release_checksums(text, source=RELEASE):
    """``{name: (sha256, size)}`` of a Release file's ``SHA256:`` section."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}", source)
    out, inside = {}, False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith((" ", "\t")):
            inside = line.rstrip() == "SHA256:"
            continue
        if inside:
            match = _RELEASE_LINE.match(line)
            if not match:
                raise ParseError("not 'SHA256 SIZE NAME' in the SHA256 section", source, number, line)
            out[match.group(3)] = (match.group(1).lower(), int(match.group(2)))
    if not out:
        raise ParseError("no SHA256 section: the repository's index files cannot be checked", source)
    return out
