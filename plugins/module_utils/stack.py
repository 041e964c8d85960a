# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evaluate a declared NVIDIA stack against the compatibility tables and a node's hardware.

:func:`check_stack` is pure: it takes the declared variables and the node's facts and returns
``(problems, resolved)``. Each problem names the inventory variable to change. Nothing here
touches a machine; the ``stack_check`` module and the ``preflight`` role call it.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils import canonical, compat
from ansible_collections.gpuops.cluster.plugins.module_utils.compat import driver_meets, vtuple
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import GPUS

BRANCH_RE = re.compile(r"\d{3}")
DRIVER_RE = re.compile(r"(\d{3})\.\d+(\.\d+)?")
CUDA_RE = re.compile(r"\d{1,2}\.\d{1,2}")
CUDNN_RE = re.compile(r"(\d+)\.(\d+)(\.\d+){0,2}(-\d+)?(\+cuda(\d+\.\d+))?")
NCCL_RE = re.compile(r"(\d+)\.(\d+)(\.\d+)?(-(\d+))?(\+cuda(\d+\.\d+))?")
SEVERITIES = ("error", "warning")
# Optional values checked by shape alone: (variable, pattern, what it should be, fix).
# A DCGM 4 release as dcgm_version takes it: 4.4.1, with an optional epoch and revision.
DCGM4_RE = re.compile(r"(?:[0-9]+:)?4\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.~+]+)?")
OPTIONAL_FORMATS = (
    (
        "nvidia_driver_fabricmanager_version",
        DRIVER_RE,
        "a driver version",
        "leave it empty: Fabric Manager always follows the driver's version.",
    ),
    (
        "cudnn_version",
        CUDNN_RE,
        "a cuDNN version",
        'write it as NVIDIA does, e.g. cudnn_version: "9.10.2.21" or "8.9.7.29".',
    ),
    (
        "nccl_version",
        NCCL_RE,
        "an NCCL version",
        'write MAJOR.MINOR.PATCH with an optional build, e.g. nccl_version: "2.26.5" or "2.26.5-1+cuda12.8".',
    ),
)
DATACENTER_SLUGS = frozenset(row[2] for row in GPUS.values())


def problem(severity, variable, message, fix):
    return {"severity": severity, "variable": variable, "message": message, "fix": fix}


def errors(problems):
    return [p for p in problems if p["severity"] == "error"]


def format_problems(problems, header="The declared stack cannot work on this node"):
    """One message that lists every problem, errors first, each with its variable and fix."""
    ordered = sorted(problems, key=lambda p: SEVERITIES.index(p["severity"]))
    n_err = len(errors(problems))
    lines = [f"{header}: {n_err} error(s), {len(problems) - n_err} warning(s)."]
    for p in ordered:
        lines.append("- [{}] {}: {} Fix: {}".format(p["severity"], p["variable"], p["message"], p["fix"]))
    return "\n".join(lines)


def _cuda_major(minor):
    return vtuple(minor)[0]


class _Check:
    """Collects problems while the rules run; ``certain=False`` rows only warn."""

    def __init__(self):
        self.problems = []
        # Why each decision went the way it did, by decision (see decisions()).
        self.reasons = {}

    def error(self, variable, message, fix, certain=True):
        severity = "error" if certain else "warning"
        if not certain:
            message += " (from a row NVIDIA has not confirmed)"
        self.problems.append(problem(severity, variable, message, fix))

    def warn(self, variable, message, fix):
        self.problems.append(problem("warning", variable, message, fix))


# --- input formats --------------------------------------------------------------------------------


def validate_formats(stack):
    """Problems in the shape of the declared values, before any rule reads them."""
    c = _Check()
    branch = stack.get("nvidia_driver_branch")
    if not branch or not BRANCH_RE.fullmatch(str(branch)):
        digits = re.sub(r"\D", "", str(branch or ""))
        c.error(
            "nvidia_driver_branch",
            f"{branch!r} is not a driver branch.",
            'write the branch number only, e.g. nvidia_driver_branch: "{}".'.format(
                digits if len(digits) == 3 else "580"
            ),
        )
    version = stack.get("nvidia_driver_version")
    if version:
        match = DRIVER_RE.fullmatch(str(version))
        if not match:
            c.error(
                "nvidia_driver_version",
                f"{version!r} is not a driver version.",
                'write the full version, e.g. nvidia_driver_version: "580.95.05", or leave it empty to take the '
                "branch's newest.",
            )
        elif branch and BRANCH_RE.fullmatch(str(branch)) and match.group(1) != str(branch):
            c.error(
                "nvidia_driver_version",
                f"{version} is not in branch {branch} (nvidia_driver_branch).",
                f'set nvidia_driver_branch: "{match.group(1)}" or a {branch}.x nvidia_driver_version.',
            )
    versions = stack.get("cuda_versions") or []
    for item in versions:
        if not CUDA_RE.fullmatch(str(item)):
            c.error(
                "cuda_versions",
                f"{item!r} is not a CUDA version MAJOR.MINOR (a string with commas such as 12,8 is split "
                "at the commas, and 12.8.1 names an update, not a toolkit).",
                "write a YAML list of MAJOR.MINOR strings, e.g. cuda_versions: ['12.8', '12.4'].",
            )
    for item in sorted({v for v in versions if versions.count(v) > 1}):
        c.warn("cuda_versions", f"{item} is listed more than once.", "list each toolkit once.")
    default = stack.get("cuda_default_version")
    if default and default not in versions:
        c.error(
            "cuda_default_version",
            "{} is not one of cuda_versions ({}).".format(default, ", ".join(versions) or "empty"),
            "add it to cuda_versions or pick one of them.",
        )
    for variable, pattern, what, fix in OPTIONAL_FORMATS:
        value = stack.get(variable)
        if value and not pattern.fullmatch(str(value)):
            c.error(variable, f"{value!r} is not {what}.", fix)
    return c.problems


# --- hardware ------------------------------------------------------------------------------------


