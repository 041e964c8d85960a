# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm node description: lscpu parsing, core numbering, gres.conf records, node grouping."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.gpuops.cluster.plugins.filter.slurm_node_groups import slurm_node_groups
from ansible_collections.gpuops.cluster.plugins.filter.slurm_node_spec import slurm_node_spec
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import parse_query_xml, parse_topo
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import (
    SlurmSpecError,
    cpu_topology,
    gpu_cores,
    group_nodes,
    node_spec,
    number_list,
    parse_lscpu,
    real_memory,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.topology import link_count
from conftest import FIXTURES, GPUSIM

LSCPU = FIXTURES / "lscpu"
PROFILES = GPUSIM / "profiles"


def fixture(name):
    return (LSCPU / name).read_text()


def profile(name, file):
    return (PROFILES / name / file).read_text()


def profile_gpu_facts(name):
    """The nvidia_gpu facts gpu_facts gives on a profile's node with the driver loaded."""
    return build_gpu_facts(
        classify(parse_lspci(profile(name, "lspci-Dnn.txt"))),
        parse_query_xml(profile(name, "nvidia-smi-q-x.xml")),
        parse_topo(profile(name, "nvidia-smi-topo-m.txt")),
    )


def test_lscpu_default_columns_with_hyperthreads():
    rows = parse_lscpu(fixture("i7_2600_1socket_4c_ht_default_columns.txt"))
    assert [row["cpu"] for row in rows] == list(range(8))
    assert rows[4] == {"cpu": 4, "core": 0, "socket": 0, "node": 0}
    topology = cpu_topology(rows)
    assert (topology["cpus"], topology["sockets_per_board"], topology["cores_per_socket"]) == (8, 1, 4)
    assert topology["threads_per_core"] == 2
    # CPU 4 is the second thread of core 0.
    assert topology["core_index"][4] == topology["core_index"][0] == 0
    assert gpu_cores([1, 5, 7], topology) == [1, 3]


def test_lscpu_interleaved_sockets_number_cores_socket_by_socket():
    topology = cpu_topology(parse_lscpu(fixture("xeon_e5410_2socket_interleaved_no_ht.txt")))
    assert (topology["sockets_per_board"], topology["cores_per_socket"], topology["threads_per_core"]) == (2, 4, 1)
    # Socket 0 holds the even CPUs: Slurm's cores 0-3; socket 1 the odd ones: cores 4-7.
    assert [topology["core_index"][cpu] for cpu in (0, 2, 4, 6)] == [0, 1, 2, 3]
    assert [topology["core_index"][cpu] for cpu in (1, 3, 5, 7)] == [4, 5, 6, 7]
    assert number_list(gpu_cores([1, 3, 5, 7], topology)) == "4-7"


def test_lscpu_named_columns_as_the_role_runs_it():
    topology = cpu_topology(parse_lscpu(fixture("debian12_container_2cpu_named_columns.txt")))
    assert (topology["cpus"], topology["sockets_per_board"], topology["cores_per_socket"]) == (2, 1, 2)


@pytest.mark.parametrize(
    "text, message",
    [
        ("0,0,0,0\n", "before the '# CPU,Core,Socket,...' header"),
        ("# CPU,Node\n0,0\n", "no core/socket column"),
        ("# CPU,Core,Socket,Node\n0,0,0,0\n0,1,0,0\n", "CPU 0 is listed twice"),
        ("# CPU,Core,Socket,Node\n0,x,0,0\n", "the core column holds 'x'"),
        ("# CPU,Core,Socket,Node\n", "no CPU lines"),
        ("# CPU,Core,Socket,Node\n0\n", "too few columns"),
    ],
)
def test_lscpu_malformed_output_names_the_line(text, message):
    with pytest.raises(ParseError, match="lscpu -p") as err:
        parse_lscpu(text)
    assert message in str(err.value)


def test_uneven_sockets_and_hybrid_cores_are_refused():
    uneven = "# CPU,Core,Socket\n0,0,0\n1,1,0\n2,2,1\n"
    with pytest.raises(SlurmSpecError, match=r"different core counts .*socket 0: 2, socket 1: 1"):
        cpu_topology(parse_lscpu(uneven))
    hybrid = "# CPU,Core,Socket\n0,0,0\n1,0,0\n2,1,0\n"
    with pytest.raises(SlurmSpecError, match="different thread counts"):
        cpu_topology(parse_lscpu(hybrid))


def test_affinity_outside_the_node_is_refused():
    topology = cpu_topology(parse_lscpu(fixture("debian12_container_2cpu_named_columns.txt")))
    with pytest.raises(SlurmSpecError, match="GPU3 has CPU affinity 0-55 but lscpu shows no CPU 2-55"):
        gpu_cores(list(range(56)), topology, "GPU3")


@pytest.mark.parametrize("cell, count", [("X", -1), ("NV18", 18), ("nv4", 4), ("PIX", 0), ("SYS", 0), (None, 0)])
def test_link_count(cell, count):
    assert link_count(cell) == count


def test_number_list():
    assert number_list([3, 1, 2, 7, 9, 8, 11]) == "1-3,7-9,11"
    assert number_list([]) == ""


def test_real_memory_headroom():
    assert real_memory(2063878, 5, 1024) == 2063878 - 103193
    assert real_memory(8000, 5, 1024) == 8000 - 1024
    with pytest.raises(SlurmSpecError, match="slurm_memory_reserve_percent"):
        real_memory(1000, 5, 1024)


def test_dgx_h100_node_spec():
    spec = node_spec(profile("dgx-h100", "lscpu-p.txt"), profile_gpu_facts("dgx-h100"), 2063937)
    assert {key: spec[key] for key in ("cpus", "boards", "sockets_per_board", "cores_per_socket")} == {
        "cpus": 224,
        "boards": 1,
        "sockets_per_board": 2,
        "cores_per_socket": 56,
    }
    assert spec["threads_per_core"] == 2
    assert spec["gres"] == "gpu:h100:8"
    devices = spec["gres_devices"]
    assert [device["file"] for device in devices] == [f"/dev/nvidia{minor}" for minor in range(8)]
    # topo -m: GPU0-3 have CPUs 0-55,112-167 (socket 0), GPU4-7 56-111,168-223 (socket 1).
    assert [device["cores"] for device in devices] == ["0-55"] * 4 + ["56-111"] * 4
    assert devices[0]["links"] == "-1,18,18,18,18,18,18,18"
    assert devices[7]["links"] == "18,18,18,18,18,18,18,-1"
    assert {device["type"] for device in devices} == {"h100"}


def test_pcie_l40s_has_no_links():
    spec = node_spec(profile("pcie-l40s", "lscpu-p.txt"), profile_gpu_facts("pcie-l40s"), 515000, gres_type="l40s")
    assert (spec["cpus"], spec["sockets_per_board"], spec["cores_per_socket"], spec["threads_per_core"]) == (
        128,
        2,
        32,
        2,
    )
    assert spec["gres"] == "gpu:l40s:4"
    assert [device["cores"] for device in spec["gres_devices"]] == ["0-31", "0-31", "32-63", "32-63"]
    assert all("links" not in device for device in spec["gres_devices"])


def test_dgx1_v100_hybrid_cube_mesh_links():
    spec = node_spec(profile("dgx1-v100", "lscpu-p.txt"), profile_gpu_facts("dgx1-v100"), 515000)
    links = [device["links"].split(",") for device in spec["gres_devices"]]
    # Symmetric, -1 on the diagonal, and some pairs without NVLink (the cube mesh).
    assert all(links[i][i] == "-1" for i in range(8))
    assert all(links[i][j] == links[j][i] for i in range(8) for j in range(8))
    assert any(cell == "0" for row in links for cell in row)


def test_gres_devices_in_pci_bus_order():
    facts = profile_gpu_facts("dgx-h100")
    facts["gpus"] = list(reversed(facts["gpus"]))
    spec = node_spec(profile("dgx-h100", "lscpu-p.txt"), facts, 2063937)
    assert [device["file"] for device in spec["gres_devices"]] == [f"/dev/nvidia{minor}" for minor in range(8)]


def test_cores_left_out_when_the_affinity_spans_the_node():
    facts = profile_gpu_facts("pcie-l40s")
    for gpu in facts["gpus"]:
        gpu["cpu_affinity"] = list(range(128))
    spec = node_spec(profile("pcie-l40s", "lscpu-p.txt"), facts, 515000)
    assert all("cores" not in device for device in spec["gres_devices"])


def test_node_without_gpus():
    spec = node_spec(fixture("xeon_e5410_2socket_interleaved_no_ht.txt"), {"present": False, "count": 0}, 16000)
    assert spec["gres"] == "" and spec["gres_devices"] == []


@pytest.mark.parametrize(
    "change, message",
    [
        ({"mig_mode": "enabled"}, "in MIG mode but its GPU instances were not read"),
        ({"minor_number": None}, "no minor number"),
    ],
)
def test_gpus_that_cannot_be_described_are_refused(change, message):
    facts = profile_gpu_facts("pcie-l40s")
    facts["gpus"][1].update(change)
    with pytest.raises(AnsibleFilterError, match=f"slurm_node_spec: GPU1 .*{message}"):
        slurm_node_spec(profile("pcie-l40s", "lscpu-p.txt"), facts, 515000)


def test_bad_gres_type_is_refused():
    with pytest.raises(AnsibleFilterError, match="slurm_gres_type"):
        slurm_node_spec(
            profile("pcie-l40s", "lscpu-p.txt"), profile_gpu_facts("pcie-l40s"), 515000, gres_type="L40S 48GB"
        )


def test_groups_identical_hosts_on_one_hostlist():
    h100 = node_spec(profile("dgx-h100", "lscpu-p.txt"), profile_gpu_facts("dgx-h100"), 2063937)
    l40s = node_spec(profile("pcie-l40s", "lscpu-p.txt"), profile_gpu_facts("pcie-l40s"), 515000)
    specs = {f"gpu{n:02d}": h100 for n in (1, 2, 3, 4, 7, 8, 9, 10)}
    specs.update({"inf1": l40s, "inf2": l40s, "gpu05": l40s})
    groups = slurm_node_groups(specs)
    assert [group["nodes"] for group in groups] == ["gpu05,inf[1-2]", "gpu[01-04,07-10]"]
    assert groups[1]["spec"] == h100
    assert group_nodes({}) == []


def test_groups_through_the_templating_engine_read_each_description_once():
    """In a template the filter gets lazy containers; it copies them to plain data once, groups
    descriptions equal whatever their key order, and returns plain dicts."""
    h100 = node_spec(profile("dgx-h100", "lscpu-p.txt"), profile_gpu_facts("dgx-h100"), 2063937)
    reordered = dict(reversed(list(h100.items())))
    specs = {"gpu01": h100, "gpu02": reordered, "gpu03": dict(h100, real_memory=1)}
    templar = Templar(loader=DataLoader(), variables={"specs": specs})
    groups = templar.template(trust_as_template("{{ specs | gpuops.cluster.slurm_node_groups }}"))
    assert [group["nodes"] for group in groups] == ["gpu03", "gpu[01-02]"]
    assert groups[1]["spec"] == h100 and isinstance(groups[1]["spec"], dict)


def test_groups_refuse_a_list():
    with pytest.raises(AnsibleFilterError, match="expected a mapping"):
        slurm_node_groups(["gpu01"])


def gpu_instance(number, profile, start, size, computes):
    """A GPU instance as gpu_facts reports it, with compute instances of these profiles."""
    return {
        "id": number,
        "profile": profile,
        "placement": {"start": start, "size": size},
        "compute_instances": [{"id": i, "profile": p} for i, p in enumerate(computes)],
    }


def test_mig_gpus_give_one_record_per_mig_device_with_its_caps_files():
    """GPU 0 with 3g.40gb + 2g.20gb + 1g.10gb x 2 (as the stand-in driver places them), GPU 1 with a
    GPU instance split in two compute instances; the other six GPUs whole."""
    facts = profile_gpu_facts("dgx-h100")
    gpu0, gpu1 = facts["gpus"][0], facts["gpus"][1]
    gpu0["mig_mode"] = gpu1["mig_mode"] = "enabled"
    gpu0["mig_instances"] = [
        gpu_instance(1, "3g.40gb", 4, 4, ["3g.40gb"]),
        gpu_instance(3, "2g.20gb", 0, 2, ["2g.20gb"]),
        gpu_instance(7, "1g.10gb", 2, 1, ["1g.10gb"]),
        gpu_instance(8, "1g.10gb+me", 3, 1, ["1g.10gb"]),
        gpu_instance(9, "1g.10gb", 6, 1, []),  # no compute instance: no MIG device
    ]
    gpu1["mig_instances"] = [gpu_instance(3, "2g.20gb", 0, 2, ["1c.2g.20gb", "1c.2g.20gb"])]
    spec = node_spec(profile("dgx-h100", "lscpu-p.txt"), facts, 2063937)
    assert spec["gres"].split(",") == [
        "gpu:h100_2g.20gb:1",
        "gpu:h100_1g.10gb:1",
        "gpu:h100_1g.10gb_me:1",
        "gpu:h100_3g.40gb:1",
        "gpu:h100_1c.2g.20gb:2",
        "gpu:h100:6",
    ]
    assert spec["gpus"] == 8
    first = spec["gres_devices"][0]
    # GPU 0 is /dev/nvidia0; GPU instance 3 is cap 3 + 9 x 3 = 30, its compute instance 0 is 31.
    assert first == {
        "files": "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30,/dev/nvidia-caps/nvidia-cap31",
        "type": "h100_2g.20gb",
        "cores": "0-55",
    }
    split = [d for d in spec["gres_devices"] if d["type"] == "h100_1c.2g.20gb"]
    assert [d["files"].split(",")[2] for d in split] == [
        "/dev/nvidia-caps/nvidia-cap166",
        "/dev/nvidia-caps/nvidia-cap167",
    ]
    assert split[0]["files"].startswith("/dev/nvidia1,/dev/nvidia-caps/nvidia-cap165,")
    # No Links= on a node with MIG devices; the whole GPUs keep File=.
    assert all("links" not in d for d in spec["gres_devices"])
    assert [d["file"] for d in spec["gres_devices"] if "file" in d] == [f"/dev/nvidia{m}" for m in range(2, 8)]
