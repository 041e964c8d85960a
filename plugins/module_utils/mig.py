# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG layouts: each GPU model's profiles and placements, and whether a layout fits a GPU.

A layout is ``{profile: count}``, the ``mig-devices`` of an nvidia-mig-parted config. It fits when
every profile exists on the GPU, no profile is asked for more often than the GPU offers it, the
compute slices add up to at most the GPU's, and every instance gets a placement (a start slice
from the profile's placements) without overlapping another. That is how the driver places GPU
instances: ``nvidia-smi mig -lgipp`` lists the placements, and the captures of it on an H100
(tests/unit/fixtures/mig) are the ones below.

The tables: NVIDIA's MIG User Guide, "Supported GPUs" and "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/), with the PCI device ids of
nvidia-mig-parted v0.15.0 ``deployments/systemd/config-default.yaml``; collected in
shared/facts/k8s_mig_validation.md section 2.5. Where a node can answer, its own ``mig -lgip``
and ``-lgipp`` (``from_smi``) are used instead of the table.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.compat import driver_meets, vtuple

# "[<c>c.]<g>g.<mem>gb[+me|+gfx|-me|+me.all]" (mig-parted's profile grammar).
PROFILE = re.compile(r"(?:(\d)c\.)?(\d)g\.(\d{1,4})gb(\+me\.all|\+me|\+gfx|-me)?")

# Placements by shape: (start slices, slices taken). Seven-compute GPUs have eight memory slices
# (H100 80GB, nvidia-smi mig -lgipp: 1g.10gb {0..6}:1, 1g.20gb {0,2,4,6}:2, 2g.20gb {0,2,4}:2,
# 3g.40gb {0,4}:4, 4g.40gb {0}:4, 7g.80gb {0}:8); four-compute GPUs four (A30, RTX PRO 6000).
SHAPES_7 = {
    "1g": ((0, 1, 2, 3, 4, 5, 6), 1),
    "1g-double": ((0, 2, 4, 6), 2),
    "2g": ((0, 2, 4), 2),
    "3g": ((0, 4), 4),
    "4g": ((0,), 4),
    "7g": ((0,), 8),
}
SHAPES_4 = {"1g": ((0, 1, 2, 3), 1), "2g": ((0, 2), 2), "4g": ((0,), 4)}


def _seven(small, double, half, full, *, media=True, double_media=False):
    """The profiles of a seven-compute GPU from its memory sizes (GB): 1g, 1g with twice the
    memory, 2g, 3g and 4g with half, 7g with all of it; 1g+me (and the larger 1g+me) where the
    GPU has them."""
    profiles = {
        f"1g.{small}gb": "1g",
        f"1g.{double}gb": "1g-double",
        f"2g.{double}gb": "2g",
        f"3g.{half}gb": "3g",
        f"4g.{half}gb": "4g",
        f"7g.{full}gb": "7g",
    }
    if media:
        profiles[f"1g.{small}gb+me"] = "1g"
    if double_media:
        profiles[f"1g.{double}gb+me"] = "1g-double"
    return profiles