class _Hardware:
    def __init__(self, facts):
        facts = facts or {}
        self.present = bool(facts.get("present"))
        gpus = facts.get("gpus") or []
        if not gpus and self.present:
            gpus = [
                {
                    "name": facts.get("product"),
                    "slug": facts.get("slug"),
                    "compute_capability": facts.get("compute_capability"),
                }
            ]
        self.gpus = gpus
        self.nvswitch_count = int(facts.get("nvswitch_count") or 0)
        self.hcas = [h.get("model") or "" for h in facts.get("hca_pci") or []]
        self.installed_driver = facts.get("driver_version")
        seen = {}
        for gpu in gpus:
            key = (gpu.get("name"), gpu.get("slug"), gpu.get("compute_capability"))
            seen.setdefault(key, 0)
            seen[key] += 1
        self.models = [
            {"name": name or slug or "unknown GPU", "slug": slug, "capability": cc, "count": n}
            for (name, slug, cc), n in seen.items()
        ]

    def label(self, model):
        cc = model["capability"]
        return "{}{}".format(model["name"], f" (compute capability {cc})" if cc else "")

    def known(self):
        """Models whose compute capability is in the tables, with their row."""
        for model in self.models:
            row = compat.architecture(model["capability"]) if model["capability"] else None
            if row is not None:
                yield model, row

    def datacenter(self):
        """True when every GPU is a datacenter model, False when one is a consumer model, else None."""
        verdict = True
        for model in self.models:
            if compat.CONSUMER_NAME.search(model["name"] or ""):
                return False
            if model["slug"] not in DATACENTER_SLUGS:
                verdict = None
        return verdict


# --- rules -----------------------------------------------------------------------------------------


def _model_rule(model, key):
    """A model's own rule value (``"modules"``, ``"driver"``, ``"note"``), or None."""
    rule = compat.MODEL_RULES.get(model["slug"])
    return None if rule is None else rule.values.get(key)


def _kernel_module(c, stack, hw, branch):
    declared = stack.get("nvidia_driver_kernel_module") or "auto"
    need_open = [m for m, row in hw.known() if row.modules == "open"]
    need_open += [m for m in hw.models if m not in need_open and _model_rule(m, "modules") == "open"]
    need_prop = [m for m, row in hw.known() if row.modules == "proprietary"]

    def names(models):
        return ", ".join(hw.label(m) for m in models)

    if need_open and need_prop:
        c.error(
            "nvidia_driver_kernel_module",
            f"this node mixes GPUs that need the open kernel modules ({names(need_open)}) with GPUs that need the "
            f"proprietary ones ({names(need_prop)}); one driver cannot load both.",
            "split these GPUs across nodes; no kernel module flavour serves both.",
        )
        return declared if declared != "auto" else "proprietary", "mixed GPUs"
    if declared == "open" and need_prop:
        c.error(
            "nvidia_driver_kernel_module",
            f"open kernel modules do not support {names(need_prop)}: NVIDIA supports them from Turing on.",
            "set nvidia_driver_kernel_module: proprietary (or auto).",
        )
    if declared == "proprietary" and need_open:
        c.error(
            "nvidia_driver_kernel_module",
            f"{names(need_open)} requires the open kernel modules; the proprietary ones do not support it.",
            "set nvidia_driver_kernel_module: open (or auto).",
        )
    if declared == "open" and int(branch) < compat.OPEN_MODULES_SINCE.branch:
        c.error(
            "nvidia_driver_kernel_module",
            f"open kernel modules exist from R{compat.OPEN_MODULES_SINCE.branch}; branch {branch} has none.",
            "set nvidia_driver_branch to 580 (or newer), or nvidia_driver_kernel_module: proprietary.",
        )
    if declared == "proprietary" and int(branch) >= compat.OPEN_ONLY_FROM.branch:
        c.warn(
            "nvidia_driver_kernel_module",
            f"NVIDIA's R{compat.OPEN_ONLY_FROM.branch} installation guide lists only the open kernel modules.",
            "set nvidia_driver_kernel_module: open (or auto) unless the GPU needs proprietary ones.",
        )
    if declared != "auto":
        return declared, "declared"
    if need_open:
        return "open", "required by " + names(need_open)
    if need_prop:
        return "proprietary", "required by " + names(need_prop)
    if int(branch) >= compat.OPEN_DEFAULT_SINCE.branch:
        return "open", f"NVIDIA's default from R{compat.OPEN_DEFAULT_SINCE.branch}"
    return "proprietary", f"NVIDIA's default before R{compat.OPEN_DEFAULT_SINCE.branch}"


def _driver(c, stack, hw, branch, today):
    info = compat.branch_info(branch, today)
    if info is None:
        c.warn(
            "nvidia_driver_branch",
            f"R{branch} is in none of NVIDIA's driver tables we carry.",
            "use a datacenter branch, e.g. 580 (LTSB) or 595 (PB).",
        )
    elif info["ended"]:
        c.warn(
            "nvidia_driver_branch",
            "R{} has reached end of life{} and gets no security fixes.".format(
                branch, " ({})".format(info["eol"]) if info["eol"] else ""
            ),
            'move to a supported branch, e.g. nvidia_driver_branch: "580" (LTSB, until {}).'.format(
                compat.BRANCHES["580"].eol
            ),
        )
    elif info["kind"] == "unlisted":
        c.warn(
            "nvidia_driver_branch",
            f"R{branch} is not in NVIDIA's datacenter driver lifecycle table (a feature branch).",
            "use an LTSB or production branch for a cluster, e.g. 580.",
        )
    elif info["kind"] == "NFB":
        c.warn(
            "nvidia_driver_branch",
            f"R{branch} is a new-feature branch, short-lived and meant for evaluation.",
            "use an LTSB or production branch for a cluster, e.g. 580.",
        )
    driver = stack.get("nvidia_driver_version") or branch
    for model, row in hw.known():
        if not driver_meets(driver, row.driver):
            c.error(
                "nvidia_driver_branch",
                f"{hw.label(model)} needs driver {row.driver} or newer; {driver} is older.",
                f"set nvidia_driver_branch to {vtuple(row.driver)[0]} or newer.",
                certain=row.certain,
            )
        if row.last_cuda_major is not None and int(branch) > compat.PRE_TURING_LAST_BRANCH.branch:
            c.error(
                "nvidia_driver_branch",
                f"R{compat.PRE_TURING_LAST_BRANCH.branch} is the last driver branch for {hw.label(model)}; "
                f"R{branch} does not support it.",
                'set nvidia_driver_branch: "580".',
                certain=compat.PRE_TURING_LAST_BRANCH.certain,
            )
    for model in hw.models:
        floor = _model_rule(model, "driver")
        if floor and not driver_meets(driver, floor):
            c.warn(
                "nvidia_driver_version",
                f"{hw.label(model)} ({_model_rule(model, 'note')}) needs driver {floor} or newer.",
                f"set nvidia_driver_version to {floor} or newer (or leave it empty for the branch's newest).",
            )
    return driver, info


