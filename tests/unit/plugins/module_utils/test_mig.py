# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG layouts against each GPU's profiles: NVIDIA's shipped layouts all fit, impossible ones are
refused with the reason, what the GPU offers and the nearest layouts that fit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.mig_kubernetes import mig_kubernetes
from ansible_collections.gpuops.cluster.plugins.module_utils import gpu_inventory, mig, nvidia_smi
from conftest import fixture

UPSTREAM = Path(__file__).resolve().parents[2] / "fixtures" / "upstream" / "mig-parted-v0.15.0-config-default.yaml"
H100 = "0x2330"
# Layouts NVIDIA ships for a GPU the profile table (shared/facts section 2.5) does not name: a
# Blackwell part with 189 GB, whose PCI id no source here gives. Refused until one does.
UNKNOWN_GPU = {
    "all-3g.95gb": "3g.95gb: a 189 GB GPU that the sources here do not identify",
    "all-4g.95gb": "4g.95gb: a 189 GB GPU that the sources here do not identify",
    "all-7g.189gb": "7g.189gb: a 189 GB GPU that the sources here do not identify",
}


def shipped_layouts():
    """(config name, device ids or None, mig-devices) of every MIG-enabled entry NVIDIA ships."""
    configs = yaml.safe_load(UPSTREAM.read_text())["mig-configs"]
    out = []
    for name, entries in configs.items():
        for entry in entries:
            if entry.get("mig-enabled") and entry.get("mig-devices"):
                ids = entry.get("device-filter")
                ids = [ids] if isinstance(ids, str) else ids
                out.append((name, ids, entry["mig-devices"]))
    return out


@pytest.mark.parametrize(("name", "ids", "layout"), shipped_layouts(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_layout_nvidia_ships_fits_the_gpus_it_is_for(name, ids, layout):
    if ids:
        gpus = [mig.for_device(i) for i in ids]
        assert all(gpus), f"{name}: a device id the table does not know: {ids}"
    else:
        # No filter: for every GPU that has all of its profiles.
        gpus = [
            g for g in (mig.for_device(ids[0]) for ids, _c, _p in mig.MODELS.values()) if set(layout) <= set(g.profiles)
        ]
        if name in UNKNOWN_GPU:
            assert not gpus, f"{name} fits a GPU of the table now: take it off UNKNOWN_GPU"
            pytest.skip(f"{name}: {UNKNOWN_GPU[name]}")
        assert gpus, f"{name}: no GPU in the table has {sorted(layout)}"
    for gpu in gpus:
        assert mig.problems(gpu, layout) == [], (name, gpu.model)
        assert len(mig.place(gpu, layout)) == sum(layout.values())


def test_the_h100_table_is_what_the_h100_reports():
    """The table's H100 80GB profiles and placements equal a real H100's -lgip and -lgipp."""
    profiles = nvidia_smi.parse_mig_profiles(
        fixture("mig", "h100_80gb_lgip_7_profiles_mig_disabled_device_capture.txt")
    )
    placements = nvidia_smi.parse_mig_placements(fixture("mig", "h100_80gb_lgipp_placements_device_capture.txt"))
    own = mig.from_smi("NVIDIA H100 80GB HBM3", profiles, placements)
    table = mig.for_device(H100)
    assert own.profiles == table.profiles
    assert own.compute == table.compute == 7


def test_the_tutorial_layout_is_refused_with_what_fits():
    """'7g.40gb x 7 on an H100 80GB': 7g is the whole GPU, once, and it is 7g.80gb there."""
    gpu = mig.for_device("0x233010DE")
    message = mig.refusal(gpu, {"7g.40gb": 7}, "mig_layout")
    assert message.startswith("mig_layout: 7g.40gb x 7 does not fit a A100-80GB / H100-80GB: ")
    assert "has no profile 7g.40gb" in message
    assert "7g.80gb (up to 1)" in message and "at most 7 compute slices" in message
    assert "Nearest layouts that fit: 7g.80gb x 1; 1g.10gb x 7." in message


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        ({"1g.10gb": 8}, "holds at most 7 x 1g.10gb"),
        ({"3g.40gb": 2, "1g.10gb": 1}, "do not fit side by side"),
        ({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}, "takes 8 compute slices; A100-80GB / H100-80GB has 7"),
        ({"3g.40gb": 1, "4g.40gb": 1, "1g.10gb+me": 1}, "takes 8 compute slices"),
        ({"1g.10gb+me": 1, "1g.10gb": 7}, "takes 8 compute slices"),
        ({"1g.10gb": 0}, "the count must be a whole number from 1"),
        ({"10gb": 1}, "is not a MIG profile name"),
        ({}, "at least one profile"),
    ],
)
def test_impossible_layouts_on_an_h100(layout, reason):
    found = mig.problems(mig.for_device(H100), layout)
    assert any(reason in p for p in found), found


