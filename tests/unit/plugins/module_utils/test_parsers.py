# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parsers against real captured outputs (tests/unit/fixtures, sources in SOURCES.md)."""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import ibstat, nvidia_smi, pci, topology
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from conftest import FIXTURES, GPUSIM, PROFILE_NAMES, fixture, fixtures, profile_summary


def test_every_fixture_has_its_source_recorded():
    sources = (FIXTURES / "SOURCES.md").read_text()
    for kind in ("topo", "smi_xml", "ibstat", "ibdev2netdev", "lspci"):
        for path in fixtures(kind):
            assert f"`{kind}/{path.name}`" in sources, path


# --------------------------------------------------------------------------------------------
# nvidia-smi topo -m

TOPO = {
    # file: (gpus, nics, {(a, b): cell}, GPU0 cpus (first, count), NUMA of the last GPU, nearest NICs of GPU0)
    "b200_8gpu_nv18_16nic_merged_cells_quirk.txt": (
        8,
        [f"mlx5_{n}" for n in range(16)],
        # PXBNODE, SYSSYS and " X NODE" in the capture are two cells each.
        {
            ("GPU0", "GPU7"): "NV18",
            ("GPU2", "mlx5_8"): "PXB",
            ("GPU2", "mlx5_9"): "NODE",
            ("GPU4", "mlx5_8"): "SYS",
            ("mlx5_8", "mlx5_9"): "NODE",
            ("mlx5_0", "mlx5_1"): "PIX",
            ("GPU7", "mlx5_15"): "PXB",
        },
        (0, 112),
        1,
        (["mlx5_4"], "PXB"),
    ),
    "dgx1_v100_8gpu_nv1nv2_mlx5col_spaces.txt": (
        8,
        ["mlx5_0"],
        {
            ("GPU0", "GPU1"): "NV1",
            ("GPU0", "GPU3"): "NV2",
            ("GPU0", "GPU5"): "SYS",
            ("GPU2", "mlx5_0"): "PIX",
            ("mlx5_0", "GPU7"): "SYS",
        },
        (0, 24),
        None,
        (["mlx5_0"], "NODE"),
    ),
    "dgx_a100_8gpu_nv12_mlx5_0-11_cols_numa_nps4.txt": (
        8,
        [f"mlx5_{n}" for n in range(12)],
        {("GPU0", "GPU1"): "NV12", ("GPU6", "mlx5_8"): "PXB", ("mlx5_10", "mlx5_11"): "PIX"},
        (48, 32),
        5,
        (["mlx5_0", "mlx5_1"], "PXB"),
    ),
    "h100_8gpu_nv18_vm_no_nic.txt": (8, [], {("GPU3", "GPU4"): "NV18"}, (0, 64), 0, ([], None)),
    "rtx3090_2gpu_nvlink_bridge_nv4.txt": (2, [], {("GPU0", "GPU1"): "NV4"}, (0, 24), 0, ([], None)),
    "rtx_a4000_4gpu_node_gpunumaid_tabs.txt": (4, [], {("GPU0", "GPU3"): "NODE"}, (0, 32), 0, ([], None)),
}


@pytest.mark.parametrize("name", sorted(TOPO))
def test_topo_real_captures(name):
    gpus, nics, cells, (first_cpu, cpu_count), last_numa, nearest = TOPO[name]
    topo = nvidia_smi.parse_topo(fixture("topo", name))
    assert topo["gpus"] == [f"GPU{n}" for n in range(gpus)]
    assert topo["nics"] == nics
    for (a, b), cell in cells.items():
        assert topo["links"][a][b] == cell, (a, b)
        assert topo["links"][b][a] == cell, (b, a)
    devices = topo["gpus"] + topo["nics"]
    for device in devices:
        assert sorted(topo["links"][device]) == sorted(d for d in devices if d != device)
    cpus = topo["cpu_affinity"]["GPU0"]
    assert (cpus[0], len(cpus)) == (first_cpu, cpu_count)
    assert cpus == sorted(set(cpus))
    assert topo["numa_affinity"][f"GPU{gpus - 1}"] == last_numa
    assert set(topo["gpu_numa_id"].values()) == {None}
    assert nvidia_smi.nearest_nics(topo, "GPU0") == nearest