def _cuda(c, stack, hw, *, driver, native, branch_kind):
    versions = list(dict.fromkeys(stack.get("cuda_versions") or []))
    forward = []
    minimum = None
    native_major = _cuda_major(native) if native else 0
    datacenter = hw.datacenter()
    for minor in versions:
        rows = compat.cuda_rows(minor)
        if not rows:
            major = _cuda_major(minor)
            known = compat.cuda_minors(major)
            c.error(
                "cuda_versions",
                "there is no CUDA {} release{}.".format(
                    minor, "; CUDA {}.x has {}".format(major, ", ".join(known)) if known else ""
                ),
                f"use a released toolkit, e.g. {known[-1] if known else compat.cuda_minors()[-1]}.",
            )
            continue
        ga, newest = rows[0], rows[-1]
        major = _cuda_major(minor)
        family = compat.CUDA_FAMILIES.get(major)
        for model, row in hw.known():
            if vtuple(minor) < vtuple(row.first_cuda):
                c.error(
                    "cuda_versions",
                    f"CUDA {minor} cannot build for {hw.label(model)}: its first toolkit is CUDA {row.first_cuda}.",
                    f"use CUDA {row.first_cuda} or newer.",
                    certain=row.certain,
                )
            if row.last_cuda_major is not None and major > row.last_cuda_major:
                c.error(
                    "cuda_versions",
                    f"CUDA {minor} removed {row.arch.capitalize()} ({hw.label(model)}): CUDA "
                    f"{row.last_cuda_major}.x is the last toolkit for it.",
                    f"use CUDA {row.last_cuda_major}.x, e.g. cuda_versions: "
                    f"['{compat.cuda_minors(row.last_cuda_major)[-1]}'].",
                )
        if major > native_major:
            why = None
            if not stack.get("cuda_forward_compat", True):
                why = "cuda_forward_compat is false"
            elif datacenter is False:
                why = "forward compatibility (cuda-compat) works only on datacenter GPUs"
            elif branch_kind not in compat.FORWARD_COMPAT_BRANCH_KINDS:
                why = "forward compatibility (cuda-compat) is supported on datacenter LTSB and production branches only"
            if why:
                c.error(
                    "cuda_versions",
                    "CUDA {} needs a driver of the {}.x family (>= {}); driver {} runs CUDA {} natively, "
                    "and {}.".format(
                        minor, major, family.driver if family else ga.driver, driver, native or "none", why
                    ),
                    f"set nvidia_driver_branch to {vtuple(ga.driver)[0]} or newer, or keep cuda_versions on "
                    f"{native_major}.x.",
                )
            else:
                forward.append(minor)
                c.warn(
                    "cuda_versions",
                    "CUDA {} is newer than driver {} (CUDA {} natively): it runs through the forward "
                    "compatibility package cuda-compat-{}{}.".format(
                        minor,
                        driver,
                        native,
                        minor.replace(".", "-"),
                        "" if datacenter else "; we could not confirm these GPUs are datacenter models",
                    ),
                    f"set nvidia_driver_branch to {vtuple(ga.driver)[0]} or newer to run it natively.",
                )
            continue
        if not driver_meets(driver, ga.driver):
            in_family = family is not None and driver_meets(driver, family.driver)
            if in_family and stack.get("cuda_minor_version_compat"):
                c.warn(
                    "cuda_versions",
                    f"driver {driver} is older than CUDA {minor}'s minimum {ga.driver}: it runs under minor-version "
                    f"compatibility only (no PTX JIT of {minor} code, newer features missing).",
                    f"set nvidia_driver_branch to {vtuple(ga.driver)[0]} or newer.",
                )
            else:
                c.error(
                    "cuda_versions",
                    f"CUDA {minor} needs driver {ga.driver} or newer; {driver} is older.",
                    "set nvidia_driver_branch to {} or newer, or use CUDA {} or older{}.".format(
                        vtuple(ga.driver)[0],
                        native,
                        " (or cuda_minor_version_compat: true to accept limited features)" if in_family else "",
                    ),
                )
            continue
        if not driver_meets(driver, newest.driver):
            c.warn(
                "cuda_versions",
                f"the newest CUDA {minor} update ({newest.label}) needs driver {newest.driver}; {driver} runs it "
                "with the features of an older update.",
                f"pin nvidia_driver_version to {newest.driver} or newer.",
            )
        if len(vtuple(driver)) == 1 and (minimum is None or vtuple(newest.driver) > vtuple(minimum)):
            if vtuple(newest.driver)[0] == vtuple(driver)[0]:
                minimum = newest.driver
    return versions, forward, minimum