@pytest.mark.parametrize(
    "layout",
    [
        {"4g.40gb": 1, "3g.40gb": 1},
        {"2g.20gb": 3, "1g.10gb": 1},
        {"1g.20gb": 4},
        {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
        {"1g.10gb+me": 1, "1g.10gb": 6},
        {"7g.80gb": 1},
    ],
)
def test_layouts_that_fit_an_h100(layout):
    assert mig.problems(mig.for_device(H100), layout) == []


def test_every_profile_fits_alone_as_often_as_the_gpu_offers_it():
    for ids, _compute, _profiles in mig.MODELS.values():
        gpu = mig.for_device(ids[0])
        for name, (_starts, _size, most) in gpu.profiles.items():
            assert mig.problems(gpu, {name: most}) == [], (gpu.model, name)
            assert mig.problems(gpu, {name: most + 1}), (gpu.model, name)


def test_device_ids_in_every_spelling_and_gpus_without_mig():
    assert mig.for_device("0x233010DE").model == mig.for_device(0x2330).model == mig.for_device("2330").model
    assert mig.for_device("0x26B9") is None  # L40S: no MIG
    assert mig.for_device("garbage") is None


CAPS_LINE = re.compile(r".*/gpu(\d+)/mig/gi(\d+)(?:/ci(\d+))?/access\s+\S+\s+/dev/nvidia-caps/nvidia-cap(\d+)")


def test_caps_minors_are_those_of_a_real_a100():
    """The formula against the /dev/nvidia-caps nodes a real A100's driver gave its instances."""
    lines = fixture("mig", "a100_40gb_caps_minors_gi_ci_access.txt").splitlines()
    seen = 0
    for line in lines:
        match = CAPS_LINE.fullmatch(line)
        gpu, gi, ci, minor = match.groups()
        assert mig.caps_minor(int(gpu), int(gi), None if ci is None else int(ci)) == int(minor), line
        seen += 1
    assert seen == 7
    # The published table's corners (MIG User Guide): gpu3/gi3/ci3 439, gpu31/gi14/ci7 4322.
    assert mig.caps_minor(3, 3, 3) == 439 and mig.caps_minor(31, 14, 7) == 4322 and mig.caps_minor(0, 0) == 3
    with pytest.raises(ValueError, match="compute instance id 8"):
        mig.caps_minor(0, 0, 8)


# --- A node's layout against its GPUs (mig_layout) ---------------------------------------------
def node(*device_ids, mig_mode="disabled"):
    """nvidia_gpu facts of a node with these GPUs."""
    return {
        "gpus": [
            {"index": i, "name": f"GPU model {d}", "pci_device_id": d, "mig_mode": mig_mode, "mig_instances": None}
            for i, d in enumerate(device_ids)
        ]
    }


H100_NODE = node(*["0x2330"] * 8)


def test_the_seed_tutorial_layout_is_refused_on_every_gpu_it_names():
    layout = {"name": "tutorial", "gpus": [{"devices": [0], "profiles": {"7g.40gb": 7}}]}
    (message,) = mig.layout_problems(layout, H100_NODE)
    assert message.startswith("mig_layout.gpus[0].profiles on GPU 0 (GPU model 0x2330): 7g.40gb x 7 does not fit")
    assert "Nearest layouts that fit: 7g.80gb x 1; 1g.10gb x 7." in message


@pytest.mark.parametrize(
    ("layout", "words"),
    [
        ({"name": "Bad Name", "gpus": [{"devices": "all", "profiles": {}}]}, "mig_layout.name must be lowercase"),
        ({"name": "a", "gpus": []}, "mig_layout.gpus must list at least one entry"),
        ({"name": "a", "gpus": [{"devices": [8], "profiles": {}}]}, "names GPU 8; this node has 8 (0 to 7)"),
        ({"name": "a", "gpus": [{"devices": "some"}]}, "devices must be 'all' or a list of GPU indices"),
        ({"name": "a", "gpus": [{"devices": [0], "profile": {}}]}, "has unknown keys profile"),
        ({"name": "a", "gpus": [{"devices": "all"}, {"devices": [3]}]}, "names GPU 3 again (already in"),
        ({"name": "a", "gpus": [{"profiles": ["1g.10gb"]}]}, "profiles must map profile names to counts"),
        ("h100", "mig_layout must be a dict"),
    ],
)
def test_layout_shape_and_gpu_refusals(layout, words):
    found = mig.layout_problems(layout, H100_NODE)
    assert any(words in p for p in found), found


def test_a_gpu_without_mig_is_named():
    l40s = node("0x26B9", "0x2330", mig_mode=None)
    layout = {"name": "mixed", "gpus": [{"devices": "all", "profiles": {"1g.10gb": 7}}]}
    (message,) = mig.layout_problems(layout, l40s)
    assert "GPU 0 (GPU model 0x26B9, PCI id 0x26B9) cannot do MIG" in message
    # MIG off on it is fine.
    layout["gpus"] = [{"devices": [0]}, {"devices": [1], "profiles": {"1g.10gb": 7}}]
    assert mig.layout_problems(layout, l40s) == []


# --- The driver the run installs (MIG User Guide r620, "Deployment Considerations") ---------------
def test_every_mig_gpu_has_its_first_mig_driver():
    listed = [device for _gpu, ids, _first in mig.FIRST_DRIVERS for device in ids]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(device for ids, _c, _p in mig.MODELS.values() for device in ids)


@pytest.mark.parametrize(
    ("device", "profiles", "driver", "words"),
    [
        # An H100 on R470 has no MIG (its first is 525.85.12); A100 had it since 450.80.02.
        (H100, {"1g.10gb": 7}, "470", ["MIG on H100 needs driver 525.85.12 or newer"]),
        (H100, {"1g.10gb": 7}, "525.60.13", ["nvidia_driver_version is 525.60.13; MIG on H100 needs driver 525.85.12"]),
        ("0x2335", {"1g.18gb": 7}, "535.183.01", ["MIG on H200 needs driver 550.90.07 or newer"]),
        ("0x2901", {"1g.23gb": 7}, "570.86.15", ["MIG on B200 and GB200 needs driver 570.133.20 or newer"]),
        ("0x3182", {"1g.34gb": 7}, "575", ["MIG on B300 and GB300 needs driver 580.82.07 or newer"]),
        ("0x31C2", {"1g.35gb": 7}, "575.64.05", ["MIG on B300 and GB300 needs driver 580.82.07 or newer"]),
        ("0x2329", {"1g.12gb": 7}, "535.129.03", ["MIG on H20 needs driver 535.161.07 or newer"]),
        # The A30's media profiles came later than its MIG: 1g.6gb+me with R470, 2g.12gb+me with R525.
        ("0x20B7", {"2g.12gb+me": 1, "1g.6gb": 2}, "470.82.01", ["profile 2g.12gb+me needs driver R525 or newer"]),
        ("0x20B7", {"1g.6gb+me": 1}, "460.73.01", ["profile 1g.6gb+me needs driver R470 or newer"]),
        # A driver with MIG off on the RTX PRO 6000 (GPU Operator platform support), though newer than its first.
        ("0x2BB5", {"1g.24gb": 4}, "575.57.08", ["575.57.08, which has MIG off on this GPU"]),
    ],
)
def test_a_driver_without_mig_on_the_gpu_is_refused(device, profiles, driver, words):
    found = mig.driver_problems(device, profiles, driver)
    for word in words:
        assert any(word in p for p in found), found


@pytest.mark.parametrize(
    ("device", "profiles", "driver"),
    [
        (H100, {"1g.10gb": 7}, "525.85.12"),
        (H100, {"1g.10gb": 7}, "580"),  # a branch is taken at its newest
        ("0x2901", {"1g.23gb": 7}, "570"),
        ("0x20B2", {"1g.10gb": 7}, "450.80.02"),  # A100 80GB, its first MIG driver
        ("0x20B7", {"2g.12gb+me": 1}, "525.60.13"),
        ("0x2BB5", {"1g.24gb": 4}, "580.95.05"),
        (H100, {"1g.10gb": 7}, ""),  # no driver known: nothing to say
        ("0x26B9", {"1g.10gb": 7}, "470"),  # not a MIG GPU: layout_problems says so, not this
    ],
)
def test_a_driver_with_mig_on_the_gpu_passes(device, profiles, driver):
    assert mig.driver_problems(device, profiles, driver) == []


def test_the_layout_names_the_driver_variable_the_gpu_and_the_fix():
    facts = node("0x2330", "0x26B9")
    facts["gpus"][0]["name"] = "NVIDIA H100 80GB HBM3"
    layout = {"name": "inference", "gpus": [{"devices": [0], "profiles": {"1g.10gb": 7}}, {"devices": [1]}]}
    (message,) = mig.layout_problems(layout, facts, driver="470", driver_variable="nvidia_driver_branch")
    assert message == (
        "mig_layout.gpus[0] puts GPU 0 (NVIDIA H100 80GB HBM3) in MIG mode, but nvidia_driver_branch is 470; "
        "MIG on H100 needs driver 525.85.12 or newer (MIG User Guide, Deployment Considerations). "
        "Set nvidia_driver_branch to a driver that has it, or leave MIG off on this GPU (profiles: {})."
    )
    # MIG off needs nothing of the driver; a driver that has MIG passes.
    assert mig.layout_problems({"name": "off", "gpus": [{"devices": "all"}]}, facts, driver="470") == []
    assert mig.layout_problems(layout, facts, driver="580.95.05") == []


def test_changes_say_per_gpu_what_differs_and_ignore_gpus_not_named():
    facts = node("0x2330", "0x2330", "0x2330")
    facts["gpus"][1].update(
        mig_mode="enabled",
        mig_instances=[
            {"id": 7 + i, "profile": "1g.10gb", "compute_instances": [{"id": 0, "profile": "1g.10gb"}]}
            for i in range(7)
        ],
    )
    layout = {"name": "l", "gpus": [{"devices": [0, 1], "profiles": {"1g.10gb": 7}}]}
    (change,) = mig.changes(layout, facts)
    assert change == {
        "gpu": 0,
        "name": "GPU model 0x2330",
        "before": {"mig": "disabled", "instances": {}},
        "after": {"mig": "enabled", "instances": {"1g.10gb": 7}},
    }
    # A GPU instance without a compute instance is no MIG device: the GPU is not in its layout.
    facts["gpus"][1]["mig_instances"][0]["compute_instances"] = []
    assert [c["gpu"] for c in mig.changes(layout, facts)] == [0, 1]
    off = {"name": "off", "gpus": [{"devices": "all", "profiles": {}}]}
    assert [c["gpu"] for c in mig.changes(off, facts)] == [1]


# Kubernetes: the same layout gives the GPU Operator's strategy, the owner's labels and the
# resources each node should show.
def _facts(count, mig_gpus=()):
    return {
        "gpus": [
            {
                "index": i,
                "name": "NVIDIA H100 80GB HBM3",
                "pci_device_id": H100,
                "mig_mode": "enabled" if i in mig_gpus else "disabled",
                "mig_instances": [],
            }
            for i in range(count)
        ]
    }


MIXED_H100 = {
    "name": "h100-mixed",
    "gpus": [
        {"devices": [0, 1], "profiles": {"1g.10gb": 7}},
        {"devices": [2], "profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}},
        {"devices": [3], "profiles": {}},
    ],
}
SINGLE_H100 = {"name": "h100-inference", "gpus": [{"devices": "all", "profiles": {"1g.10gb": 7}}]}


def _nodes(*specs):
    return [
        {"name": n, "mig_layout": layout, "mig_owner": owner, "nvidia_gpu": _facts(4)} for n, layout, owner in specs
    ]


def test_a_node_with_several_profiles_makes_the_cluster_mixed():
    out = mig_kubernetes(_nodes(("a", MIXED_H100, "host"), ("b", SINGLE_H100, "host"), ("c", {}, "host")))
    assert out["strategy"] == "mixed"
    assert out["reason"].startswith("a: MIG profiles 1g.10gb, 2g.20gb, 3g.40gb and 1 GPU(s) without MIG")
    assert out["nodes"]["a"]["allocatable"] == {
        "nvidia.com/mig-1g.10gb": 16,
        "nvidia.com/mig-2g.20gb": 1,
        "nvidia.com/mig-3g.40gb": 1,
        "nvidia.com/gpu": 1,
    }
    assert out["nodes"]["b"]["allocatable"] == {"nvidia.com/mig-1g.10gb": 28}
    assert out["nodes"]["c"]["allocatable"] == {"nvidia.com/gpu": 4}
    # The host owns MIG everywhere: the operator's MIG manager stays off every node.
    assert not out["mig_manager"]
    assert {n["labels"]["nvidia.com/gpu.deploy.mig-manager"] for n in out["nodes"].values()} == {"false"}


def test_one_profile_on_every_gpu_is_the_single_strategy():
    out = mig_kubernetes(_nodes(("b", SINGLE_H100, "operator"), ("c", {}, "host")))
    assert out["strategy"] == "single"
    assert out["nodes"]["b"]["allocatable"] == {"nvidia.com/gpu": 28}
    assert out["nodes"]["c"]["allocatable"] == {"nvidia.com/gpu": 4}
    assert out["nodes"]["b"]["labels"] == {"nvidia.com/mig.config": "h100-inference"}
    assert out["mig_manager"]
    # The operator's ConfigMap holds the layouts it owns, in mig-parted's schema.
    assert out["parted_config"]["mig-configs"]["h100-inference"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    ]
    assert mig_kubernetes(_nodes(("c", {}, "host")))["strategy"] == "none"


def test_a_media_profile_is_its_own_resource_with_a_dot():
    # NVIDIA/k8s-device-plugin advertises 1g.10gb+me as nvidia.com/mig-1g.10gb.me.
    assert mig.k8s_resource("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert mig.k8s_resource("1g.24gb-me") == "nvidia.com/mig-1g.24gb-me"


def test_layouts_in_the_current_state_count_as_they_are():
    facts = _facts(2, mig_gpus=(1,))
    facts["gpus"][1]["mig_instances"] = [
        {"profile": "3g.40gb", "compute_instances": [{"id": 0, "profile": "3g.40gb"}]}
    ] * 2
    devices = mig.node_devices({}, facts)
    assert devices == {"whole": 1, "mig": {"3g.40gb": 2}}
    assert mig.node_strategy(devices)[0] == "mixed"


def test_one_name_for_two_layouts_is_refused():
    other = {"name": "h100-inference", "gpus": [{"devices": "all", "profiles": {"2g.20gb": 3}}]}
    with pytest.raises(AnsibleFilterError, match="two different MIG layouts are both named h100-inference"):
        mig_kubernetes(_nodes(("a", SINGLE_H100, "operator"), ("b", other, "operator")))
    with pytest.raises(AnsibleFilterError, match="mig_owner of a is 'both'"):
        mig_kubernetes(_nodes(("a", SINGLE_H100, "both")))


def test_the_parted_config_has_the_shape_of_nvidia_s_own():
    ours = mig.parted_config([MIXED_H100, SINGLE_H100])
    theirs = yaml.safe_load(UPSTREAM.read_text())
    assert ours["version"] == theirs["version"]
    assert ours["mig-configs"]["all-disabled"] == theirs["mig-configs"]["all-disabled"]
    keys = {k for entries in theirs["mig-configs"].values() for e in entries for k in e}
    assert {k for entries in ours["mig-configs"].values() for e in entries for k in e} <= keys
    assert ours["mig-configs"]["h100-mixed"][2] == {"devices": [3], "mig-enabled": False}


def test_a_gpu_instance_split_into_smaller_compute_instances_is_not_its_profile():
    """The real A100 capture: GPU instance 3 (2g.10gb) holds two 1c.2g.10gb compute instances, so
    gres.conf lists two MIG devices there; the layout 4g + 2g + 1g is not what the GPU has."""
    gpu = {"index": 0, "mig_mode": "enabled", "name": "NVIDIA A100-SXM4-40GB"}
    gpu_inventory._mig_facts(
        gpu,
        {
            "instances": nvidia_smi.parse_mig_instances(fixture("mig", "a100_40gb_lgi_3_instances_4g_2g_1g.txt")),
            "compute": nvidia_smi.parse_mig_compute_instances(
                fixture("mig", "a100_40gb_lci_4_instances_two_1c_in_one_gi.txt")
            ),
        },
    )
    facts = {"gpus": [gpu]}
    assert mig.current(facts)[0]["instances"] == {"1g.5gb": 1, "2g.10gb as 1c.2g.10gb+1c.2g.10gb": 1, "4g.20gb": 1}
    layout = {"name": "l", "gpus": [{"devices": "all", "profiles": {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}}]}
    (change,) = mig.changes(layout, facts)
    assert "2g.10gb as 1c.2g.10gb+1c.2g.10gb x 1" in mig.summary(change)


def test_a_layout_preflight_would_refuse_is_named_on_the_kubernetes_side_not_a_type_error():
    """k8s_gpu_platform.yml reads every node's layout; one with mixed key types ended in a TypeError."""
    mixed = {"name": "x", "gpus": [{"devices": [0, "1"], "profiles": {"1g.10gb": 7}}]}
    with pytest.raises(AnsibleFilterError, match=r"mig_layout of b: mig_layout.gpus\[0\].devices must be"):
        mig_kubernetes(_nodes(("b", mixed, "operator")))


def test_unknown_keys_of_mixed_types_are_named_not_a_type_error():
    problems = mig.layout_shape_problems({"name": "x", "gpus": [], 1: "a", "zz": 2, None: 3})
    assert any("has unknown keys" in p and "1" in p and "zz" in p for p in problems)
    problems = mig.layout_shape_problems({"name": "x", "gpus": [{"devices": "all", "profiles": {}, 2: 1, "q": 1}]})
    assert any("has unknown keys" in p for p in problems)