# model -> (PCI device ids, compute slices, {profile: shape}). +me variants: one per GPU.
MODELS = {
    "A30-24GB": (
        ("0x20B7",),
        4,
        {"1g.6gb": "1g", "1g.6gb+me": "1g", "2g.12gb": "2g", "2g.12gb+me": "2g", "4g.24gb": "4g"},
    ),
    "A100-40GB": (("0x20B0", "0x20B1", "0x20F1", "0x20F6"), 7, _seven(5, 10, 20, 40)),
    "A100-80GB / H100-80GB": (
        ("0x2330", "0x2331", "0x2322", "0x20B2", "0x20B5", "0x20F3", "0x20F5", "0x2324"),
        7,
        _seven(10, 20, 40, 80),
    ),
    # mig-parted ships 1g.12gb+me and 1g.24gb+me layouts for "H100 NVL, H800 NVL, GH200".
    "H100 NVL": (("0x2321", "0x233A"), 7, _seven(12, 24, 47, 94, double_media=True)),
    "H100-96GB / GH200 96GB / H20": (
        ("0x2342", "0x233D", "0x20B6", "0x2329"),
        7,
        _seven(12, 24, 48, 96, double_media=True),
    ),
    "H200 141GB / H200 NVL": (("0x2335", "0x233B"), 7, _seven(18, 35, 71, 141)),
    "GH200 144GB HBM3e": (("0x2348",), 7, _seven(18, 36, 72, 144, media=False)),
    "B200": (("0x2901",), 7, _seven(23, 45, 90, 180)),
    "GB200": (("0x2941",), 7, _seven(23, 47, 93, 186)),
    "B300": (("0x3182",), 7, _seven(34, 67, 135, 269)),
    "GB300": (("0x31C2",), 7, _seven(35, 70, 139, 278)),
    # Graphics (+gfx), no media engines (-me) and all of them (+me.all) are variants of each size.
    "RTX PRO 6000 Blackwell": (
        ("0x2BB5",),
        4,
        {
            f"{size}{variant}": size.split(".", maxsplit=1)[0]
            for size in ("1g.24gb", "2g.48gb", "4g.96gb")
            for variant in ("", "+gfx", "-me", "+me.all")
            if not (size == "4g.96gb" and variant in ("-me", "+me.all"))
        },
    ),
}


# The first driver with MIG on each GPU: MIG User Guide r620, "Deployment Considerations"
# (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/620/deployment-considerations.html), by the
# PCI device ids of MODELS. GPUs of a chip the guide does not name (H800, GH200, the 0x20B6 and
# 0x233D variants) take the row of the chip's first MIG GPU: no driver before it had MIG on that chip.
# The guide's "GB300 (DGX Station)" row (R595, 595.58.03) is not applied to 0x31C2: no source here ties
# that id to the DGX Station rather than to the GB300 of NVL72 racks, so it takes B300's (the same chip),
# and a driver between the two is let through rather than refused on a guess.
FIRST_DRIVERS = (
    ("A100", ("0x20B0", "0x20B1", "0x20B2", "0x20B5", "0x20B6", "0x20F1", "0x20F3", "0x20F5", "0x20F6"), "450.80.02"),
    ("A30", ("0x20B7",), "460.73.01"),
    ("H100", ("0x2321", "0x2322", "0x2324", "0x2330", "0x2331", "0x233A", "0x233D", "0x2342", "0x2348"), "525.85.12"),
    ("H20", ("0x2329",), "535.161.07"),
    ("H200", ("0x2335", "0x233B"), "550.90.07"),
    ("B200 and GB200", ("0x2901", "0x2941"), "570.133.20"),
    ("RTX PRO 6000 Blackwell", ("0x2BB5",), "575.51.03"),
    ("B300 and GB300", ("0x3182", "0x31C2"), "580.82.07"),
)
# Profiles that came after their GPU's first MIG driver (the guide's "Supported MIG Profiles", A30
# notes: 1g.6gb+me from R470, 2g.12gb+me from R525).
PROFILE_DRIVERS = {("0x20B7", "1g.6gb+me"): "470", ("0x20B7", "2g.12gb+me"): "525"}
# Drivers that have MIG off on a GPU it otherwise supports (GPU Operator, platform-support.rst:
# "MIG is unsupported on driver 575.57.08" for the RTX PRO 6000 Blackwell).
BROKEN_DRIVERS = {"0x2BB5": ("575.57.08",)}