def _os(c, stack, versions):
    dist = stack.get("distribution") or ""
    major = str(stack.get("distribution_major_version") or "")
    family = "apt" if dist in ("Debian", "Ubuntu") else "dnf"
    repo = None
    if (dist, major) in compat.DISTRIBUTIONS:
        repo, tested = compat.DISTRIBUTIONS[(dist, major)]
        if not tested:
            c.warn(
                "distribution",
                f"{dist} {major} is not tested: no scenario of this collection runs the roles there.",
                "use Debian 12 or Ubuntu 24.04 for a tested install, or test the roles on a staging node first.",
            )
        elif tested is not True:
            c.warn(
                "distribution",
                f"{dist} {major} is tested in part: the collection's CI runs {tested} there, not the other roles.",
                "use Debian 12 or Ubuntu 24.04 for a tested install of the other roles, or try them on a staging "
                "node first.",
            )
    elif dist in compat.RHEL_FAMILY and major in compat.RHEL_MAJORS:
        repo = "rhel" + major
        c.warn(
            "distribution",
            f"{dist} {major}: the RHEL-family task files follow NVIDIA's documentation and are not tested.",
            "use Debian 12 or Ubuntu 24.04 for a tested install; six roles refuse RHEL (apt only), preflight names "
            "them.",
        )
    else:
        c.error(
            "distribution",
            "{} {} has no NVIDIA CUDA repository this collection supports.".format(dist or "unknown", major),
            "use Debian 12, Ubuntu 22.04/24.04 or a RHEL 8/9/10 family system.",
        )
    arch = stack.get("cpu_architecture") or "x86_64"
    try:
        compat.architecture_names(arch)
    except ValueError as err:
        c.error("cpu_architecture", str(err), "run the GPU stack on x86_64 or aarch64 (arm64) nodes.")
    else:
        if compat.CPU_ARCHITECTURE_ALIASES.get(arch, arch) != "x86_64":
            c.warn(
                "cpu_architecture",
                f"{arch}: the packages and repositories are resolved for arm64 (CUDA's sbsa folder, DOCA's "
                "arm64-sbsa, Canonical's ports archive), but no scenario of this collection runs on arm64.",
                "try the roles on a staging node of this architecture first.",
            )
    if repo in compat.NO_CUDA13.distributions:
        for minor in versions:
            if _cuda_major(minor) >= 13:
                c.error(
                    "cuda_versions",
                    f"CUDA {minor} has no packages for {dist} {major} (dropped from CUDA 13.0).",
                    "upgrade the OS to Ubuntu 22.04/24.04 or stay on CUDA 12.x.",
                )
    return family, repo


def _cudnn(c, stack, hw, *, driver, default, forward):
    version = stack.get("cudnn_version")
    if not version:
        return None
    match = CUDNN_RE.fullmatch(version)
    major = int(match.group(1))
    if major not in (8, 9):
        c.error(
            "cudnn_version",
            f"there is no cuDNN {version}: the releases are cuDNN 8 and 9.",
            'use cuDNN 9 for CUDA 12/13, e.g. cudnn_version: "9.10.2.21".',
        )
        return None
    build = match.group(6)
    cuda_major = stack.get("cudnn_cuda_major") or (int(vtuple(build)[0]) if build else None)
    default_major = _cuda_major(default) if default else None
    if cuda_major is None:
        cuda_major = default_major
    if default_major is None:
        c.error(
            "cudnn_version",
            "cuDNN needs a CUDA toolkit, and cuda_versions is empty.",
            "add the CUDA toolkit cuDNN should build against to cuda_versions.",
        )
        return None
    if cuda_major != default_major:
        c.error(
            "cudnn_cuda_major" if stack.get("cudnn_cuda_major") else "cudnn_version",
            f"cuDNN built for CUDA {cuda_major} does not work with the default CUDA {default}: the CUDA majors must "
            "match.",
            f"use the cuDNN build for CUDA {default_major} (cudnn_cuda_major: {default_major}).",
        )
    row = compat.cudnn_release(version)
    if row is None:
        c.warn(
            "cudnn_version",
            f"cuDNN {version} is outside the support matrices we carry (8.9 and 9.x).",
            "check it against NVIDIA's cuDNN support matrix, or use 9.10.2.21.",
        )
    else:
        if cuda_major not in row.cuda_majors:
            c.error(
                "cudnn_version",
                "cuDNN {} has no build for CUDA {} (builds for CUDA {}).".format(
                    version, cuda_major, " and ".join(str(m) for m in row.cuda_majors)
                ),
                "use a cuDNN release with a CUDA {} build{}.".format(
                    cuda_major, ", e.g. 9.17 or newer" if cuda_major >= 13 else ", e.g. 9.10.2.21"
                ),
                certain=row.certain,
            )
        for model, arch in hw.known():
            cc = vtuple(model["capability"])
            if not vtuple(row.min_cc) <= cc <= vtuple(row.max_cc):
                c.error(
                    "cudnn_version",
                    f"cuDNN {version} supports compute capability {row.min_cc} to {row.max_cc}, not {hw.label(model)}.",
                    f"use cuDNN 9.10.x for {arch.arch.capitalize()} GPUs."
                    if cc < vtuple(row.min_cc)
                    else "use cuDNN 9 (a release that lists compute capability {}).".format(model["capability"]),
                    certain=row.certain,
                )
    floor = compat.CUDNN_DRIVER.get(cuda_major)
    # Under forward compatibility cuda-compat's libcuda stands in for the driver's.
    if floor and default not in forward and not driver_meets(driver, floor):
        c.error(
            "cudnn_version",
            f"cuDNN for CUDA {cuda_major} needs driver {floor} or newer; {driver} is older.",
            f"set nvidia_driver_branch to {vtuple(floor)[0]} or newer.",
        )
    blackwell = [m for m, arch in hw.known() if arch.arch == "blackwell"]
    if blackwell and cuda_major == 12 and not driver_meets(driver, compat.CUDNN_BLACKWELL_DRIVER.driver):
        c.error(
            "cudnn_version",
            f"cuDNN on Blackwell needs driver {compat.CUDNN_BLACKWELL_DRIVER.driver} or newer.",
            "set nvidia_driver_branch to 570 or newer.",
        )
    return {"version": version, "major": major, "cuda_major": cuda_major}