def test_topo_cpu_affinity_expands_every_range():
    topo = nvidia_smi.parse_topo(fixture("topo", "dgx_a100_8gpu_nv12_mlx5_0-11_cols_numa_nps4.txt"))
    assert topo["cpu_affinity"]["GPU4"] == list(range(112, 128)) + list(range(240, 256))


@pytest.mark.parametrize("name", sorted(TOPO))
def test_topo_tabs_or_spaces_padding_and_colours_read_the_same(name):
    text = fixture("topo", name)
    expected = nvidia_smi.parse_topo(text)
    spaces = text.expandtabs(8)
    no_padding = re.sub(r" X ", "X", text)
    trailing = "\n".join(line + "   " for line in text.split("\n"))
    coloured = re.sub(r"(NV\d+|SYS|PIX)", "\x1b[32m\\1\x1b[0m", text, count=5)
    crlf = text.replace("\n", "\r\n")
    for variant in (spaces, no_padding, trailing, coloured, crlf):
        assert nvidia_smi.parse_topo(variant) == expected


def test_topo_old_soc_is_sys():
    text = fixture("topo", "dgx1_v100_8gpu_nv1nv2_mlx5col_spaces.txt").replace("SYS", "SOC")
    topo = nvidia_smi.parse_topo(text)
    assert topo["links"]["GPU0"]["GPU5"] == "SYS"
    assert "SOC" not in {cell for row in topo["links"].values() for cell in row.values()}


def test_topo_na_affinity_and_absent_columns():
    text = fixture("topo", "h100_8gpu_nv18_vm_no_nic.txt").replace("\t0-63\t0\t", "\tN/A\tN/A\t")
    topo = nvidia_smi.parse_topo(text)
    assert topo["cpu_affinity"]["GPU0"] is None
    assert topo["numa_affinity"]["GPU0"] is None
    no_columns = re.sub(r"\t(CPU Affinity|NUMA Affinity|GPU NUMA ID)", "", text)
    no_columns = re.sub(r"\tN/A\tN/A\t\tN/A", "", no_columns)
    topo = nvidia_smi.parse_topo(no_columns)
    assert topo["cpu_affinity"]["GPU0"] is None and len(topo["gpus"]) == 8