def driver_problems(device_id, profiles, driver, variable="nvidia_driver_version"):
    """Why ``driver`` (the exact version, or the branch where no exact one is declared) cannot run
    ``profiles`` on the GPU with this PCI device id: MIG before its first driver, a profile before
    its own, or a driver with MIG off on that GPU. Empty when it can, or when nothing is known."""
    wanted = _device_id(device_id)
    if not driver or not vtuple(driver) or wanted is None:
        return []
    out = []
    for gpu, ids, first in FIRST_DRIVERS:
        if wanted in ids and not driver_meets(driver, first):
            out.append(
                f"{variable} is {driver}; MIG on {gpu} needs driver {first} or newer "
                f"(MIG User Guide, Deployment Considerations)"
            )
    for name in sorted(profiles):
        first = PROFILE_DRIVERS.get((wanted, name))
        if first and not driver_meets(driver, first):
            out.append(f"{variable} is {driver}; profile {name} needs driver R{first} or newer")
    if str(driver) in BROKEN_DRIVERS.get(wanted, ()):
        out.append(f"{variable} is {driver}, which has MIG off on this GPU (GPU Operator platform support)")
    return out


class GpuProfiles:
    """One GPU's MIG profiles: ``{name: (starts, size, most)}`` and its compute slices."""

    def __init__(self, model, compute, profiles):
        self.model = model
        self.compute = compute
        self.profiles = profiles

    def compute_of(self, name):
        return int(PROFILE.fullmatch(name).group(2))


def _device_id(value):
    """'0x2330', '0x233010DE', '2330' or 9008 -> '0x2330'; None when it is no PCI device id."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"0x{value & 0xFFFF:04X}"
    text = str(value or "").strip().upper().removeprefix("0X")
    if len(text) == 8 and text.endswith("10DE"):
        text = text[:4]
    return f"0x{text}" if re.fullmatch(r"[0-9A-F]{4}", text) else None


def for_device(device_id):
    """The table's profiles of the GPU with this PCI device id, or None when it has no MIG."""
    wanted = _device_id(device_id)
    for model, (ids, compute, profiles) in MODELS.items():
        if wanted in ids:
            shapes = SHAPES_4 if compute == 4 else SHAPES_7
            table = {}
            for name, shape in profiles.items():
                starts, size = shapes[shape]
                table[name] = (starts, size, 1 if "+me" in name else len(starts))
            return GpuProfiles(model, compute, table)
    return None


def from_smi(model, profiles, placements):
    """A GPU's own profiles from ``parse_mig_profiles`` and ``parse_mig_placements`` of one GPU."""
    by_id = {p["profile_id"]: p for p in placements}
    table = {}
    compute = 0
    for row in profiles:
        place = by_id.get(row["id"])
        if place is None or not PROFILE.fullmatch(row["name"]):
            continue
        table[row["name"]] = (tuple(place["starts"]), place["size"], row["total"])
        compute = max(compute, int(PROFILE.fullmatch(row["name"]).group(2)))
    return GpuProfiles(model, compute, table)


def place(gpu, layout):
    """A placement ``[(profile, start, size), ...]`` for every instance of ``layout``, or None."""
    instances = sorted(
        (name for name, count in layout.items() for _instance in range(count)),
        key=lambda name: (-gpu.profiles[name][1], len(gpu.profiles[name][0]), name),
    )
    taken = []

    def free(start, size):
        return all(start + size <= s or s + z <= start for _n, s, z in taken)

    def search(index):
        if index == len(instances):
            return True
        name = instances[index]
        starts, size, _most = gpu.profiles[name]
        for start in starts:
            if free(start, size):
                taken.append((name, start, size))
                if search(index + 1):
                    return True
                taken.pop()
        return False

    return list(taken) if search(0) else None