def _nccl(c, stack, hw, default):
    version = stack.get("nccl_version")
    if not version:
        return None
    match = NCCL_RE.fullmatch(version)
    major, minor = int(match.group(1)), int(match.group(2))
    build = match.group(7)
    if major != 2:
        c.error(
            "nccl_version",
            f"there is no NCCL {version}: NCCL versions are 2.x (the newest we know is {compat.NCCL_LATEST.version}).",
            'use an NCCL 2 release, e.g. nccl_version: "2.26.5".',
        )
        return None
    if match.group(3) is None:
        c.error(
            "nccl_version",
            f"{version} names no release: NCCL packages are versioned MAJOR.MINOR.PATCH.",
            f'name the release, e.g. nccl_version: "{version}.5".',
        )
        return None
    if (major, minor) > vtuple(compat.NCCL_LATEST.version)[:2]:
        c.warn(
            "nccl_version",
            f"NCCL {version} is newer than the newest release we know ({compat.NCCL_LATEST.version}).",
            "check the version against NVIDIA's NCCL release notes.",
        )
    if default is None:
        c.error("nccl_version", "NCCL needs a CUDA toolkit, and cuda_versions is empty.", "add one to cuda_versions.")
        return None
    build = build or default
    if _cuda_major(build) != _cuda_major(default):
        c.error(
            "nccl_version",
            f"NCCL {version} is built for CUDA {build}, but the default CUDA is {default}: the +cudaX.Y build must "
            "have the CUDA major of the runtime.",
            'use the +cuda{cuda} build, e.g. nccl_version: "{base}+cuda{cuda}".'.format(
                cuda=default, base=version.split("+", 1)[0] if "-" in version else version + "-1"
            ),
        )
    for model, arch in hw.known():
        floor = compat.NCCL_BUILD_FLOOR.get(arch.arch)
        if floor is not None and vtuple(build) < vtuple(floor.cuda):
            c.error(
                "nccl_version",
                f"an NCCL build for CUDA {build} has no code for {hw.label(model)}; it needs a CUDA {floor.cuda} or "
                "newer build.",
                f"use a +cuda{floor.cuda} or newer build of NCCL.",
            )
        if arch.last_cuda_major is not None and _cuda_major(build) > arch.last_cuda_major:
            c.error(
                "nccl_version",
                f"NCCL builds for CUDA {_cuda_major(build)} drop targets older than sm_75, so they have no code for "
                f"{hw.label(model)}.",
                f"use a +cuda{arch.last_cuda_major}.x build.",
            )
    base = version.split("+", 1)[0]
    return {"version": base if "-" in base else base + "-1", "cuda_build": build, "pinned_build": bool(match.group(7))}


def _dcgm(c, stack, hw, native):
    major = stack.get("dcgm_major")
    if not major:
        return None
    if major not in compat.DCGM_MAJORS:
        c.error("dcgm_major", f"there is no DCGM {major}.", "set dcgm_major: 4.")
        return None
    if compat.DCGM_MAJORS[major].monolithic:
        # The dcgm role installs DCGM 4 and removes DCGM 3 where it finds it; decided here, once.
        c.error(
            "dcgm_major",
            "DCGM 3 is the old monolithic datacenter-gpu-manager package; the dcgm role installs DCGM 4, "
            "which replaces it (and removes DCGM 3 where it is installed).",
            "set dcgm_major: 4.",
        )
        return {"major": major, "cuda_major": None, "version": None, "exporter_version": None}
    want = _cuda_major(native) if native else None
    why = f"follows the driver, which runs CUDA {native}" if want else "no driver CUDA to follow"
    pre_turing = [m for m, arch in hw.known() if arch.last_cuda_major is not None]
    if pre_turing and want and want > compat.DCGM_PRE_TURING_CUDA.cuda_major:
        want = compat.DCGM_PRE_TURING_CUDA.cuda_major
        why = "capped at CUDA {} for the pre-Turing GPUs ({})".format(
            want, ", ".join(sorted({hw.label(m) for m in pre_turing}))
        )
    declared = stack.get("dcgm_cuda_major")
    if declared and want and declared != want:
        c.error(
            "dcgm_cuda_major",
            "datacenter-gpu-manager-4-cuda{} does not match the driver, which runs CUDA {}{}.".format(
                declared, native, " and drives pre-Turing GPUs" if pre_turing else ""
            ),
            f"set dcgm_cuda_major: {want} (or leave it empty to follow the driver).",
        )
    c.reasons["dcgm"] = "declared dcgm_cuda_major" if declared else why
    version, exporter = _dcgm_versions(c, stack)
    return {"major": major, "cuda_major": declared or want, "version": version, "exporter_version": exporter}


def _dcgm_versions(c, stack):
    """dcgm_version and dcgm_exporter_version: DCGM 4 releases, and a pair NVIDIA built together."""
    version = stack.get("dcgm_version")
    exporter = stack.get("dcgm_exporter_version")
    if version and not DCGM4_RE.fullmatch(str(version)):
        c.error(
            "dcgm_version",
            f"{version!r} is not a DCGM 4 release.",
            'write it as NVIDIA does, e.g. dcgm_version: "4.4.1" (the epoch and revision are added).',
        )
        return None, exporter
    pairs = compat.DCGM_EXPORTER_BUILT_FOR.pairs
    base = str(version or "").split(":", 1)[-1].split("-", 1)[0]
    built_for = pairs.get(str(exporter or "").split("-", 1)[0])
    if version and exporter and built_for and built_for != base:
        c.error(
            "dcgm_exporter_version",
            f"dcgm-exporter {exporter} is built for DCGM {built_for}, not {base}.",
            "set dcgm_version and dcgm_exporter_version to one of NVIDIA's pairs: {}.".format(
                "; ".join(f"{dcgm} with exporter {exp}" for exp, dcgm in pairs.items())
            ),
        )
    return version, exporter