def test_topo_high_nvlink_counts_rank_closer():
    assert topology.rank("NV18") < topology.rank("NV4") < topology.rank("PIX")
    ranks = [topology.rank(v) for v in ("X", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS")]
    assert ranks == sorted(ranks)
    assert topology.rank("SOC") == topology.rank("SYS")


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_topo_of_every_gpusim_profile(name):
    summary = profile_summary(name)
    topo = nvidia_smi.parse_topo((GPUSIM / "profiles" / name / "nvidia-smi-topo-m.txt").read_text())
    assert len(topo["gpus"]) == summary["gpu_count"]
    assert topo["nics"] == [nic["name"] for nic in summary["nics"]]


@pytest.mark.parametrize(
    ("text", "line_number", "reason"),
    [
        ("", None, "no matrix header"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\n", 2, "no matrix row for GPU1"),
        ("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tNV4\t X \n", 2, "has 1 cells"),
        ("\tGPU0\tGPU1\nGPU0\tNV4\t X \nGPU1\tNV4\t X \n", 2, "X on the diagonal"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU0\tNV4\t X \n", 3, "appears twice"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU9\tNV4\t X \n", 3, "not a column"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-x\nGPU1\tNV4\t X \t0\n", 2, "not a CPU list"),
        ("\tGPU0\tCPU Affinity\nGPU0\t X \t9-1\n", 2, "impossible CPU range"),
        ("\tGPU0\tCPU Affinity\nGPU0\t X \t0-999999999\n", 2, "impossible CPU range"),
    ],
)
def test_topo_malformed_names_the_line(text, line_number, reason):
    with pytest.raises(ParseError, match=reason) as caught:
        nvidia_smi.parse_topo(text)
    assert isinstance(caught.value, ValueError)
    assert caught.value.command == "nvidia-smi topo -m"
    assert caught.value.line_number == line_number


# --------------------------------------------------------------------------------------------
# nvidia-smi -q -x


def test_query_xml_a100_mig():
    query = nvidia_smi.parse_query_xml(fixture("smi_xml", "a100_sxm4_80gb_mig_4x1g20gb_v12.xml"))
    assert (query["driver_version"], query["cuda_version"], query["attached_gpus"]) == ("535.54.03", "12.2", 4)
    (gpu,) = query["gpus"]
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert (gpu["pci_device_id"], gpu["pci_bus_id"], gpu["minor_number"]) == ("20b2", "00000000:01:00.0", 1)
    assert (gpu["mig_mode"], gpu["mig_devices"], gpu["memory_total_mib"]) == ("enabled", 4, 81920)
    assert (gpu["architecture"], gpu["virtualization_mode"]) == ("Ampere", "None")


def test_query_xml_a10g_passthrough_with_anonymised_device_id():
    query = nvidia_smi.parse_query_xml(fixture("smi_xml", "a10g_aws_passthrough_v11_driver515.xml"))
    assert (query["driver_version"], query["cuda_version"]) == ("515.105.01", "11.7")
    (gpu,) = query["gpus"]
    assert (gpu["name"], gpu["mig_mode"], gpu["mig_devices"]) == ("NVIDIA A10G", None, 0)
    assert gpu["virtualization_mode"] == "Pass-Through"
    # The published capture says 000000DE: no device id rather than a wrong one.
    assert gpu["pci_device_id"] is None
    assert gpu["pcie"] == {"max_gen": 4, "current_gen": 1, "max_width": 16, "current_width": 8}


@pytest.mark.parametrize(
    ("name", "want"),
    [
        # Before the T.Limit form: absolute thresholds (an A100 on 535, an A10G on 515).
        ("a100_sxm4_80gb_mig_4x1g20gb_v12.xml", (27, 89, 92, None, None, None)),
        ("a10g_aws_passthrough_v11_driver515.xml", (17, 95, 98, None, None, None)),
        # Hopper on 580 (our device captures): margins to T.Limit, no absolute slowdown temperature.
        ("h100_sxm5_80gb_vm_1gpu_driver580_open_device_capture.xml", (34, None, None, 54, -2, -8)),
        ("h200_141gb_vm_1gpu_driver580_159_04_open_device_capture.xml", (34, None, None, 53, -2, -8)),
    ],
)
def test_query_xml_temperature_in_either_threshold_form(name, want):
    (gpu,) = nvidia_smi.parse_query_xml(fixture("smi_xml", name))["gpus"]
    keys = ("current_c", "slowdown_c", "shutdown_c", "tlimit_margin_c", "slowdown_tlimit_c", "shutdown_tlimit_c")
    assert tuple(gpu["temperature"][k] for k in keys) == want


def test_query_xml_temperature_garbage_is_unknown_not_a_number():
    text = fixture("smi_xml", "a100_sxm4_80gb_mig_4x1g20gb_v12.xml")
    text = text.replace("<gpu_temp_slow_threshold>89 C<", "<gpu_temp_slow_threshold>89 F<")
    text = text.replace("<gpu_temp_max_threshold>92 C<", "<gpu_temp_max_threshold>N/A<")
    (gpu,) = nvidia_smi.parse_query_xml(text)["gpus"]
    assert (gpu["temperature"]["slowdown_c"], gpu["temperature"]["shutdown_c"]) == (None, None)


def test_query_xml_edited_cases_vgpu_guest_old_driver_na_fields():
    # Edits of a real capture for what no public capture shows: a vGPU guest, a driver that does
    # not print the architecture, N/A where a number is expected, warnings before the document.
    text = fixture("smi_xml", "a10g_aws_passthrough_v11_driver515.xml")
    text = text.replace("<virtualization_mode>Pass-Through<", "<virtualization_mode>VGPU<")
    text = re.sub(r"\s*<product_architecture>[^<]*</product_architecture>", "", text)
    text = text.replace("<cuda_version>11.7<", "<cuda_version>N/A<").replace("<minor_number>0<", "<minor_number>N/A<")
    text = "WARNING: infoROM is corrupted at gpu 0000:00:1E.0\n" + text
    query = nvidia_smi.parse_query_xml(text)
    (gpu,) = query["gpus"]
    assert (gpu["virtualization_mode"], gpu["architecture"], gpu["minor_number"]) == ("VGPU", None, None)
    assert query["cuda_version"] is None and query["driver_version"] == "515.105.01"


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_query_xml_of_every_gpusim_profile(name):
    summary = profile_summary(name)
    query = nvidia_smi.parse_query_xml((GPUSIM / "profiles" / name / "nvidia-smi-q-x.xml").read_text())
    assert [gpu["uuid"] for gpu in query["gpus"]] == summary["gpu_uuids"]
    assert [pci.normalize_bus_id(gpu["pci_bus_id"]) for gpu in query["gpus"]] == summary["gpu_pci_bus_ids"]
    assert {gpu["name"] for gpu in query["gpus"]} == {summary["gpu_name"]}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no XML document"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no XML document"),
        ('<?xml version="1.0" ?>\n<nvidia_smi_log>\n<gpu id="0000:01:00.0">\n', "malformed XML"),
        ('<?xml version="1.0" ?>\n<other/>\n', "not <nvidia_smi_log>"),
        ('<?xml version="1.0" ?>\n<nvidia_smi_log><gpu><uuid>GPU-1</uuid></gpu></nvidia_smi_log>', "no PCI bus id"),
    ],
)
def test_query_xml_malformed(text, reason):
    with pytest.raises(ParseError, match=reason) as caught:
        nvidia_smi.parse_query_xml(text)
    assert caught.value.command == "nvidia-smi -q -x"


def test_query_xml_error_names_the_line():
    text = fixture("smi_xml", "a100_sxm4_80gb_mig_4x1g20gb_v12.xml").replace("<serial>", "<serial", 1)
    with pytest.raises(ParseError) as caught:
        nvidia_smi.parse_query_xml(text)
    assert caught.value.line_number == next(n for n, line in enumerate(text.split("\n"), 1) if "<serial" in line)


# --------------------------------------------------------------------------------------------
# ibstat / ibdev2netdev

IBSTAT = {
    # file: (CA count, first CA type, active InfiniBand, active Ethernet, {ca: (state, physical, rate, layer)})
    "a100_vm_8ca_cx6_ib_rate100_active.txt": (
        8,
        "MT4123",
        [f"mlx5_{n}:1" for n in range(8)],
        [],
        {"mlx5_7": ("Active", "LinkUp", 100, "InfiniBand")},
    ),
    "cx4_single_ca_no_catype_initializing_lid65535.txt": (
        1,
        None,
        [],
        [],
        {"mlx5_0": ("Initializing", "LinkUp", 100, "InfiniBand")},
    ),
    "h100_12ca_8x_ib_ndr400_plus_4x_eth_3down.txt": (
        12,
        "MT4129",
        ["mlx5_0:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1", "mlx5_6:1", "mlx5_9:1", "mlx5_10:1", "mlx5_11:1"],
        ["mlx5_1:1"],
        {"mlx5_2": ("Down", "Disabled", 40, "Ethernet"), "mlx5_11": ("Active", "LinkUp", 400, "InfiniBand")},
    ),
    "h100_12ca_all_roce_polling_and_disabled_ports.txt": (
        12,
        "MT4129",
        [],
        [
            "mlx5_0:1",
            "mlx5_1:1",
            "mlx5_2:1",
            "mlx5_3:1",
            "mlx5_4:1",
            "mlx5_6:1",
            "mlx5_7:1",
            "mlx5_8:1",
            "mlx5_9:1",
            "mlx5_10:1",
        ],
        {"mlx5_11": ("Down", "Polling", 40, "Ethernet"), "mlx5_5": ("Down", "Disabled", 40, "Ethernet")},
    ),
    "mlx4_cx3_dualport_roce_10g_both_active.txt": (
        1,
        "MT4099",
        [],
        ["mlx4_0:1", "mlx4_0:2"],
        {"mlx4_0": ("Active", "LinkUp", 10, "Ethernet")},
    ),
}


@pytest.mark.parametrize("name", sorted(IBSTAT))
def test_ibstat_real_captures(name):
    count, ca_type, active_ib, active_eth, ports = IBSTAT[name]
    cas = ibstat.parse_ibstat(fixture("ibstat", name))
    assert len(cas) == count
    assert cas[0]["ca_type"] == ca_type
    active = ibstat.active_ports(cas)
    assert active.get("InfiniBand", []) == active_ib
    assert active.get("Ethernet", []) == active_eth
    by_name = {ca["name"]: ca for ca in cas}
    for ca_name, (state, physical, rate, layer) in ports.items():
        port = by_name[ca_name]["ports"][0]
        assert (port["state"], port["physical_state"], port["rate"], port["link_layer"]) == (
            state,
            physical,
            rate,
            layer,
        )
    for ca in cas:
        assert ca["number_of_ports"] == len(ca["ports"])
        assert all(port["link_layer_reported"] for port in ca["ports"])


def test_ibstat_two_ports_and_guids():
    (ca,) = ibstat.parse_ibstat(fixture("ibstat", "mlx4_cx3_dualport_roce_10g_both_active.txt"))
    assert [port["port"] for port in ca["ports"]] == [1, 2]
    assert ca["node_guid"] == "0xf452140300864940"
    assert ca["ports"][1]["port_guid"] == "0xf65214fffe864942"


def test_ibstat_edited_cases_rates_old_driver_and_error_lines():
    # Edits of a real capture: SDR 2.5 and XDR 800 rates, an old ibstat with no Link layer and no
    # CA type line, an Armed port, and the warning/error lines infiniband-diags prints.
    text = fixture("ibstat", "a100_vm_8ca_cx6_ib_rate100_active.txt")
    text = text.replace("Rate: 100", "Rate: 2.5", 1).replace("Rate: 100", "Rate: 800", 1)
    text = re.sub(r"\n\s*Link layer: InfiniBand", "", text)
    text = re.sub(r"\n\s*CA type: MT4123", "", text)
    text = text.replace("State: Active", "State: Armed", 1)
    text = "ibwarn: [4321] mad_rpc_open_port: can't open UMAD port (mlx5_9:0)\n" + text
    text += "\nibpanic: [4321] main: stat of IB device 'mlx5_9' failed: No such file or directory\n"
    cas = ibstat.parse_ibstat(text)
    assert [ca["ports"][0]["rate"] for ca in cas[:3]] == [2.5, 800, 100]
    assert {ca["ca_type"] for ca in cas} == {None}
    assert {port["link_layer"] for ca in cas for port in ca["ports"]} == {"InfiniBand"}
    assert not any(port["link_layer_reported"] for ca in cas for port in ca["ports"])
    assert cas[0]["ports"][0]["state"] == "Armed"
    assert "mlx5_0:1" not in ibstat.active_ports(cas)["InfiniBand"]


@pytest.mark.parametrize(
    ("text", "line_number", "reason"),
    [
        ("\tPort 1:\n", 1, "Port before any CA"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tRate: fast\n", 4, "Rate is not a number"),
        ("CA 'mlx5_0'\n\tNumber of ports: 2\n\tPort 1:\n\t\tState: Active\n", 4, "declares 2 port"),
        ("CA 'mlx5_0'\n\t\tState: Active\n", 2, "outside of a Port block"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Sleeping\n", 3, "unknown port state"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tRate: 100\n", 3, "has no State"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\tgarbage\n", 4, "not a CA, Port"),
        ("CA 'mlx5_0'\nCA 'mlx5_0'\n", 2, "listed twice"),
    ],
)
def test_ibstat_malformed_names_the_line(text, line_number, reason):
    with pytest.raises(ParseError, match=reason) as caught:
        ibstat.parse_ibstat(text)
    assert caught.value.line_number == line_number
    assert caught.value.command == "ibstat"


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_ibstat_and_ibdev2netdev_of_every_gpusim_profile(name):
    summary = profile_summary(name)
    cas = ibstat.parse_ibstat((GPUSIM / "profiles" / name / "ibstat.txt").read_text())
    by_name = {ca["name"]: ca["ports"][0] for ca in cas}
    for nic in summary["nics"]:
        port = by_name[nic["name"]]
        assert (port["state"], port["link_layer"]) == (nic["state"], nic["link_layer"])
        if port["state"] == "Active":  # a Down port shows the rate it would fall back to
            assert port["rate"] == nic["rate"]
    netdevs = ibstat.parse_ibdev2netdev((GPUSIM / "profiles" / name / "ibdev2netdev.txt").read_text())
    assert {entry["ca"]: entry["netdev"] for entry in netdevs} == {
        nic["name"]: nic["netdev"] for nic in summary["nics"]
    }


def test_ibdev2netdev_real_captures():
    entries = ibstat.parse_ibdev2netdev(fixture("ibdev2netdev", "dgx2_nfs_client_cx5_10_mlx5_ib0_ib9_two_down.txt"))
    assert len(entries) == 10
    assert entries[4] == {"ca": "mlx5_4", "port": 1, "netdev": "ib4", "state": "Down"}
    entries = ibstat.parse_ibdev2netdev(fixture("ibdev2netdev", "cx5_roce_2_ports_enp4s0f0np0_up.txt"))
    assert [entry["netdev"] for entry in entries] == ["enp4s0f0np0", "enp4s0f1np1"]
    with pytest.raises(ParseError, match="ibdev2netdev") as caught:
        ibstat.parse_ibdev2netdev("mlx5_0 port 1 ==> ib0 (Up)\nmlx5_1 -> ib1\n")
    assert caught.value.line_number == 2


# --------------------------------------------------------------------------------------------
# lspci


def test_lspci_azure_a100_with_hyperv_domains():
    devices = pci.parse_lspci(
        fixture("lspci", "lspci_nn_azure_ndm_a100_v4_8gpu_nvswitch_1af1_cx6_vf_hyperv_domains.txt")
    )
    found = pci.classify(devices)
    assert len(found["gpus"]) == 8 and {gpu["slug"] for gpu in found["gpus"]} == {"a100"}
    assert {(gpu["architecture"], gpu["compute_capability"]) for gpu in found["gpus"]} == {("ampere", "8.0")}
    assert found["gpus"][0]["pci_bus_id"] == "0001:00:00.0"
    assert len(found["nvswitches"]) == 6
    assert {device["device_id"] for device in found["nvswitches"]} == {"1af1"}
    assert found["hcas"] and all(hca["virtual_function"] for hca in found["hcas"])


def test_lspci_v100_with_old_generic_names():
    found = pci.classify(
        pci.parse_lspci(fixture("lspci", "lspci_nn_grep_nvidia_8x_v100_1db1_plus_3_nvswitch_1ac1_bridges.txt"))
    )
    assert [gpu["slug"] for gpu in found["gpus"]] == ["v100"] * 8
    assert found["gpus"][0]["model"] == "Tesla V100 SXM2 16GB"
    assert found["gpus"][0]["pci_bus_id"] == "0000:08:00.0"
    assert len(found["nvswitches"]) == 3


def test_lspci_kvm_guest_a10():
    found = pci.classify(pci.parse_lspci(fixture("lspci", "lspci_nn_kvm_vm_a10_mlx5_vf.txt")))
    (gpu,) = found["gpus"]
    assert (gpu["slug"], gpu["architecture"], gpu["compute_capability"]) == ("a10", "ampere", "8.6")
    (hca,) = found["hcas"]
    assert hca["virtual_function"] and hca["device_id"] == "101e"


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_lspci_of_every_gpusim_profile(name):
    summary = profile_summary(name)
    found = pci.classify(pci.parse_lspci((GPUSIM / "profiles" / name / "lspci-Dnn.txt").read_text()))
    assert [gpu["pci_bus_id"] for gpu in found["gpus"]] == summary["gpu_pci_bus_ids"]
    assert len(found["nvswitches"]) == summary["nvswitch_count"]


def test_lspci_other_formats():
    text = (
        '0000:53:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GH100 [H100 SXM5 80GB] [2330]" -ra1 '
        '"NVIDIA Corporation [10de]" "Device [16c1]"\n'
        '0000:54:00.0 "0302" "10de" "2335" -ra1 "10de" "18be"\n'
        "55:00.0 0302: 10de:2901 (rev a1)\n"
    )
    found = pci.classify(pci.parse_lspci(text))
    assert [gpu["slug"] for gpu in found["gpus"]] == ["h100", "h200", "b200"]
    assert found["gpus"][0]["device_name"] == "GH100 [H100 SXM5 80GB]"
    assert found["gpus"][2]["pci_bus_id"] == "0000:55:00.0"


@pytest.mark.parametrize(
    ("text", "line_number", "reason"),
    [
        ("0000:53:00.0 3D controller\n", 1, "not an lspci"),
        ("53:00.0 0302: 10de:2330\n53:00.0 0302: 10de:2330\n", 2, "listed twice"),
        ('0000:53:00.0 "3D controller" "NVIDIA Corporation" "GH100"\n', 1, "needs -n"),
    ],
)
def test_lspci_malformed(text, line_number, reason):
    with pytest.raises(ParseError, match=reason) as caught:
        pci.parse_lspci(text)
    assert caught.value.line_number == line_number


@pytest.mark.parametrize(
    ("device_id", "slug", "architecture", "capability"),
    [
        ("1db1", "v100", "volta", "7.0"),
        ("1eb8", "t4", "turing", "7.5"),
        ("20b2", "a100", "ampere", "8.0"),
        ("20b7", "a30", "ampere", "8.0"),
        ("2236", "a10", "ampere", "8.6"),
        ("26b9", "l40s", "ada", "8.9"),
        ("27b8", "l4", "ada", "8.9"),
        ("2330", "h100", "hopper", "9.0"),
        ("2335", "h200", "hopper", "9.0"),
        ("2342", "gh200", "hopper", "9.0"),
        ("2901", "b200", "blackwell", "10.0"),
        ("2941", "gb200", "blackwell", "10.0"),
        ("3182", "b300", "blackwell", "10.3"),
        ("2bb5", "rtx_pro_6000", "blackwell", "12.0"),
    ],
)
def test_device_table_v100_to_b300(device_id, slug, architecture, capability):
    known = pci.identify_gpu(device_id)
    assert known["known"]
    assert (known["slug"], known["architecture"], known["compute_capability"]) == (slug, architecture, capability)


def test_unknown_device_falls_back_to_the_chip_in_its_name():
    known = pci.identify_gpu("25b6", "GA107GL [A2 / A16]")
    assert not known["known"]
    assert (known["slug"], known["architecture"], known["compute_capability"]) == ("a2_a16", "ampere", "8.6")
    assert pci.identify_gpu("ffff", None)["slug"] is None


def test_bus_ids_normalise():
    assert pci.normalize_bus_id("00000000:1E:00.0") == "0000:1e:00.0"
    assert pci.normalize_bus_id("53:00.0") == "0000:53:00.0"
    assert pci.normalize_bus_id("f392:00:00.0") == "f392:00:00.0"