def problems(gpu, layout):
    """Why ``layout`` does not fit ``gpu``: a list of sentences, empty when it fits."""
    out = []
    if not isinstance(layout, dict) or not layout:
        return ["the layout must name at least one profile with its count, such as {'1g.10gb': 7}"]
    for name, count in layout.items():
        if not PROFILE.fullmatch(str(name)):
            out.append(f"{name!r} is not a MIG profile name (<g>g.<memory>gb, such as 1g.10gb)")
        elif name not in gpu.profiles:
            out.append(f"{gpu.model} has no profile {name}")
        elif not isinstance(count, int) or isinstance(count, bool) or count < 1:
            out.append(f"{name}: the count must be a whole number from 1 (got {count!r})")
        elif count > gpu.profiles[name][2]:
            out.append(f"{gpu.model} holds at most {gpu.profiles[name][2]} x {name} (asked for {count})")
    if out:
        return out
    media = sum(count for name, count in layout.items() if "+me" in name)
    if media > 1:
        out.append(f"{gpu.model} has one set of media engines: at most one +me instance (asked for {media})")
    compute = sum(gpu.compute_of(name) * count for name, count in layout.items())
    if compute > gpu.compute:
        out.append(f"the layout takes {compute} compute slices; {gpu.model} has {gpu.compute}")
    if not out and place(gpu, layout) is None:
        out.append(f"the instances do not fit side by side in {gpu.model}'s memory slices")
    return out


def nearest(gpu, layout, most=3):
    """Valid layouts close to ``layout``: the layout less one instance, where that fits; each asked
    profile cut to what fits, or, for a profile the GPU lacks, the same compute size with this
    GPU's memory; then the largest single profile that fits as often as asked."""
    candidates = []
    known = isinstance(layout, dict) and all(
        name in gpu.profiles and isinstance(count, int) and not isinstance(count, bool) and count > 0
        for name, count in layout.items()
    )
    if known and sum(layout.values()) > 1:
        for name in sorted(layout, key=lambda n: (gpu.compute_of(n), n)):
            less = {n: c - (n == name) for n, c in layout.items() if c - (n == name) > 0}
            if not problems(gpu, less):
                candidates.append(less)
    for name, asked in layout.items():
        match = PROFILE.fullmatch(str(name))
        count = asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else 1
        same_g = [p for p in gpu.profiles if match and "+" not in p and gpu.compute_of(p) == int(match.group(2))]
        for option in ([name] if name in gpu.profiles else []) + sorted(same_g):
            for n in range(min(count, gpu.profiles[option][2]), 0, -1):
                if not problems(gpu, {option: n}):
                    candidates.append({option: n})
                    break
        total = sum(c for c in layout.values() if isinstance(c, int) and not isinstance(c, bool) and c > 0)
        fitting = [p for p in gpu.profiles if "+" not in p and not problems(gpu, {p: total})]
        if fitting:
            largest = max(fitting, key=lambda p: (gpu.compute_of(p), _memory(p)))
            candidates.append({largest: total})
    out = []
    for candidate in candidates:
        if candidate not in out and candidate != layout:
            out.append(candidate)
    return out[:most]


def _memory(name):
    return int(PROFILE.fullmatch(name).group(3))


def describe(layout):
    """{'1g.10gb': 7} -> '1g.10gb x 7'."""
    return " + ".join(f"{name} x {count}" for name, count in layout.items())


def refusal(gpu, layout, variable):
    """One message for an impossible layout: the variable, the GPU, why, what fits, what is near."""
    found = problems(gpu, layout)
    if not found:
        return None
    offered = ", ".join(f"{name} (up to {most})" for name, (_s, _z, most) in gpu.profiles.items())
    near = nearest(gpu, layout)
    shown = describe(layout) if isinstance(layout, dict) and layout else repr(layout)
    why = "; ".join(found)
    text = (
        f"{variable}: {shown} does not fit a {gpu.model}: {why}."
        f" It offers {offered}, at most {gpu.compute} compute slices in all."
    )
    if near:
        text += " Nearest layouts that fit: " + "; ".join(describe(n) for n in near) + "."
    return text