def _fabric(c, stack, hw, driver):
    fm_version = stack.get("nvidia_driver_fabricmanager_version")
    required = hw.nvswitch_count > 0
    exact = stack.get("nvidia_driver_version")
    if fm_version and exact and fm_version != exact:
        c.error(
            "nvidia_driver_fabricmanager_version",
            f"Fabric Manager {fm_version} with driver {exact}: Fabric Manager refuses to start unless its version "
            "equals "
            "the driver's exactly.",
            f"leave nvidia_driver_fabricmanager_version empty, or set it to {exact}.",
        )
    elif fm_version and not exact and vtuple(fm_version)[0] != vtuple(driver)[0]:
        c.error(
            "nvidia_driver_fabricmanager_version",
            f"Fabric Manager {fm_version} is not in the driver's branch {driver}.",
            "leave nvidia_driver_fabricmanager_version empty: it follows the driver.",
        )
    elif fm_version and not exact:
        c.warn(
            "nvidia_driver_fabricmanager_version",
            f"Fabric Manager is pinned to {fm_version} while the driver takes branch {driver}'s newest release; "
            "they must be equal.",
            f'set nvidia_driver_version: "{fm_version}" and leave nvidia_driver_fabricmanager_version empty.',
        )
    if fm_version and not required:
        c.warn(
            "nvidia_driver_fabricmanager_version",
            "this node has no NVSwitch, so Fabric Manager is not needed and will not be installed.",
            "remove nvidia_driver_fabricmanager_version for this host.",
        )
    nvlsm = required and any(
        model["capability"] in compat.NVLINK5_CAPABILITIES.capabilities for model, _row in hw.known()
    )
    return required, nvlsm


def _gpudirect(c, stack, hw, *, flavour, kernel, versions):
    ofed = stack.get("ofed_flavour") or "none"
    wanted = stack.get("ofed_gpudirect") or "auto"
    if ofed == "mlnx_ofed":
        for model in sorted(set(hw.hcas)):
            if any(model.startswith(name) for name in compat.MLNX_OFED_UNSUPPORTED.models):
                c.error(
                    "ofed_flavour",
                    f"MLNX_OFED does not support {model}; it needs DOCA-Host.",
                    "set ofed_flavour: doca.",
                )
    dmabuf_missing = []
    if flavour != "open":
        dmabuf_missing.append("open kernel modules")
    if kernel and vtuple(kernel)[:2] < vtuple(compat.DMABUF.kernel):
        dmabuf_missing.append(f"Linux {compat.DMABUF.kernel} or newer (running {kernel})")
    old = [v for v in versions if vtuple(v) < vtuple(compat.DMABUF.cuda)]
    if old:
        dmabuf_missing.append("CUDA {} or newer (declared {})".format(compat.DMABUF.cuda, ", ".join(old)))
    has_ofed = ofed in compat.PEERMEM_OFED.flavours
    if wanted == "peermem" and not has_ofed:
        c.error(
            "ofed_gpudirect",
            f"nvidia-peermem needs MLNX_OFED or DOCA-OFED, and ofed_flavour is {ofed}.",
            "set ofed_flavour: doca, or ofed_gpudirect: dmabuf.",
        )
    if wanted == "dmabuf" and dmabuf_missing:
        c.error(
            "ofed_gpudirect",
            "DMA-BUF GPUDirect RDMA needs {}.".format(", ".join(dmabuf_missing)),
            "meet those, or set ofed_gpudirect: peermem with ofed_flavour: doca.",
        )
    if wanted != "auto":
        c.reasons["gpudirect"] = "declared ofed_gpudirect"
        return wanted
    if ofed == "none":
        c.reasons["gpudirect"] = "ofed_flavour is none: the RDMA stack is not managed here"
        return "none"
    if has_ofed:
        c.reasons["gpudirect"] = f"ofed_flavour {ofed} ships nvidia-peermem"
        return "peermem"
    if not dmabuf_missing:
        c.reasons["gpudirect"] = (
            "inbox rdma-core with the open kernel modules, "
            f"Linux {compat.DMABUF.kernel}+ and CUDA {compat.DMABUF.cuda}+"
        )
        return "dmabuf"
    c.reasons["gpudirect"] = "inbox rdma-core without what DMA-BUF needs: " + ", ".join(dmabuf_missing)
    c.warn(
        "ofed_gpudirect",
        "with the inbox rdma-core GPUDirect RDMA works only through DMA-BUF, which needs {}: "
        "this node gets no GPUDirect RDMA.".format(", ".join(dmabuf_missing)),
        "set ofed_flavour: doca for nvidia-peermem, or meet those.",
    )
    return "none"


# --- packages ---------------------------------------------------------------------------------------


def _pkg(name, version=None):
    return {"name": name, "version": version}


def _packages(family, branch, *, exact, flavour, fm, nvlsm, versions, forward, cudnn, nccl, dcgm):
    apt = family == "apt"
    driver_ver = (exact + "-*") if exact else None
    pkgs = {
        "driver_pinning": [_pkg("nvidia-driver-pinning-" + branch, driver_ver)] if apt else [],
        "driver": [_pkg(n, driver_ver) for n in compat.driver_packages(family, branch, flavour)],
        "driver_compute_only": [
            _pkg(n, driver_ver) for n in compat.driver_packages(family, branch, flavour, compute_only=True)
        ],
        "fabricmanager": [],
        "nvlsm": [_pkg("nvlsm")] if nvlsm else [],
        "cuda": [_pkg("cuda-toolkit-" + v.replace(".", "-")) for v in versions],
        "cuda_compat": [_pkg("cuda-compat-" + v.replace(".", "-")) for v in forward],
        "cudnn": [],
        "nccl": [],
        "dcgm": [],
    }
    if fm:
        pkgs["fabricmanager"] = [
            _pkg("nvidia-fabricmanager-" + branch, driver_ver),
            _pkg("libnvidia-nscq-" + branch, driver_ver),
        ]
    if cudnn:
        version = cudnn["version"]
        if cudnn["major"] == 9:
            pin = version.split("+", 1)[0]
            pin = pin if "-" in pin else (pin + "-1" if len(vtuple(pin)) == 4 else pin + ".*")
            pkgs["cudnn"] = [
                _pkg("libcudnn9-cuda-{}".format(cudnn["cuda_major"]), pin),
                _pkg("libcudnn9-dev-cuda-{}".format(cudnn["cuda_major"]), pin),
            ]
        else:
            base = version.split("+", 1)[0]
            base = base if "-" in base else base + "-1"
            build = CUDNN_RE.fullmatch(version).group(6)
            suffix = "+cuda" + build if build else "+cuda{}.*".format(cudnn["cuda_major"])
            pkgs["cudnn"] = [_pkg("libcudnn8", base + suffix), _pkg("libcudnn8-dev", base + suffix)]
    if nccl:
        pin = "{}+cuda{}".format(nccl["version"], nccl["cuda_build"])
        pkgs["nccl"] = [_pkg("libnccl2", pin), _pkg("libnccl-dev", pin)]
    if dcgm:
        if dcgm["major"] == 3:
            pkgs["dcgm"] = [_pkg("datacenter-gpu-manager")]
        else:
            pkgs["dcgm"] = [
                _pkg("datacenter-gpu-manager-4-core"),
                _pkg("datacenter-gpu-manager-4-cuda{}".format(dcgm["cuda_major"])),
            ]
    return pkgs


