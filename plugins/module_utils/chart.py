# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes side of the air-gap bundle: a Helm chart at its pinned version, read from its
repository's ``index.yaml`` and its package, and the container images the chart deploys with the
values ``playbooks/k8s_gpu_platform.yml`` derives.

Pure functions over text and bytes; the modules read the network. Which images a chart deploys is
read from the chart's own ``values.yaml`` (and its subcharts'), merged with the derived values as
Helm merges them; only what the ``values.yaml`` files cannot say is kept here, with its reason.
"""

from __future__ import annotations

import gzip
import io
import posixpath
import re
import tarfile
import zlib
from hashlib import sha256
from urllib.parse import urlsplit

from ansible_collections.gpuops.cluster.plugins.module_utils.bundle import BundleError, join_url, mirror_path

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core on the controller
    yaml = None

# A chart package is a few hundred KiB; a member or an index above these is not a chart repository's.
MAX_PACKAGE = 32 * 1024 * 1024
MAX_MEMBER = 4 * 1024 * 1024
# What a hostile repository could make of the rest (each refused as a BundleError naming the chart):
# a package that unpacks to more than MAX_UNPACKED (the GPU Operator's, CRDs and all, unpacks to
# about 2 MiB; gzip reaches 1,000:1), subcharts nested deeper than MAX_CHART_DEPTH (Helm's own
# charts nest one or two), YAML nested deeper than MAX_YAML_DEPTH (the GPU Operator's values.yaml:
# 7 levels) or whose aliases expand to more than MAX_YAML_NODES nodes (a few aliases per level make
# an exponential tree of a few hundred bytes; its values.yaml has about 2,000), and aliases that
# refer to a node holding them (a structure with no end).
MAX_UNPACKED = 64 * 1024 * 1024
MAX_CHART_DEPTH = 4
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 200_000
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_REPOSITORY = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")

# The GPU Operator's operands whose values.yaml says nothing of when they run, each with the chart
# setting that decides it and the reason (GPU Operator documentation, "KubeVirt and Kata" and "DRA"
# pages, and the chart's own comments at v26.3.3 and v26.7.0):
# - the operator and the validator have no `enabled`: they always run;
# - the sandbox operands (vGPU manager and device manager, VFIO manager, Kata manager and device
#   plugins, the confidential computing manager) are deployed only with sandboxWorkloads.enabled,
#   whatever their own `enabled` says (their defaults say true);
# - the DRA driver is rendered only with gpuCluster.deployCR (values.yaml: "rendered only when
#   gpuCluster.deployCR=true").
GATES = {
    "gpu-operator": {
        "vgpuManager": ("sandboxWorkloads", "enabled"),
        "vgpuDeviceManager": ("sandboxWorkloads", "enabled"),
        "vfioManager": ("sandboxWorkloads", "enabled"),
        "kataManager": ("sandboxWorkloads", "enabled"),
        "sandboxDevicePlugin": ("sandboxWorkloads", "enabled"),
        "kataSandboxDevicePlugin": ("sandboxWorkloads", "enabled"),
        "ccManager": ("sandboxWorkloads", "enabled"),
        "draDriver": ("gpuCluster", "deployCR"),
    },
}


def _need_yaml():
    if yaml is None:
        raise BundleError("PyYAML is not installed on this host: install python3-yaml, then run again.")


class _Hostile(ValueError):
    """YAML that a chart repository has no reason to serve (the message says what)."""


if yaml is not None:

    class _Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        """PyYAML's safe loader, refusing nesting past MAX_YAML_DEPTH while it composes (before
        Python's own recursion limit would end it in a RecursionError)."""

        _depth = 0

        def compose_node(self, parent, index):
            self._depth += 1
            try:
                if self._depth > MAX_YAML_DEPTH:
                    raise _Hostile(f"nested deeper than {MAX_YAML_DEPTH} levels")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _measure(root):
    """Refuse a composed document whose aliases, expanded, make more than MAX_YAML_NODES nodes or
    nest deeper than MAX_YAML_DEPTH, or refer to a node that holds them: linear in the document
    (each node measured once; no recursion)."""
    size, depth, state = {}, {}, {}
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(kid)] for kid in kids)
            depth[key] = 1 + max((depth[id(kid)] for kid in kids), default=0)
            state[key] = "done"
            if size[key] > MAX_YAML_NODES:
                raise _Hostile(f"its aliases expand to more than {MAX_YAML_NODES} nodes")
            if depth[key] > MAX_YAML_DEPTH:
                raise _Hostile(f"its aliases nest it deeper than {MAX_YAML_DEPTH} levels")
            continue
        if state.get(key) == "done":
            continue
        state[key] = "open"
        stack.append((node, True))
        for kid in _children(node):
            if state.get(id(kid)) == "open":
                raise _Hostile("an alias refers to a node that holds it (a structure with no end)")
            if state.get(id(kid)) != "done":
                stack.append((kid, False))