# /proc/driver/nvidia-caps/mig-minors: "config 1", "monitor 2", then for each GPU minor, its 15
# possible GPU instances, each followed by its 8 possible compute instances: gpu0/gi0/access 3,
# gpu0/gi0/ci0/access 4, ..., gpu3/gi3/ci3/access 439, ..., gpu31/gi14/ci7/access 4322 (MIG User
# Guide, "Device Nodes and Capabilities"; the minors of a real A100 in tests/unit/fixtures/mig).
CAPS_FIRST = 3
CAPS_GPU_INSTANCES = 15
CAPS_COMPUTE_INSTANCES = 8


def caps_minor(gpu_minor, gpu_instance, compute_instance=None):
    """The minor of ``/dev/nvidia-caps/nvidia-cap<N>`` that grants access to a GPU instance, or to
    one of its compute instances; ``gpu_minor`` is the GPU's device minor (``/dev/nvidia<minor>``)."""
    per_gi = 1 + CAPS_COMPUTE_INSTANCES
    if not 0 <= gpu_instance < CAPS_GPU_INSTANCES:
        raise ValueError(f"GPU instance id {gpu_instance} is outside 0..{CAPS_GPU_INSTANCES - 1}")
    base = CAPS_FIRST + gpu_minor * CAPS_GPU_INSTANCES * per_gi + gpu_instance * per_gi
    if compute_instance is None:
        return base
    if not 0 <= compute_instance < CAPS_COMPUTE_INSTANCES:
        raise ValueError(f"compute instance id {compute_instance} is outside 0..{CAPS_COMPUTE_INSTANCES - 1}")
    return base + 1 + compute_instance


# --- A node's layout (the mig role's mig_layout) against its GPUs ------------------------------
LAYOUT_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?")
LAYOUT_KEYS = {"name", "gpus"}
ENTRY_KEYS = {"devices", "profiles"}


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _entry_devices(entry, count):
    """The GPU indices an entry names: 'all', or a list of indices."""
    devices = entry.get("devices", "all")
    if devices == "all":
        return list(range(count))
    return list(devices)


def layout_shape_problems(layout, variable="mig_layout"):
    """What is wrong with the layout's shape, before any GPU is looked at."""
    if not isinstance(layout, dict):
        return [f"{variable} must be a dict with name and gpus (got {type(layout).__name__})"]
    out = []
    unknown = sorted(set(layout) - LAYOUT_KEYS, key=repr)
    if unknown:
        out.append(f"{variable} has unknown keys {', '.join(map(str, unknown))}: it takes name and gpus")
    name = layout.get("name")
    if not isinstance(name, str) or not LAYOUT_NAME.fullmatch(name):
        out.append(
            f"{variable}.name must be lowercase letters, digits, '.' and '-', 1 to 63 long (a Kubernetes label "
            f"value and a mig-parted config name), such as h100-inference; got {name!r}"
        )
    gpus = layout.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        out.append(f"{variable}.gpus must list at least one entry, such as {{devices: all, profiles: {{1g.10gb: 7}}}}")
        return out
    for number, entry in enumerate(gpus):
        where = f"{variable}.gpus[{number}]"
        if not isinstance(entry, dict):
            out.append(f"{where} must be a dict with devices and profiles")
            continue
        unknown = sorted(set(entry) - ENTRY_KEYS, key=repr)
        if unknown:
            out.append(f"{where} has unknown keys {', '.join(map(str, unknown))}: it takes devices and profiles")
        devices = entry.get("devices", "all")
        if devices != "all" and not (
            isinstance(devices, list) and devices and all(_is_count(d) and d >= 0 for d in devices)
        ):
            out.append(f"{where}.devices must be 'all' or a list of GPU indices such as [0, 1]; got {devices!r}")
        profiles = entry.get("profiles", {})
        if profiles is None:
            profiles = {}
        if not isinstance(profiles, dict):
            out.append(
                f"{where}.profiles must map profile names to counts, such as {{1g.10gb: 7}}; empty turns MIG off"
            )
    return out