# --- entry point -------------------------------------------------------------------------------------


def _canonical(c, stack, hw, *, branch, flavour, fm, kernel, index):
    """Canonical's packages for ``nvidia_driver_source: ubuntu`` (module_utils/canonical.py), or None."""
    dist = stack.get("distribution") or "unknown"
    if dist != "Ubuntu":
        c.error(
            "nvidia_driver_source",
            f"nvidia_driver_source is ubuntu, and this node runs {dist}: Canonical's driver packages are in "
            "Ubuntu's archive only.",
            "set nvidia_driver_source: nvidia (NVIDIA's CUDA repository) for this host.",
        )
        return None
    if not hw.present:
        return None
    if index is None:
        c.error(
            "nvidia_driver_source",
            "the node's package index could not be read (apt-cache show), so Canonical's driver versions are unknown.",
            "refresh the package lists (apt-get update) and run again.",
        )
        return None
    problems, plan = canonical.plan(
        branch=branch,
        flavour=flavour,
        kernel=kernel,
        exact=stack.get("nvidia_driver_version"),
        index=index,
        fabricmanager=fm,
        distribution=f"{dist} {stack.get('distribution_major_version') or ''}".strip(),
    )
    for severity, variable, message, fix in problems:
        (c.error if severity == "error" else c.warn)(variable, message, fix)
    if plan:
        c.reasons["modules"] = plan["reason"]
    return plan


def check_stack(stack, nvidia_gpu=None, today="2026-01-01", index=None):
    """Evaluate ``stack`` (the declared variables plus ``kernel``, ``distribution``,
    ``distribution_major_version`` and ``cpu_architecture``) against the tables and the node's
    ``nvidia_gpu`` facts. Returns ``(problems, resolved)``; ``resolved`` is None when the
    declared values are malformed.

    ``index`` is the node's package index for Canonical's driver packages
    (``canonical.parse_index`` of ``apt-cache show``), read where ``nvidia_driver_source`` is ubuntu."""
    problems = validate_formats(stack)
    bad = {p["variable"] for p in errors(problems)}
    if bad & {"nvidia_driver_branch", "nvidia_driver_version"}:
        return problems, None
    # A malformed optional value is reported once and left out; the other rules still run.
    stack = dict(stack, cuda_versions=[v for v in stack.get("cuda_versions") or [] if CUDA_RE.fullmatch(str(v))])
    for variable in bad - {"cuda_versions"}:
        stack[variable] = None
    c = _Check()
    c.problems = problems
    hw = _Hardware(nvidia_gpu)
    branch = str(stack["nvidia_driver_branch"])
    exact = stack.get("nvidia_driver_version")
    if hw.present:
        for model in hw.models:
            if not model["capability"] or compat.architecture(model["capability"]) is None:
                c.warn(
                    "nvidia_gpu",
                    "{} is not in our GPU tables; its architecture rules were not checked.".format(model["name"]),
                    "check the stack against NVIDIA's tables by hand for this GPU.",
                )
    flavour, flavour_reason = _kernel_module(c, stack, hw, branch)
    driver, info = _driver(c, stack, hw, branch, today)
    native = compat.native_cuda(driver)
    versions, forward, minimum = _cuda(
        c, stack, hw, driver=driver, native=native, branch_kind=info["kind"] if info else None
    )
    family, repo = _os(c, stack, versions)
    default = stack.get("cuda_default_version") or (max(versions, key=vtuple) if versions else None)
    cudnn = _cudnn(c, stack, hw, driver=driver, default=default, forward=forward)
    nccl = _nccl(c, stack, hw, default)
    dcgm = _dcgm(c, stack, hw, native)
    fm, nvlsm = _fabric(c, stack, hw, driver)
    # The kernel the modules are for: declared, else the running one.
    kernel = stack.get("nvidia_driver_kernel") or stack.get("kernel")
    source = stack.get("nvidia_driver_source") or "nvidia"
    ubuntu = None
    if source == "ubuntu":
        ubuntu = _canonical(c, stack, hw, branch=branch, flavour=flavour, fm=fm, kernel=kernel, index=index)
        if ubuntu:
            exact = ubuntu["version"]
    gpudirect = _gpudirect(c, stack, hw, flavour=flavour, kernel=kernel, versions=versions)
    installed = hw.installed_driver
    if not installed:
        action = "install"
    elif exact:
        action = "keep" if installed == exact else ("upgrade" if vtuple(exact) > vtuple(installed) else "downgrade")
    else:
        ib = vtuple(installed)[0]
        action = "keep" if ib == int(branch) else ("upgrade" if int(branch) > ib else "downgrade")
    c.reasons["kernel_module"] = flavour_reason
    resolved = {
        "gpu_present": hw.present,
        "driver": {
            "branch": branch,
            "version": exact,
            "minimum_version": exact or minimum,
            "installed_version": installed,
            "action": action,
            "native_cuda": native,
            "package_scheme": "branch-suffixed" if compat.suffixed_scheme(branch) else "unsuffixed",
            "apt_pin": (exact + "-*") if exact else branch + ".*",
            "dnf_module_stream": compat.dnf_module_stream(branch, flavour),
            "lifecycle": info,
            "source": source,
            # How the kernel modules arrive: dkms (built on the node) or precompiled (Canonical's).
            "modules": ubuntu["modules"] if ubuntu else "dkms",
            "kernel": kernel,
        },
        "kernel_module": flavour,
        "kernel_module_reason": flavour_reason,
        # The declared Fabric Manager version, else the exact driver version; None means the
        # version of the driver the packages install (the role reads it after the install).
        "fabricmanager": {
            "required": fm,
            "version": stack.get("nvidia_driver_fabricmanager_version") or exact,
            "nvswitch_count": hw.nvswitch_count,
        },
        "nvlsm": {"required": nvlsm},
        "cuda": {"versions": versions, "default": default, "forward_compat": forward},
        "cudnn": cudnn,
        "nccl": nccl,
        "dcgm": dcgm,
        "gpudirect": gpudirect,
        "ofed": {"flavour": stack.get("ofed_flavour") or "none"},
        "repository": {
            "family": family,
            "distribution": repo,
            "arch": compat.REPO_ARCH.get(stack.get("cpu_architecture") or "x86_64", "x86_64"),
        },
        "packages": _packages(
            family,
            branch,
            exact=exact,
            flavour=flavour,
            fm=fm,
            nvlsm=nvlsm,
            versions=versions,
            forward=forward,
            cudnn=cudnn,
            nccl=nccl,
            dcgm=dcgm,
        ),
    }
    if ubuntu:
        resolved["packages"]["driver_pinning"] = []
        resolved["packages"]["driver"] = ubuntu["packages"]
        resolved["packages"]["driver_compute_only"] = ubuntu["packages"]
        resolved["packages"]["fabricmanager"] = ubuntu["fabricmanager"]
    resolved["decisions"] = decisions(resolved, stack, hw, c.reasons)
    return c.problems, resolved