def load_yaml(text, source):
    """The YAML document of a chart repository's file (``source`` names it in each refusal), within
    MAX_YAML_DEPTH and MAX_YAML_NODES: anything else is a BundleError."""
    _need_yaml()
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise BundleError(f"{source}: not YAML ({str(err).splitlines()[0]}).") from None
    except _Hostile as err:
        raise BundleError(f"{source}: refused: {err}; no chart's YAML is so.") from None
    finally:
        if loader is not None:
            loader.dispose()


def chart_entry(index_text, repository, chart, version, variable):
    """``{"url", "sha256", "version"}`` of ``chart`` at ``version`` in a Helm repository's index.yaml.

    The digest is the index's (Helm's own check of a package); the URL is made absolute."""
    where = f"{variable} ({repository})"
    doc = load_yaml(index_text, f"{where} index.yaml")
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict):
        raise BundleError(f"{where}: index.yaml has no entries; is {variable} a Helm chart repository?")
    versions = doc["entries"].get(chart)
    if not isinstance(versions, list) or not versions:
        raise BundleError(
            f"{where}: the repository has no chart {chart} (it has {', '.join(sorted(doc['entries'])[:20]) or 'none'})."
        )
    for entry in versions:
        if isinstance(entry, dict) and str(entry.get("version")) == version:
            urls = entry.get("urls") or []
            digest = str(entry.get("digest") or "").lower()
            if not urls or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise BundleError(
                    f"{where}: {chart} {version} has no URL or no SHA256 digest in index.yaml; "
                    "the package cannot be checked."
                )
            url = str(urls[0])
            return {
                "url": url if urlsplit(url).scheme else join_url(repository, url),
                "sha256": digest,
                "version": version,
            }
    have = sorted({str(e.get("version")) for e in versions if isinstance(e, dict)})
    raise BundleError(
        f"{where}: {chart} {version} is not in index.yaml (it has {', '.join(have[-12:])}); "
        "set the chart version to one of these, or mirror the pinned one."
    )