def layout_problems(layout, nvidia_gpu, variable="mig_layout", driver=None, driver_variable="nvidia_driver_version"):
    """Every reason the layout cannot be applied to this node's GPUs (``nvidia_gpu`` facts): its
    shape, GPU indices the node lacks, a GPU named twice, a GPU without MIG, each GPU's profiles
    against the GPU's own table (the nearest layouts that fit are offered), and, with ``driver``
    (the version the run installs, or its branch), MIG and the profiles on that driver."""
    out = layout_shape_problems(layout, variable)
    if out:
        return out
    gpus = (nvidia_gpu or {}).get("gpus") or []
    count = len(gpus)
    seen = {}
    for number, entry in enumerate(layout["gpus"]):
        where = f"{variable}.gpus[{number}]"
        devices = _entry_devices(entry, count)
        missing = [d for d in devices if d >= count]
        if missing:
            out.append(
                f"{where}.devices names GPU {', '.join(map(str, missing))}; this node has {count} (0 to {count - 1})"
            )
        for index in devices:
            if index in seen and index < count:
                out.append(f"{where}.devices names GPU {index} again (already in {variable}.gpus[{seen[index]}])")
            seen.setdefault(index, number)
        profiles = entry.get("profiles") or {}
        if not profiles:
            continue
        for index in sorted({d for d in devices if d < count}):
            gpu = gpus[index]
            product = gpu.get("name") or "an unnamed GPU"
            table = for_device(gpu.get("pci_device_id"))
            if table is None:
                out.append(
                    f"{where}: GPU {index} ({product}, PCI id {gpu.get('pci_device_id')}) cannot do MIG; give it "
                    f"profiles: {{}} or leave it out of {where}.devices"
                )
                continue
            message = refusal(table, profiles, f"{where}.profiles on GPU {index} ({product})")
            if message:
                out.append(message)
            found = driver_problems(gpu.get("pci_device_id"), profiles, driver, driver_variable)
            if found:
                why = "; ".join(found)
                out.append(
                    f"{where} puts GPU {index} ({product}) in MIG mode, but {why}. Set {driver_variable} to a"
                    " driver that has it, or leave MIG off on this GPU (profiles: {})."
                )
    return out


def desired(layout, count):
    """``{index: {"mig": "enabled"|"disabled", "instances": {profile: count}}}`` of the GPUs the
    layout names; the others are left as they are."""
    out = {}
    for entry in layout["gpus"]:
        profiles = {name: n for name, n in (entry.get("profiles") or {}).items() if n}
        for index in _entry_devices(entry, count):
            out[index] = {"mig": "enabled" if profiles else "disabled", "instances": dict(sorted(profiles.items()))}
    return out


def current(nvidia_gpu):
    """The same shape from the facts: each GPU's MIG mode and the profiles of its GPU instances.

    A GPU instance counts as its profile only with exactly one compute instance of its full size
    (the compute instance's name is the GPU instance's profile). One split into smaller compute
    instances is several MIG devices (gres.conf lists each), so it counts under its own name,
    ``3g.40gb as 1c.3g.40gb+2c.3g.40gb``, which no layout asks for; one without a compute
    instance is no MIG device at all (nothing can run on it) and does not count.
    """
    out = {}
    for gpu in (nvidia_gpu or {}).get("gpus") or []:
        counts = {}
        for instance in gpu.get("mig_instances") or []:
            computes = [ci.get("profile") for ci in instance.get("compute_instances") or []]
            if not computes:
                continue
            name = instance["profile"]
            if computes != [name]:
                name = "{} as {}".format(name, "+".join(sorted(str(ci) for ci in computes)))
            counts[name] = counts.get(name, 0) + 1
        out[gpu["index"]] = {"mig": gpu.get("mig_mode") or "disabled", "instances": dict(sorted(counts.items()))}
    return out


def _side(state):
    mode = "MIG " + state["mig"]
    return mode + (" " + describe(state["instances"]) if state["instances"] else "")