def decisions(resolved, stack, hw, reasons):
    """``[{"decision", "value", "reason"}]``: each choice the resolver made for this node, and why.

    Preflight prints them as one table per host; the reason names the fact or the variable it
    came from, so that "why is Fabric Manager on this node?" is answered in the run's output.
    """
    rows = []

    def add(decision, value, reason):
        rows.append({"decision": decision, "value": str(value), "reason": reason})

    driver = resolved["driver"]
    if not resolved["gpu_present"]:
        add(
            "NVIDIA stack",
            "none",
            "no NVIDIA GPU on PCI (lspci): the driver, CUDA and DCGM roles leave this host alone",
        )
    else:
        add(
            "driver",
            driver["version"] or f"branch {driver['branch']}, its newest release",
            "declared nvidia_driver_version"
            if stack.get("nvidia_driver_version")
            else (
                "the node's package index (Canonical's archive or its mirror): {}".format(
                    "the release the kernel's precompiled modules were built for"
                    if driver["modules"] == "precompiled"
                    else "its newest release"
                )
                if driver["source"] == "ubuntu"
                else "declared nvidia_driver_branch"
            ),
        )
        if driver["source"] == "ubuntu":
            add("driver source", "Canonical's -server packages", "declared nvidia_driver_source: ubuntu")
        add("kernel modules", resolved["kernel_module"], reasons.get("kernel_module") or "declared")
        add(
            "module build",
            "{} for kernel {}".format(driver["modules"], driver["kernel"] or "unknown"),
            reasons.get("modules") or "NVIDIA's packages build the modules with DKMS on the node",
        )
        fm = resolved["fabricmanager"]
        if fm["required"]:
            add(
                "Fabric Manager",
                "yes, " + (fm["version"] or "the driver's installed version"),
                "{} NVSwitch(es) on PCI: NVSwitch systems need Fabric Manager at the driver's exact version".format(
                    fm["nvswitch_count"]
                ),
            )
        else:
            add("Fabric Manager", "no", "no NVSwitch on PCI")
        if resolved["nvlsm"]["required"]:
            add("nvlsm", "yes", "NVLink5 GPUs behind NVSwitches: the NVLink subnet manager runs on the node")
        cuda = resolved["cuda"]
        if cuda["versions"]:
            add(
                "CUDA toolkits",
                "{} (default {})".format(", ".join(cuda["versions"]), cuda["default"]),
                "declared cuda_versions; default {}".format(
                    "declared cuda_default_version" if stack.get("cuda_default_version") else "the newest of them"
                ),
            )
            add(
                "CUDA forward compatibility",
                ", ".join(cuda["forward_compat"]) or "none",
                "toolkits newer than the driver's CUDA {}".format(driver["native_cuda"])
                if cuda["forward_compat"]
                else "the driver runs every declared toolkit natively (CUDA {})".format(driver["native_cuda"]),
            )
        if resolved["cudnn"]:
            add(
                "cuDNN",
                resolved["cudnn"]["version"],
                "for CUDA {}, the major of the default toolkit {}".format(
                    resolved["cudnn"]["cuda_major"], cuda["default"]
                ),
            )
        if resolved["nccl"]:
            add(
                "NCCL",
                "{}+cuda{}".format(resolved["nccl"]["version"], resolved["nccl"]["cuda_build"]),
                "declared nccl_version, {}".format(
                    "its build pinned there"
                    if resolved["nccl"]["pinned_build"]
                    else "the build for the default toolkit"
                ),
            )
        if resolved["dcgm"]:
            dcgm = resolved["dcgm"]
            add(
                "DCGM",
                "{}{}".format(
                    dcgm.get("version") or dcgm["major"], f", -cuda{dcgm['cuda_major']}" if dcgm["cuda_major"] else ""
                ),
                reasons.get("dcgm") or "declared dcgm_major",
            )
    add("GPUDirect RDMA", resolved["gpudirect"], reasons.get("gpudirect") or "declared ofed_gpudirect")
    repo = resolved["repository"]
    add(
        "NVIDIA repository folder",
        "{}/{}".format(repo["distribution"], repo["arch"]),
        "{} {} on {}".format(
            stack.get("distribution"), stack.get("distribution_major_version"), stack.get("cpu_architecture")
        ),
    )
    return rows


def format_decisions(rows, header):
    """The decisions as a plain-text table: decision, value, reason."""
    if not rows:
        return header
    width = [max(len(r[key]) for r in rows) for key in ("decision", "value")]
    lines = [header]
    for r in rows:
        lines.append("  {:<{}}  {:<{}}  {}".format(r["decision"], width[0], r["value"], width[1], r["reason"]))
    return "\n".join(lines)
