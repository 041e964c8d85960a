# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes decisions: which Kubernetes minors are supported, which containerd configuration
version a node needs, and the GPU Operator's values from what the host roles installed.

Pure functions with the reason of each decision beside it; the Kubernetes node role and the
control-side play call them through filters, the unit tests call them directly. The facts and
their sources: shared/facts/k8s_mig_validation.md section 1.

- Kubernetes minors and their end of life: the kubernetes.io/releases pages (1.34 to 1.37).
  What the GPU Operator validates: its platform-support page at HEAD (Kubernetes 1.33 to 1.36;
  1.36 from chart 26.3.2).
- containerd's configuration version: 2 for containerd 1.x, 3 for 2.0 to 2.2, 4 from 2.3
  (containerd's own ``config default``; kubespray's config.toml.j2 writes 4 for >= 2.3.0 and 3
  below). A drop-in of a higher version than the root config stops containerd ("drop-in config
  version 4 higher than root config version 2", NVIDIA/aicr#1688).
- GPU Operator values: getting-started.rst, "Pre-Installed NVIDIA GPU Drivers and NVIDIA Container
  Toolkit" (driver.enabled=false, toolkit.enabled=false), cdi.rst, gpu-operator-mig.rst, and the
  chart's values.yaml at each pinned version (whose keys the values here must exist in).
"""

from __future__ import annotations

import itertools
import json
import re

from ansible_collections.gpuops.cluster.plugins.module_utils import mig as mig_utils

# minor -> (end of life, GPU Operator validates it). kubernetes.io/releases; platform-support.rst.
MINORS = {
    "1.33": ("2026-06-28", True),
    "1.34": ("2026-10-27", True),
    "1.35": ("2027-02-28", True),
    "1.36": ("2027-06-28", True),
    "1.37": ("2027-10-28", False),
}
VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")

# GPU Operator charts this collection renders values for: chart -> whether it has DRA (its
# GPUCluster and draDriver values). The Kubernetes minors it validates are MINORS' flag.
# release-notes.rst; the chart's values.yaml.
CHARTS = {"v26.3.3": False, "v26.7.0": True}
# DRA with the GPU Operator: Kubernetes 1.34.2 or later (dra-intro-install.rst).
DRA_MIN = (1, 34, 2)
# The host engine of the dcgm role (nv-hostengine's default port).
HOSTENGINE = "localhost:5555"


def _problem(severity, variable, message, fix):
    return {"severity": severity, "variable": variable, "message": message, "fix": fix}


def version_problems(version, today, variable="k8s_node_kubernetes_version"):
    """Every reason a Kubernetes version cannot (error) or should not (warning) be used."""
    match = VERSION.fullmatch(str(version or ""))
    if not match:
        return [
            _problem(
                "error",
                variable,
                f"{variable} is {version!r}, not an exact Kubernetes release",
                f'write MAJOR.MINOR.PATCH, such as {variable}: "1.36.4"',
            )
        ]
    minor = f"{match.group(1)}.{match.group(2)}"
    supported = sorted(m for m, (eol, _validated) in MINORS.items() if eol >= today)
    if minor not in MINORS:
        return [
            _problem(
                "error",
                variable,
                f"Kubernetes {minor} is not in the collection's table",
                f"choose one of the supported minors {', '.join(supported)}",
            )
        ]
    eol, validated = MINORS[minor]
    if eol < today:
        return [
            _problem(
                "error",
                variable,
                f"Kubernetes {minor} reached its end of life on {eol} (kubernetes.io/releases)",
                f"move to a supported minor: {', '.join(supported)}",
            )
        ]
    if not validated:
        return [
            _problem(
                "warning",
                variable,
                f"Kubernetes {minor} is not yet on the GPU Operator's list of validated versions",
                "use 1.36 for a cluster with the GPU Operator, or accept the risk",
            )
        ]
    return []


def containerd_config_version(containerd_version):
    """(config version, reason) for the installed containerd ('1.6.20', '2.2.1~ds1-1', 'v2.3.4')."""
    match = re.match(r"v?(\d+)\.(\d+)", str(containerd_version or ""))
    if not match:
        raise ValueError(f"cannot read a containerd version from {containerd_version!r}")
    major, minor = int(match.group(1)), int(match.group(2))
    if major < 2:
        return 2, f"containerd {major}.{minor} reads configuration version 2"
    if (major, minor) < (2, 3):
        return 3, f"containerd {major}.{minor} writes configuration version 3 (2.0 to 2.2)"
    return 4, f"containerd {major}.{minor} writes configuration version 4 (2.3 and later)"


# The CRI plugin's runtime settings by configuration version (containerd 2.0 moved them).
CRI_PLUGIN = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime", 4: "io.containerd.cri.v1.runtime"}


def containerd_plan(version_output, root_text=None, root_path="/etc/containerd/config.toml", dropin_glob=None):
    """What a node's containerd files must carry, from ``containerd --version`` and the root config
    (None when there is none): ``{"version", "reason", "root_version", "dropin_version",
    "cri_plugin", "cdi", "imports", "imports_line", "problems"}``.

    ``imports`` is the root config's imports list as containerd reads it (TOML: basic or literal
    strings; containerd 2.x's ``config default`` writes ``imports = ['/etc/containerd/conf.d/*.toml']``),
    and ``imports_line`` that list with ``dropin_glob`` added when it is missing, as one line. An
    imports list over several lines is a problem: the line is replaced in place.

    A drop-in takes the root config's version: containerd 2.x refuses a drop-in of a higher version
    than the root (NVIDIA/aicr#1688), and containerd 1.6 reads a version 3 or 4 drop-in without
    error but ignores its plugin tables, so the nvidia runtime silently goes missing (seen with
    Debian 12's containerd 1.6.20). With no root config, the installed containerd's own version.
    CDI needs containerd 1.7 or later (enable_cdi came with 1.7).
    """
    words = str(version_output or "").split()
    # "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3" (Debian), or
    # "containerd containerd.io 2.2.1 <commit>" (Docker's packages).
    text = words[2] if len(words) > 2 and words[0] == "containerd" else (words[0] if words else "")
    version, reason = containerd_config_version(text)
    match = re.match(r"v?(\d+)\.(\d+)", text)
    plan = {
        "version": version,
        "reason": reason,
        "root_version": None,
        "dropin_version": version,
        "cri_plugin": CRI_PLUGIN[version],
        "cdi": (int(match.group(1)), int(match.group(2))) >= (1, 7),
        "imports": [],
        "imports_line": _imports_line([], dropin_glob),
        "problems": [],
    }
    if root_text is None:
        return plan
    import tomllib  # noqa: PLC0415 (the controller's Python 3.11; this runs in a filter there)

    # The top-level key, as containerd reads it: a "version = N" line inside a table is not it.
    try:
        config = tomllib.loads(root_text)
    except tomllib.TOMLDecodeError as exc:
        plan["problems"].append(f"{root_path} is no valid TOML ({exc}): fix it and run again")
        return plan
    found = config.get("version")
    if found is None:
        plan["problems"].append(
            f"{root_path} has no version line, so containerd reads it as configuration version 1, which takes no "
            f"drop-ins: add 'version = {version}' as its first line ({reason}) and run again"
        )
        return plan
    if not isinstance(found, int) or isinstance(found, bool):
        plan["problems"].append(
            f"{root_path} sets version = {found!r}, not a whole number: write 'version = {version}' ({reason}) "
            "and run again"
        )
        return plan
    root = found
    plan["root_version"] = root
    if root > version or root not in CRI_PLUGIN:
        plan["problems"].append(
            f"{root_path} is configuration version {root}, which the installed containerd cannot read ({reason}): "
            f"write it for version {version} (containerd config default shows the layout) and run again"
        )
        return plan
    plan["dropin_version"] = root
    plan["cri_plugin"] = CRI_PLUGIN[root]
    _read_imports(plan, config, root_text, root_path, dropin_glob)
    return plan


def _read_imports(plan, config, root_text, root_path, dropin_glob):
    """The root config's imports into the plan, or a problem where the role cannot edit them."""
    imports = config.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        plan["problems"].append(
            f"{root_path} sets imports = {imports!r}, not a list of paths: write it as a list of quoted paths "
            '(imports = ["/etc/containerd/conf.d/*.toml"]) and run again'
        )
        return
    plan["imports"] = imports
    plan["imports_line"] = _imports_line(imports, dropin_glob)
    if "imports" in config and not _one_line(root_text, imports):
        plan["problems"].append(
            f"{root_path} has an imports list over several lines. Put it on one line "
            '(imports = ["a.toml", "b.toml"]) and run again; the role then adds '
            f"{dropin_glob or 'its drop-in folder'} to it."
        )


def _one_line(root_text, imports):
    """Whether a top-level ``imports =`` line holds the whole list (the role replaces that line)."""
    import tomllib  # noqa: PLC0415

    for line in root_text.splitlines():
        if re.match(r"\s*\[", line):
            break  # the first table: top-level keys come before it
        if re.match(r"imports\s*=", line):
            try:
                return tomllib.loads(line).get("imports") == imports
            except tomllib.TOMLDecodeError:
                return False
    return False


def _imports_line(imports, glob):
    """The root config's imports line: its list, with the drop-ins' glob added when missing."""
    paths = list(imports) + ([glob] if glob and glob not in imports else [])
    return "imports = [" + ", ".join(_toml_string(p) for p in paths) + "]"


def _toml_value(value, where):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    raise ValueError(
        f"{where} holds a {type(value).__name__} this role does not write back; keep it out of the CRI table"
    )


def _toml_string(value):
    """A TOML basic string: quote and backslash escaped, control characters as \\uXXXX, every other
    character as itself (JSON's \\ud83d\\ude00 surrogate pairs for characters outside the BMP are
    no valid TOML)."""
    out = []
    for char in value:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _toml_table(name, table, out):
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    out.append(f"\n[{name}]")
    out.extend(
        f"  {_toml_string(k) if not re.fullmatch(r'[A-Za-z0-9_-]+', k) else k} = {_toml_value(v, name + '.' + k)}"
        for k, v in scalars.items()
    )
    for key, value in table.items():
        if isinstance(value, dict):
            part = key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)
            _toml_table(f"{name}.{part}", value, out)


def _merge(base, extra):
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def nvidia_dropin(root_text, plan, default_runtime=False):
    """The nvidia runtime drop-in's TOML at the plan's version: the root config's whole CRI table
    with the nvidia runtime added. containerd 1.x merges an imported file plugin by plugin, so a
    drop-in's CRI table replaces the root's whole (seen on Debian 12's 1.6.20: runc's SystemdCgroup
    and the CNI folders of the root were gone from config dump); carrying the root's table along
    keeps them. The nvidia runtime takes runc's cgroup driver from the same table. Returns (text,
    systemd_cgroup)."""
    import tomllib  # noqa: PLC0415 (the controller's Python 3.11; this runs in a filter there)

    try:
        root = tomllib.loads(root_text or "")
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"containerd's root config is no valid TOML ({exc}): fix it and run again") from None
    cri = plan["cri_plugin"]
    table = (root.get("plugins") or {}).get(cri) or {}
    runc = ((table.get("containerd") or {}).get("runtimes") or {}).get("runc") or {}
    systemd = bool((runc.get("options") or {}).get("SystemdCgroup", False))
    nvidia = {
        "runtime_type": "io.containerd.runc.v2",
        "privileged_without_host_devices": False,
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": systemd},
    }
    extra = {"containerd": {"runtimes": {"nvidia": nvidia}}}
    if default_runtime:
        extra["containerd"]["default_runtime_name"] = "nvidia"
    out = [f"version = {plan['dropin_version']}"]
    merged = _merge(table, extra)
    _toml_table(f'plugins."{cri}"', merged, out)
    text = "\n".join(out) + "\n"
    # Read back what is written, as containerd will: the same table, or nothing is written.
    try:
        written = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"the nvidia drop-in would be no valid TOML ({exc}); nothing was written") from None
    if written.get("plugins", {}).get(cri) != merged:
        raise ValueError(f"the nvidia drop-in would not read back as the CRI table {cri}; nothing was written")
    return text, systemd


def _set(values, reasons, path, value, reason):
    node = values
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    reasons[path] = reason


def _set_nfd(values, reasons, nfd_present):
    """nfd.enabled: Node Feature Discovery of the chart only where no other release runs one (both
    charts' key; the device plugin's is its NFD dependency's condition)."""
    _set(
        values,
        reasons,
        "nfd.enabled",
        not nfd_present,
        "Node Feature Discovery already runs" if nfd_present else "no Node Feature Discovery runs yet",
    )


def gpu_operator_values(
    chart,
    *,
    mig,
    nfd_present,
    host_dcgm_exporter,
    kubernetes_version,
    dra=False,
):
    """(values, reasons): the GPU Operator's Helm values over the host stack.

    ``mig`` is the ``mig_kubernetes`` filter's answer for the cluster's nodes; ``nfd_present``
    whether Node Feature Discovery already runs; ``host_dcgm_exporter`` whether the dcgm role runs
    dcgm-exporter on the hosts. Raises ValueError for a chart or a DRA request it cannot serve.
    """
    if chart not in CHARTS:
        raise ValueError(f"GPU Operator chart {chart} has no values here; choose one of {', '.join(CHARTS)}")
    values, reasons = {}, {}
    _set(values, reasons, "driver.enabled", False, "the nvidia_driver role installed the driver on the host")
    _set(values, reasons, "toolkit.enabled", False, "the container_toolkit role installed the toolkit on the host")
    _set(values, reasons, "cdi.enabled", True, "containers get their GPUs through CDI (the toolkit's specs)")
    _set_nfd(values, reasons, nfd_present)
    _set(values, reasons, "mig.strategy", mig["strategy"] if mig["strategy"] != "none" else "single", mig["reason"])
    _set(
        values,
        reasons,
        "migManager.enabled",
        bool(mig["mig_manager"]),
        "a node has mig_owner: operator" if mig["mig_manager"] else "the hosts' MIG manager owns MIG (mig_owner: host)",
    )
    if mig["mig_manager"]:
        _set(
            values,
            reasons,
            "migManager.config",
            {
                "name": "gpuops-mig-parted-config",
                "create": True,
                "default": "all-disabled",
                # JSON is YAML: mig-parted reads it as its v1 config.
                "data": {"config.yaml": json.dumps(mig["parted_config"], indent=2, sort_keys=True)},
            },
            "the layouts of the nodes the operator owns, from mig_layout",
        )
    _set(values, reasons, "dcgm.enabled", False, "the dcgm role runs nv-hostengine on the hosts")
    if host_dcgm_exporter:
        _set(values, reasons, "dcgmExporter.enabled", False, "the dcgm role runs dcgm-exporter on the hosts")
    else:
        _set(values, reasons, "dcgmExporter.enabled", True, "no dcgm-exporter runs on the hosts")
        _set(
            values,
            reasons,
            "dcgmExporter.env",
            [{"name": "DCGM_REMOTE_HOSTENGINE_INFO", "value": HOSTENGINE}],
            "it reads the host's nv-hostengine (dcgm role) instead of an embedded one",
        )
    if dra:
        supports_dra = CHARTS[chart]
        match = VERSION.fullmatch(str(kubernetes_version))
        if not supports_dra:
            raise ValueError(f"GPU Operator chart {chart} has no DRA driver; DRA needs chart v26.7.0")
        if not match or tuple(map(int, match.groups())) < DRA_MIN:
            raise ValueError(
                f"DRA needs Kubernetes 1.34.2 or later (its resource.k8s.io DeviceClass API); the cluster runs "
                f"{kubernetes_version}"
            )
        _set(values, reasons, "clusterPolicy.deployCR", False, "DRA: the GPUCluster replaces the ClusterPolicy")
        _set(values, reasons, "gpuCluster.deployCR", True, "DRA: the GPUCluster deploys the DRA driver")
    return values, reasons


def value_problems(values, chart_values, path=""):
    """The keys of ``values`` the chart's values.yaml does not have, or of another kind there. An
    empty map in the chart (``data: {}``, ``labels: {}``) takes any keys."""
    out = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in chart_values:
            out.append(f"{where} is no value of the chart")
            continue
        theirs = chart_values[key]
        if isinstance(value, dict) and isinstance(theirs, dict) and theirs:
            out.extend(value_problems(value, theirs, where))
        elif theirs is not None and type(value) is not type(theirs):
            out.append(f"{where} is {type(value).__name__} here and {type(theirs).__name__} in the chart")
    return out


def platform_manifests(namespace="gpu-operator"):
    """The objects the control-side play applies before the chart: the operator's namespace with
    the privileged Pod Security level its DaemonSets need, and the RuntimeClass nvidia for the
    containers that select the runtime by name (k8s-device-plugin README; cdi.rst)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
            },
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "nvidia", "labels": {"app.kubernetes.io/managed-by": "gpuops.cluster"}},
            "handler": "nvidia",
        },
    ]


# -- the node's registration: labels, taints, kubelet settings, the kubeadm join ---------------------
# kubelet's --node-labels help and the NodeRestriction admission plugin: a kubelet may set labels
# in the kubernetes.io and k8s.io namespaces only under these prefixes or from this set; any other
# stops kubelet at start ("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels").
KUBELET_LABEL_PREFIXES = ("kubelet.kubernetes.io", "node.kubernetes.io")
KUBELET_LABELS = frozenset(
    {
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "beta.kubernetes.io/os",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "kubernetes.io/arch",
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    }
)
# Label syntax (apimachinery's validation): a name of at most 63 characters, an optional DNS
# subdomain prefix of at most 253, a value of at most 63 (or empty).
LABEL_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_PREFIX = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# The collection's own labels: what the node's facts say, for the control side's gates and for
# nodeSelectors before GPU Feature Discovery labels the node.
OWN_PREFIX = "gpuops.cluster"
# Host components the GPU Operator would otherwise deploy on the node: its per-node opt-out labels
# nvidia.com/gpu.deploy.<component>=false (getting-started.rst, "Pre-Installed NVIDIA GPU Drivers").
DEPLOY_COMPONENTS = ("driver", "container-toolkit", "dcgm", "dcgm-exporter")
# containerd's CRI socket, the one the kubelet and kubeadm's criSocket name.
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
TOKEN = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")
CA_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def _label_value(text):
    """A label value from free text (a GPU's product name): characters a value cannot hold become
    '-', at most 63, starting and ending alphanumeric."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-_.")[:63]
    return value.rstrip("-_.")


def label_problems(labels, variable="k8s_node_labels"):
    """Every reason a kubelet could not register with ``labels`` (a mapping of key to value)."""
    if labels and not isinstance(labels, dict):
        return [
            _problem(
                "error",
                variable,
                f"{variable} is {labels!r}, not a mapping of label keys to values",
                "write it as {key: value} pairs, such as {example.com/pool: training}, or {} for none",
            )
        ]
    out = []
    for raw_key, raw_value in (labels or {}).items():
        key, value = str(raw_key), "" if raw_value is None else str(raw_value)
        prefix, _sep, name = key.rpartition("/")
        if not LABEL_NAME.fullmatch(name) or (prefix and (len(prefix) > 253 or not LABEL_PREFIX.fullmatch(prefix))):
            out.append(
                _problem(
                    "error",
                    variable,
                    f"{variable} has the label key {key!r}, which Kubernetes refuses",
                    "write [prefix/]name: a DNS subdomain prefix and a name of at most 63 letters, digits, '-', '_' "
                    "or '.', starting and ending with a letter or digit",
                )
            )
            continue
        if value and not LABEL_NAME.fullmatch(value):
            out.append(
                _problem(
                    "error",
                    variable,
                    f"{variable} gives {key} the value {value!r}, which Kubernetes refuses",
                    "use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                )
            )
        restricted = prefix in ("kubernetes.io", "k8s.io") or prefix.endswith((".kubernetes.io", ".k8s.io"))
        allowed = key in KUBELET_LABELS or any(prefix == p or prefix.endswith("." + p) for p in KUBELET_LABEL_PREFIXES)
        if restricted and not allowed:
            out.append(
                _problem(
                    "error",
                    variable,
                    f"{variable} has {key}, a label in the kubernetes.io or k8s.io namespace that a kubelet may not "
                    "set on itself (NodeRestriction; kubelet stops at start with it in --node-labels)",
                    f"set it from the control plane (kubectl label node), or use a prefix of "
                    f"{' or '.join(KUBELET_LABEL_PREFIXES)} or a prefix of your own",
                )
            )
    return out


def taint_problems(taints, variable="k8s_node_taints"):
    """Every reason kubeadm would refuse ``taints`` (a list of {key, value, effect})."""
    if taints and not isinstance(taints, list):
        return [
            _problem(
                "error",
                variable,
                f"{variable} is {taints!r}, not a list of taints",
                "write it as a list of {key: ..., value: ..., effect: NoSchedule}, or [] for none",
            )
        ]
    out = []
    for index, taint in enumerate(taints or []):
        where = f"{variable}[{index}]"
        if not isinstance(taint, dict) or set(taint) - {"key", "value", "effect"}:
            out.append(
                _problem(
                    "error",
                    variable,
                    f"{where} is {taint!r}",
                    "write each taint as {key: ..., value: ..., effect: NoSchedule}; value is optional",
                )
            )
            continue
        out.extend(
            dict(p, message=f"{where}: " + p["message"])
            for p in label_problems({taint.get("key", ""): taint.get("value", "")}, variable)
        )
        if taint.get("effect") not in TAINT_EFFECTS:
            out.append(
                _problem(
                    "error",
                    variable,
                    f"{where} has the effect {taint.get('effect')!r}",
                    f"use one of {', '.join(TAINT_EFFECTS)}",
                )
            )
    return out


def node_labels(nvidia_gpu, host_components, mig_labels=None, extra=None):
    """(labels, reasons): what a GPU node registers with. The GPU product and count from the facts
    (the control side's gates compare the node's allocatable GPUs with them), the operator's
    opt-outs for what the host roles run, the MIG owner's labels (mig.kubernetes_node), and the
    user's labels last (theirs win)."""
    labels, reasons = {}, {}
    facts = nvidia_gpu or {}
    if facts.get("count"):
        labels[f"{OWN_PREFIX}/gpu.product"] = _label_value(facts.get("product") or "unknown")
        reasons[f"{OWN_PREFIX}/gpu.product"] = "the GPUs' product name (gpu_facts)"
        labels[f"{OWN_PREFIX}/gpu.count"] = str(int(facts["count"]))
        reasons[f"{OWN_PREFIX}/gpu.count"] = "the GPUs nvidia-smi lists (gpu_facts)"
    for component in DEPLOY_COMPONENTS:
        if (host_components or {}).get(component):
            key = f"nvidia.com/gpu.deploy.{component}"
            labels[key] = "false"
            reasons[key] = f"the host runs its own {component}: the GPU Operator must not deploy one"
    for key, value in (mig_labels or {}).items():
        labels[key] = str(value)
        reasons[key] = "the node's MIG owner (mig_layout, mig_owner)"
    for key, value in extra.items() if isinstance(extra, dict) else ():  # not a dict: label_problems says so
        labels[str(key)] = "" if value is None else str(value)
        reasons[str(key)] = "k8s_node_labels"
    return labels, reasons


def kubelet_settings(
    *,
    max_parallel_image_pulls=4,
    shutdown_grace_period="120s",
    shutdown_grace_period_critical_pods="30s",
    cpu_manager_policy="none",
    reserved_system_cpus="",
    topology_manager_policy="none",
    topology_manager_scope="container",
):
    """(patch, reasons, problems): the KubeletConfiguration fields this collection sets, applied
    as a kubeadm patch at join and kept in the kubelet's config afterwards."""
    patch, reasons, problems = {}, {}, []

    def put(key, value, reason):
        patch[key] = value
        reasons[key] = reason

    put("cgroupDriver", "systemd", "containerd's runc runs with SystemdCgroup = true (k8s_node writes it)")
    put("containerRuntimeEndpoint", CRI_SOCKET, "the node's containerd")
    if max_parallel_image_pulls and int(max_parallel_image_pulls) > 1:
        put("serializeImagePulls", False, "NGC images are tens of GB: one pull must not hold back the others")
        put("maxParallelImagePulls", int(max_parallel_image_pulls), "k8s_node_max_parallel_image_pulls")
    else:
        put("serializeImagePulls", True, "k8s_node_max_parallel_image_pulls is 1")
    if shutdown_grace_period:
        put("shutdownGracePeriod", shutdown_grace_period, "pods get to stop (checkpoint) before the node powers off")
        put("shutdownGracePeriodCriticalPods", shutdown_grace_period_critical_pods, "of that, the critical pods' part")
    if cpu_manager_policy not in ("none", "static"):
        problems.append(
            _problem(
                "error",
                "k8s_node_cpu_manager_policy",
                f"k8s_node_cpu_manager_policy is {cpu_manager_policy!r}",
                "use none or static",
            )
        )
    elif cpu_manager_policy == "static":
        if not reserved_system_cpus:
            problems.append(
                _problem(
                    "error",
                    "k8s_node_reserved_system_cpus",
                    "k8s_node_cpu_manager_policy is static with no CPUs reserved for the system: kubelet refuses "
                    "to start (the static policy needs reserved CPUs)",
                    'set k8s_node_reserved_system_cpus to the CPUs the system keeps, such as "0-1"',
                )
            )
        put("cpuManagerPolicy", "static", "whole CPUs for Guaranteed pods, on the GPUs' NUMA node")
        put("reservedSystemCPUs", str(reserved_system_cpus), "k8s_node_reserved_system_cpus")
    if topology_manager_policy not in TOPOLOGY_POLICIES:
        problems.append(
            _problem(
                "error",
                "k8s_node_topology_manager_policy",
                f"k8s_node_topology_manager_policy is {topology_manager_policy!r}",
                f"use one of {', '.join(TOPOLOGY_POLICIES)}",
            )
        )
    elif topology_manager_policy != "none":
        if topology_manager_scope not in TOPOLOGY_SCOPES:
            problems.append(
                _problem(
                    "error",
                    "k8s_node_topology_manager_scope",
                    f"k8s_node_topology_manager_scope is {topology_manager_scope!r}",
                    f"use one of {', '.join(TOPOLOGY_SCOPES)}",
                )
            )
        put("topologyManagerPolicy", topology_manager_policy, "GPUs, NICs and CPUs of a pod from one NUMA node")
        put("topologyManagerScope", topology_manager_scope, "k8s_node_topology_manager_scope")
    return patch, reasons, problems


def parse_join_command(text):
    """{endpoint, token, ca_cert_hashes} from ``kubeadm token create --print-join-command``."""
    words = str(text or "").split()
    if words[:2] != ["kubeadm", "join"] or len(words) < 3:
        raise ValueError(
            f"kubeadm token create --print-join-command printed a line starting {' '.join(words[:2])!r}, not "
            "'kubeadm join': run it on the control plane by hand and check its admin.conf"
        )
    found = {"endpoint": words[2], "token": "", "ca_cert_hashes": []}
    for flag, value in itertools.pairwise(words):
        if flag == "--token":
            found["token"] = value
        elif flag == "--discovery-token-ca-cert-hash":
            found["ca_cert_hashes"].append(value)
    if not TOKEN.fullmatch(found["token"]) or not all(CA_HASH.fullmatch(h) for h in found["ca_cert_hashes"]):
        raise ValueError(
            "kubeadm token create --print-join-command printed no token of the form [a-z0-9]{6}.[a-z0-9]{16} "
            "or a CA hash not of the form sha256:<64 hex>: check the control plane's kubeadm"
        )
    if not found["ca_cert_hashes"]:
        raise ValueError("kubeadm printed a join command without --discovery-token-ca-cert-hash: the CA is not pinned")
    return found


def join_configuration(join, node_name, *, labels, taints, patches_dir, cri_socket=CRI_SOCKET):
    """kubeadm's JoinConfiguration (kubeadm.k8s.io/v1beta4) for a worker node: token discovery with
    the CA pinned, the node's labels and taints, and the kubelet patches folder."""
    label_arg = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    args = [{"name": "node-labels", "value": label_arg}] if label_arg else []
    return {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": join["endpoint"],
                "token": join["token"],
                "caCertHashes": list(join["ca_cert_hashes"]),
            }
        },
        "nodeRegistration": {
            "name": node_name,
            "criSocket": cri_socket,
            "kubeletExtraArgs": args,
            "taints": [{k: v for k, v in t.items() if v not in (None, "")} for t in taints or []],
        },
        "patches": {"directory": patches_dir},
    }


_DURATION = re.compile(r"(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,6})s)?")
TOKEN_TTL_MAX = 3600  # a join token outlives its join by minutes at most; an hour covers a slow one


def token_ttl_problems(ttl, variable="k8s_node_token_ttl"):
    """A join token's lifetime (kubeadm's --ttl: 15m, 1h, 900s) must be set and at most an hour:
    kubeadm reads 0 as a token that never expires."""
    text = str(ttl).strip()
    match = _DURATION.fullmatch(text)
    if text == "0" or (match and text and not any(match.groups())):
        seconds = 0
    elif match and text:
        hours, minutes, secs = (int(g or 0) for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    else:
        return [
            _problem(
                "error", variable, f"{variable} is {ttl!r}, not a duration kubeadm reads", "write it as 15m, 1h or 900s"
            )
        ]
    if seconds == 0:
        return [
            _problem(
                "error",
                variable,
                f"{variable} is {ttl!r}: kubeadm makes a join token that never expires",
                "give it a lifetime of an hour at most (the default 15m covers a join)",
            )
        ]
    if seconds > TOKEN_TTL_MAX:
        return [
            _problem(
                "error",
                variable,
                f"{variable} is {ttl!r}, longer than an hour: a leaked join token lets any machine join",
                "give it a lifetime of an hour at most (the role deletes the token after the join)",
            )
        ]
    return []


def node_plan(nvidia_gpu, *, host_components, mig_labels, labels, taints, kubelet, token_ttl="15m"):
    """Everything k8s_node decides for one node before it changes anything: its labels, its
    kubelet settings (``kubelet`` holds kubelet_settings' keyword arguments), with their reasons,
    and every problem of the user's labels, taints and settings."""
    all_labels, label_reasons = node_labels(nvidia_gpu, host_components, mig_labels, labels)
    patch, kubelet_reasons, problems = kubelet_settings(**(kubelet or {}))
    problems = label_problems(labels, "k8s_node_labels") + taint_problems(taints) + problems
    problems += token_ttl_problems(token_ttl)
    return {
        "labels": all_labels,
        "label_reasons": label_reasons,
        "kubelet": patch,
        "kubelet_reasons": kubelet_reasons,
        "problems": [dict(p, text=f"{p['message']}: {p['fix']}.") for p in problems],
    }


# -- the control side: the GPU Operator (or the device plugin) over the host stack, and its gates ----
# NFD's DaemonSets carry this name (the node-feature-discovery chart's labels).
NFD_NAME = "node-feature-discovery"


def foreign_nfd(daemonsets, own_namespace):
    """The Node Feature Discovery DaemonSets outside ``own_namespace``: NFD another release runs.
    The operator's own NFD (in its namespace) does not count, or a second run would turn it off."""
    out = []
    for ds in daemonsets or []:
        meta = ds.get("metadata") or {}
        labels = meta.get("labels") or {}
        named = labels.get("app.kubernetes.io/name") == NFD_NAME or str(meta.get("name", "")).startswith(NFD_NAME)
        if named and meta.get("namespace") != own_namespace:
            out.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return sorted(out)


def device_plugin_values(mig, nfd_present):
    """(values, reasons): the light variant, the device plugin chart with GPU Feature Discovery, over
    the host's driver and toolkit."""
    values, reasons = {}, {}
    strategy = mig["strategy"]
    _set(values, reasons, "migStrategy", strategy, mig["reason"])
    _set(values, reasons, "nvidiaDriverRoot", "/", "the nvidia_driver role installed the driver on the host")
    _set(
        values,
        reasons,
        "runtimeClassName",
        "nvidia",
        "the plugin reads NVML through the host toolkit's nvidia runtime, by name, whatever containerd's default",
    )
    _set(values, reasons, "gfd.enabled", True, "GPU Feature Discovery labels the nodes (product, count, MIG)")
    _set_nfd(values, reasons, nfd_present)
    return values, reasons


def platform(
    nodes,
    *,
    variant="operator",
    chart="v26.7.0",
    nfd_present=False,
    kubernetes_version="",
    dra=False,
    namespace="gpu-operator",
    tiers=None,
):
    """Everything the control-side play applies, from the k8s_nodes' facts and variables: the
    chart's values with their reasons, the manifests (the namespace, the RuntimeClass nvidia, the
    workload tiers' PriorityClasses), and each node's expected allocatable GPUs (or MIG slices).

    ``nodes``: [{name, nvidia_gpu, mig_layout, mig_owner, dcgm_exporter}]; ``tiers``: the
    workload_tiers filter's answer (or None)."""
    nodes = list(nodes or [])
    kubernetes_version = str(kubernetes_version or "").lstrip("v")
    if variant not in ("operator", "light"):
        raise ValueError(f"k8s_platform_variant is {variant!r}: use operator (the GPU Operator) or light")
    for node in nodes:
        if variant == "light" and node.get("mig_owner") == "operator":
            raise ValueError(
                f"{node['name']} has mig_owner: operator, but the light variant runs no GPU Operator (no MIG "
                "manager): set mig_owner: host there, or k8s_platform_variant: operator"
            )
    mig = mig_utils.kubernetes_cluster(nodes)
    expected = {name: n["allocatable"] for name, n in mig["nodes"].items()}
    strategy = mig["strategy"]
    if variant == "operator":
        values, reasons = gpu_operator_values(
            chart,
            mig=mig,
            nfd_present=bool(nfd_present),
            host_dcgm_exporter=bool(nodes) and all(n.get("dcgm_exporter") for n in nodes),
            kubernetes_version=kubernetes_version,
            dra=bool(dra),
        )
    else:
        if dra:
            raise ValueError("DRA comes with the GPU Operator's chart v26.7.0: set k8s_platform_variant: operator")
        values, reasons = device_plugin_values(mig, bool(nfd_present))
    manifests = platform_manifests(namespace) + list(tiers or [])
    return {
        "values": values,
        "reasons": reasons,
        "manifests": manifests,
        "expected": expected,
        "mig_strategy": strategy,
    }


def allocatable_problems(node_objects, expected):
    """What a node's allocatable GPUs (or MIG slices) say against what its facts and layout
    expect: each node of ``expected`` must be in the cluster and show each resource at its count."""
    seen = {
        (n.get("metadata") or {}).get("name"): (n.get("status") or {}).get("allocatable") or {} for n in node_objects
    }
    out = []
    for name in sorted(expected):
        if name not in seen:
            out.append(f"{name} is no node of the cluster: run the k8s_node role on it first")
            continue
        for resource, count in sorted(expected[name].items()):
            got = seen[name].get(resource)
            try:
                number = int(str(got))
            except ValueError:
                number = None
            if number != int(count):
                out.append(
                    f"{name} shows {resource}: {got if got is not None else 'none'}, its facts and layout say {count}: "
                    "check the device plugin's pod on it and its log (a GPU lost, a MIG layout not applied)"
                )
    return out