class _Bounded(io.RawIOBase):
    """A stream that refuses to give more than ``limit`` bytes of ``raw`` (a package's gzip stream)."""

    def __init__(self, raw, limit):
        super().__init__()
        self.raw, self.left = raw, limit

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self.raw.read(min(len(buffer), self.left + 1))
        if len(data) > self.left:
            raise _Hostile(f"it unpacks to more than {MAX_UNPACKED} bytes")
        self.left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def _members(data, source):
    """``{path: bytes}`` of the regular files of a chart package (a gzip'd tar), none larger than
    MAX_MEMBER, read as a stream that stops at MAX_UNPACKED bytes unpacked."""
    if len(data) > MAX_PACKAGE:
        raise BundleError(f"{source}: {len(data)} bytes, more than a chart package ({MAX_PACKAGE}).")
    out = {}
    try:
        stream = _Bounded(gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb"), MAX_UNPACKED)
        with tarfile.open(fileobj=io.BufferedReader(stream), mode="r|") as tar:
            for info in tar:
                if not info.isfile() or info.size > MAX_MEMBER:
                    continue
                name = posixpath.normpath(info.name)
                if name.startswith(("/", "..")):
                    raise BundleError(f"{source}: the member {info.name!r} climbs out of the chart.")
                out[name] = tar.extractfile(info).read()
    except _Hostile as err:
        raise BundleError(f"{source}: refused: {err}; no chart package is so.") from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise BundleError(f"{source}: not a chart package (a gzip'd tar): {err}.") from None
    return out


def read_chart(data, source, depth=0):
    """``{"name", "version", "appVersion", "values", "dependencies", "subcharts": {name: chart}}`` of a
    chart package, its subcharts (folders or packages under ``charts/``, at most MAX_CHART_DEPTH deep)
    read the same way."""
    if depth > MAX_CHART_DEPTH:
        raise BundleError(f"{source}: refused: subcharts nested deeper than {MAX_CHART_DEPTH}; no chart is so.")
    files = _members(data, source)
    tops = sorted({name.split("/", 1)[0] for name in files if "/" in name})
    top = next((t for t in tops if f"{t}/Chart.yaml" in files), None)
    if top is None:
        raise BundleError(f"{source}: no Chart.yaml at the top of the package.")
    return _chart_from(files, top, source, depth)


def _chart_from(files, top, source, depth=0):
    if depth > MAX_CHART_DEPTH:
        raise BundleError(f"{source}: refused: subcharts nested deeper than {MAX_CHART_DEPTH}; no chart is so.")
    meta = load_yaml(files[f"{top}/Chart.yaml"].decode("utf-8", "replace"), f"{source} {top}/Chart.yaml")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise BundleError(f"{source}: {top}/Chart.yaml has no name.")
    values = load_yaml(files.get(f"{top}/values.yaml", b"").decode("utf-8", "replace"), f"{source} {top}/values.yaml")
    chart = {
        "name": str(meta["name"]),
        "version": str(meta.get("version", "")),
        "appVersion": str(meta.get("appVersion", "") or ""),
        "values": values if isinstance(values, dict) else {},
        "dependencies": [d for d in meta.get("dependencies") or [] if isinstance(d, dict) and d.get("name")],
        "subcharts": {},
    }
    prefix = f"{top}/charts/"
    for name in sorted(files):
        if not name.startswith(prefix):
            continue
        rest = name.replace(prefix, "", 1)
        if rest.endswith(".tgz") and "/" not in rest:
            sub = read_chart(files[name], f"{source} {name}", depth + 1)
            chart["subcharts"][sub["name"]] = sub
        elif rest.endswith("/Chart.yaml") and rest.count("/") == 1:
            sub = _chart_from(files, name[: -len("/Chart.yaml")], source, depth + 1)
            chart["subcharts"][sub["name"]] = sub
    return chart


def merge(base, override):
    """Helm's coalescing of values: maps merged key by key, anything else replaced; a null removes the key."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    out = dict(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _get(values, path):
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return None
        values = values[key]
    return values


def _condition(dependency, values):
    """Helm's ``condition``: the first of its comma-separated paths that the values set decides; none: on."""
    for path in str(dependency.get("condition") or "").split(","):
        value = _get(values, [p for p in path.strip().split(".") if p])
        if isinstance(value, bool):
            return value
    return True


def _ref(repository, name, tag, digest, source):
    full = f"{repository.rstrip('/')}/{name}" if name else repository
    if not _REPOSITORY.match(full):
        raise BundleError(f"{source}: {full!r} is not an image repository (registry/path, lower case).")
    if digest:
        if not _DIGEST.match(digest):
            raise BundleError(f"{source}: the digest {digest!r} is not sha256:<64 hex digits>.")
        return f"{full}@{digest}"
    if not _TAG.match(tag or ""):
        raise BundleError(f"{source}: the tag {tag!r} is not an image tag.")
    return f"{full}:{tag}"


def _walk(values, path, chart, found, source):
    """Every image the values deploy under ``path``: a map with ``repository`` and ``image`` (the GPU
    Operator's form, the tag in ``version``), or an ``image`` map with ``repository`` and ``tag`` (the
    usual Helm form); a map whose ``enabled`` is false, or whose gate is off, is skipped."""
    if not isinstance(values, dict) or values.get("enabled") is False:
        return
    gates = chart["gates"]
    if len(path) == 1 and path[0] in gates and _get(chart["values_merged"], gates[path[0]]) is not True:
        return
    if isinstance(values.get("repository"), str) and isinstance(values.get("image"), str):
        if values["repository"]:
            tag = str(values.get("version") or chart["appVersion"])
            found.append(
                {
                    "component": ".".join(path),
                    "values_path": list(path),
                    "repository": values["repository"],
                    "ref": _ref(values["repository"], values["image"], tag, "", f"{source} {'.'.join(path)}"),
                }
            )
    elif path and path[-1] == "image" and isinstance(values.get("repository"), str) and values["repository"]:
        tag = str(values.get("tag") or chart["appVersion"])
        found.append(
            {
                "component": ".".join(path[:-1]),
                "values_path": list(path),
                "repository": values["repository"],
                "ref": _ref(
                    values["repository"], "", tag, str(values.get("digest") or ""), f"{source} {'.'.join(path)}"
                ),
            }
        )
    for key, value in values.items():
        if isinstance(value, dict):
            _walk(value, (*path, key), chart, found, source)


def _images(chart, values, source):
    """What :func:`images` says of one chart, each ``values_path`` relative to that chart's values."""
    merged = merge(chart["values"], values or {})
    context = dict(chart, values_merged=merged, gates=GATES.get(chart["name"], {}))
    found = []
    for key, value in merged.items():
        if key not in chart["subcharts"] and isinstance(value, dict):
            _walk(value, (key,), context, found, source)
    for dependency in chart["dependencies"]:
        sub = chart["subcharts"].get(dependency["name"])
        if sub is None or not _condition(dependency, merged):
            continue
        key = dependency.get("alias") or dependency["name"]
        for item in _images(sub, merged.get(key) if isinstance(merged.get(key), dict) else {}, f"{source} {key}"):
            component = f"{key}.{item['component']}" if item["component"] else key
            found.append(dict(item, component=component, values_path=[key, *item["values_path"]]))
    return found


def images(chart, values, source):
    """The images ``chart`` deploys with ``values`` over its defaults, subcharts included (each when
    its dependency's condition holds): ``[{"ref", "components", "values_paths"}]``, one entry per
    reference, sorted; each values path (from the top chart's values) leads to a map whose
    ``repository`` names the image's repository."""
    unique = {}
    found = [dict(i, component=i["component"] or chart["name"]) for i in _images(chart, values, source)]
    for item in sorted(found, key=lambda i: (i["ref"], i["component"])):
        slot = unique.setdefault(item["ref"], {"ref": item["ref"], "components": [], "values_paths": []})
        slot["components"].append(item["component"])
        slot["values_paths"].append({"path": item["values_path"], "repository": item["repository"]})
    return [unique[ref] for ref in sorted(unique)]


def registry_values(items, registry="{{ gpuops_bundle_registry }}"):
    """The values that take every image of ``items`` from ``registry``, under the upstream's path
    (``nvcr.io/nvidia/k8s`` becomes ``REGISTRY/nvcr.io/nvidia/k8s``), as the bundle's images are pushed."""
    out = {}
    for item in items:
        for place in item["values_paths"]:
            slot = out
            for key in place["path"]:
                slot = slot.setdefault(key, {})
            slot["repository"] = f"{registry}/{place['repository']}"
    return out


def index_yaml(charts):
    """index.yaml of the bundle's copy of a chart repository: the bundle's charts only, each URL
    relative to the folder (a server of the bundle answers them), with the upstream's digest."""
    entries = {}
    for item in charts:
        entries.setdefault(item["chart"], []).append(
            {
                "apiVersion": "v2",
                "name": item["chart"],
                "version": item["version"],
                "appVersion": item["appVersion"],
                "digest": item["sha256"],
                "urls": [posixpath.relpath(item["path"], posixpath.dirname(item["index_path"]))],
            }
        )
    _need_yaml()
    return yaml.safe_dump({"apiVersion": "v1", "entries": entries}, sort_keys=True)


def _check_request(request):
    where = str(request.get("variable") or "a chart request") if isinstance(request, dict) else "a chart request"
    if not isinstance(request, dict):
        raise BundleError(f"{request!r:.200}: a chart request is a dict.")
    for key in ("variable", "repository", "chart", "version", "values_variable"):
        if not request.get(key):
            raise BundleError(f"{where}: the chart request has no {key}; set it in the inventory.")
    if not isinstance(request.get("values") or {}, dict):
        raise BundleError(f"{where}: the chart's values are not a map.")
    return where


def plan(requests, read, read_text, digest_of=None):
    """The manifest's charts: for each request ``{variable, repository, chart, version, values,
    values_variable, hosts}``, the package from the repository's index.yaml, checked against the
    index's digest, and the images it deploys with those values; each image's digest from
    ``digest_of(ref)`` (the registry's manifest digest) unless it is None. ``(charts, problems)``."""
    out, problems = [], []
    for request in requests or []:
        try:
            where = _check_request(request)
            repository = str(request["repository"])
            entry = chart_entry(
                read_text(join_url(repository, "index.yaml")),
                repository,
                str(request["chart"]),
                str(request["version"]),
                request["variable"],
            )
            data = read(entry["url"])
            if sha256(data).hexdigest() != entry["sha256"]:
                raise BundleError(
                    f"{where}: {entry['url']} does not match the SHA256 index.yaml gives ({entry['sha256']}); "
                    "the download is corrupt or the repository is inconsistent."
                )
            chart = read_chart(data, entry["url"])
            found = images(chart, request.get("values") or {}, entry["url"])
        except BundleError as err:
            problems.append(str(err))
            continue
        for image in found:
            if digest_of is None:
                continue
            try:
                image["digest"] = digest_of(image["ref"])
            except BundleError as err:
                problems.append(
                    "{}: the image {} ({}) cannot be read from its registry; check that this host reaches it, "
                    "or turn the component off in the chart's values. {}".format(
                        request["values_variable"], image["ref"], ", ".join(image["components"]), err
                    )
                )
        out.append(
            {
                "variable": request["variable"],
                "repository": repository,
                "chart": chart["name"],
                "version": entry["version"],
                "appVersion": chart["appVersion"],
                "url": entry["url"],
                "path": mirror_path(entry["url"], request["variable"]),
                "index_path": mirror_path(join_url(repository, "index.yaml"), request["variable"]),
                "sha256": entry["sha256"],
                "size": len(data),
                "values_variable": request["values_variable"],
                "images": found,
                "registry_values": registry_values(found),
                "hosts": sorted(request.get("hosts") or []),
            }
        )
    return out, problems


def image_digest(raw_manifest):
    """The digest a registry gives an image by: the SHA256 of its manifest (or index) as served."""
    return "sha256:" + sha256(raw_manifest).hexdigest()


def pinned(ref, digest):
    """``repository@digest`` of a ``repository:tag`` reference: the image as the manifest pins it."""
    name = ref.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return f"{name}@{digest}"