def summary(change):
    """'GPU 0 (NVIDIA H100 80GB HBM3): MIG disabled -> MIG enabled 1g.10gb x 7'."""
    return "GPU {} ({}): {} -> {}".format(
        change["gpu"], change["name"], _side(change["before"]), _side(change["after"])
    )


def changes(layout, nvidia_gpu):
    """Per GPU that is not in its layout: ``{"gpu", "name", "before", "after"}``, in index order."""
    now = current(nvidia_gpu)
    names = {gpu["index"]: gpu.get("name") for gpu in (nvidia_gpu or {}).get("gpus") or []}
    out = []
    for index, want in sorted(desired(layout, len(now)).items()):
        have = now.get(index)
        if have is None:
            continue
        if have != want:
            out.append({"gpu": index, "name": names.get(index), "before": have, "after": want})
    return out


# The layout every mig-parted config carries: the MIG manager's default, and where a node goes
# back to when its layout is taken away.
ALL_DISABLED = "all-disabled"


def parted_entries(layout):
    """The layout's ``mig-configs`` entries in nvidia-mig-parted's v1 schema."""
    out = []
    for entry in layout["gpus"]:
        profiles = {name: n for name, n in (entry.get("profiles") or {}).items() if n}
        item = {"devices": entry.get("devices", "all"), "mig-enabled": bool(profiles)}
        if profiles:
            item["mig-devices"] = dict(sorted(profiles.items()))
        out.append(item)
    return out


def parted_config(layouts):
    """One nvidia-mig-parted v1 config holding ``all-disabled`` and each layout (a list, or one
    layout): the host's MIG manager file, and the GPU Operator's custom MIG ConfigMap of every
    node it owns. Two different layouts under one name are refused (ValueError naming both)."""
    if isinstance(layouts, dict):
        layouts = [layouts]
    configs = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for layout in layouts:
        entries = parted_entries(layout)
        if layout["name"] == ALL_DISABLED and entries != configs[ALL_DISABLED]:
            raise ValueError(f"mig_layout.name {ALL_DISABLED} is the MIG manager's own; name the layout otherwise")
        if configs.get(layout["name"], entries) != entries:
            raise ValueError(
                f"two different MIG layouts are both named {layout['name']} ({configs[layout['name']]} and "
                f"{entries}); one name, one layout: rename one of them in mig_layout"
            )
        configs[layout["name"]] = entries
    return {"version": "v1", "mig-configs": configs}


def k8s_resource(profile):
    """The extended resource of a MIG profile under the mixed strategy: the device plugin turns '+'
    into '.', so 1g.10gb+me is nvidia.com/mig-1g.10gb.me (NVIDIA/k8s-device-plugin)."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


def node_devices(layout, nvidia_gpu):
    """What the node holds once the layout is applied: ``{"whole": GPUs without MIG, "mig":
    {profile: count}}``; GPUs the layout leaves alone count as they are now."""
    state = current(nvidia_gpu)
    if layout:
        state.update(desired(layout, len(state)))
    mig = {}
    whole = 0
    for gpu in state.values():
        if gpu["mig"] != "enabled":
            whole += 1
            continue
        for profile, count in gpu["instances"].items():
            mig[profile] = mig.get(profile, 0) + count
    return {"whole": whole, "mig": dict(sorted(mig.items()))}


def node_strategy(devices):
    """(strategy, reason) the node needs in the device plugin: none without MIG devices; single
    when every GPU is in MIG mode with one and the same profile (each slice is an nvidia.com/gpu);
    mixed otherwise (gpu-operator-mig.rst, "single" and "mixed" strategies)."""
    if not devices["mig"]:
        return "none", "no GPU in MIG mode"
    if devices["whole"] == 0 and len(devices["mig"]) == 1:
        (profile,) = devices["mig"]
        return "single", f"every GPU in MIG mode with {profile} only"
    kinds = ", ".join(devices["mig"])
    whole = f" and {devices['whole']} GPU(s) without MIG" if devices["whole"] else ""
    return "mixed", f"MIG profiles {kinds}{whole} on one node"


def cluster_strategy(strategies):
    """The GPU Operator's one ``mig.strategy`` for nodes needing ``strategies``: mixed if any node
    needs it, else single if any node has MIG, else none."""
    for strategy in ("mixed", "single"):
        if strategy in strategies:
            return strategy
    return "none"


def k8s_allocatable(devices, strategy):
    """The extended resources the node should show under the cluster's strategy."""
    if strategy == "mixed":
        out = {k8s_resource(p): n for p, n in devices["mig"].items()}
        if devices["whole"]:
            out["nvidia.com/gpu"] = devices["whole"]
        return out
    if strategy == "single" and devices["mig"]:
        return {"nvidia.com/gpu": sum(devices["mig"].values())}
    return {"nvidia.com/gpu": devices["whole"]} if devices["whole"] else {}


def k8s_labels(layout, owner):
    """The node labels of the MIG owner: with the operator owning MIG, nvidia.com/mig.config names
    the layout its MIG manager applies; with the host owning it, the operator's MIG manager is
    kept off the node (nvidia.com/gpu.deploy.mig-manager=false): one owner, never both."""
    if owner == "operator":
        return {"nvidia.com/mig.config": layout["name"] if layout else ALL_DISABLED}
    return {"nvidia.com/gpu.deploy.mig-manager": "false"}


def kubernetes_node(layout, nvidia_gpu, owner="host"):
    """The MIG side of one Kubernetes node: its devices, the strategy it needs and why, and its
    labels."""
    devices = node_devices(layout, nvidia_gpu)
    strategy, reason = node_strategy(devices)
    return {
        "devices": devices,
        "strategy": strategy,
        "reason": reason,
        "labels": k8s_labels(layout, owner),
        "owner": owner,
    }


def kubernetes_cluster(nodes):
    """The MIG side of a Kubernetes cluster: each node's (``nodes``: [{name, mig_layout, mig_owner,
    nvidia_gpu}]), the strategy the cluster needs and which node decides it, whether the GPU
    Operator's MIG manager is needed, the mig-parted config of the layouts it owns, and each node's
    expected allocatable resources under that strategy. Raises ValueError for an unknown owner or
    layouts that cannot share one config."""
    per_node = {}
    owned = []
    for node in nodes:
        layout = node.get("mig_layout") or {}
        owner = node.get("mig_owner") or "host"
        if owner not in ("host", "operator"):
            raise ValueError(f"mig_owner of {node.get('name')} is {owner!r}; it takes host or operator")
        # The checks preflight makes, before any layout is read here (a layout preflight would
        # refuse used to end in a TypeError): the shape, then the GPUs of the node's facts.
        found = layout_problems(layout, node.get("nvidia_gpu")) if layout else []
        if found:
            raise ValueError(f"mig_layout of {node.get('name')}: " + "; ".join(found))
        per_node[node["name"]] = kubernetes_node(layout, node.get("nvidia_gpu"), owner)
        if owner == "operator" and layout:
            owned.append(layout)
    strategy = cluster_strategy([n["strategy"] for n in per_node.values()])
    deciding = [name for name, n in sorted(per_node.items()) if n["strategy"] == strategy]
    reason = (
        f"{deciding[0]}: {per_node[deciding[0]]['reason']}"
        if deciding and strategy != "none"
        else "no node in MIG mode"
    )
    config = parted_config(owned)
    for node in per_node.values():
        node["allocatable"] = k8s_allocatable(node.pop("devices"), strategy)
    return {
        "strategy": strategy,
        "reason": reason,
        "mig_manager": any(n["owner"] == "operator" for n in per_node.values()),
        "parted_config": config,
        "nodes": per_node,
    }
