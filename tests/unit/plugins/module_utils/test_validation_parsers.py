# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation parsers on real captures (tests/unit/fixtures, each with its source) and on
edits of them for the variants no public capture shows (each named as an edit)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import dcgm, ibstat, nccl_tests, nvidia_smi, slurm
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from conftest import fixture, fixtures

# --- nvidia-smi nvlink -s ---------------------------------------------------------------------


def test_nvlink_a100_twelve_links_at_25():
    gpus = nvidia_smi.parse_nvlink_status(fixture("nvlink", "a100_sxm4_40gb_gpu0_12links_25gbs.txt"))
    assert list(gpus) == [0]
    assert gpus[0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert gpus[0]["uuid"] == "GPU-fde0a018-ad1a-bbec-ccf6-50a9f64bd178"
    assert gpus[0]["links"] == [25.0] * 12


def test_nvlink_inactive_links_are_none_in_link_order():
    gpus = nvidia_smi.parse_nvlink_status(fixture("nvlink", "v100_sxm2_32gb_gpu3_links_3_5_inactive_uuid_redacted.txt"))
    assert gpus[3]["links"] == [25.781, 25.781, 25.781, None, 25.781, None]


def test_nvlink_two_gpus_and_gb200():
    two = nvidia_smi.parse_nvlink_status(fixture("nvlink", "rtx3090_2gpu_4links_14gbs_redacted_uuid.txt"))
    assert sorted(two) == [0, 1] and two[1]["links"] == [14.062] * 4
    gb200 = nvidia_smi.parse_nvlink_status(fixture("nvlink", "gb200_gpu0_18links_53gbs.txt"))
    assert gb200[0]["links"] == [53.125] * 18


def test_nvlink_empty_output_of_a_vm_is_no_gpus():
    assert (
        nvidia_smi.parse_nvlink_status(fixture("nvlink", "h100_vm_1gpu_no_nvlink_empty_output_device_capture.txt"))
        == {}
    )


def test_nvlink_crlf_edit_parses_the_same():
    text = fixture("nvlink", "a100_sxm4_40gb_gpu0_12links_25gbs.txt")
    assert nvidia_smi.parse_nvlink_status(text.replace("\n", "\r\n")) == nvidia_smi.parse_nvlink_status(text)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("Link 3: 25 GB/s", "Link 3: fast"), "Link 3: fast"),
        (lambda t: t.replace("Link 5:", "Link 7:"), "link 7 follows link 4"),
        (lambda t: t.split("\n", 1)[1], "a link before any GPU"),
    ],
)
def test_nvlink_bad_lines_are_named(edit, message):
    with pytest.raises(ParseError) as error:
        nvidia_smi.parse_nvlink_status(edit(fixture("nvlink", "a100_sxm4_40gb_gpu0_12links_25gbs.txt")))
    assert message in str(error.value) and "nvidia-smi nvlink -s" in str(error.value)


# --- nvidia-smi --query-gpu --format=csv ------------------------------------------------------


def test_query_csv_units_and_numbers():
    rows = nvidia_smi.parse_query_csv(fixture("smi_csv", "a100_pcie_2gpu_units_header.txt"))
    assert len(rows) == 2
    assert rows[0]["memory.total"] == 40960 and rows[0]["utilization.gpu"] == 0
    assert rows[1]["pci.bus_id"] == "00000000:8A:00.0" and rows[1]["vbios_version"] == "92.00.25.00.08"


def test_query_csv_device_capture_health_fields():
    (row,) = nvidia_smi.parse_query_csv(
        fixture("smi_csv", "h100_vm_1gpu_health_fields_na_bracketed_device_capture.txt")
    )
    assert row["retired_pages.pending"] is None  # [N/A]
    assert row["remapped_rows.pending"] == "No"
    assert (row["pcie.link.gen.current"], row["pcie.link.width.max"]) == (5, 16)
    assert row["driver_version"] == "580.159.04" and row["memory.total"] == 81559


def test_query_csv_noheader_needs_the_field_list():
    fields = (
        "index,name,pcie.link.gen.gpucurrent,pcie.link.gen.max,pcie.link.gen.hostmax,pcie.link.width.current,"
        "pcie.link.width.max,persistence_mode,ecc.mode.current,memory.total"
    ).split(",")
    text = fixture("smi_csv", "h100_vm_1gpu_noheader_nounits_pcie_hostmax_na_device_capture.txt")
    (row,) = nvidia_smi.parse_query_csv(text, fields)
    assert row["pcie.link.gen.hostmax"] is None and row["memory.total"] == 81559
    assert row["persistence_mode"] == "Enabled"


def test_query_csv_all_captures_parse():
    for path in fixtures("smi_csv"):
        if "noheader" not in path.name:
            assert nvidia_smi.parse_query_csv(path.read_text()), path.name


def test_query_csv_short_row_is_named():
    text = fixture("smi_csv", "l40s_8gpu_index_name_busid_mem_driver.txt")
    with pytest.raises(ParseError, match="4 values where the header has 5 fields") as error:
        nvidia_smi.parse_query_csv(text.replace(", 580.178.04\n3,", "\n3,", 1))
    assert error.value.line_number == 4


# --- nccl-tests -------------------------------------------------------------------------------


def test_nccl_tests_h100_two_nodes_largest_row_not_the_average():
    result = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_h100_a3mega_2node_16rank_wrong_root_format_no_final_hash.txt")
    )
    assert result["nranks"] == 16 and result["test"] is None
    assert len(result["rows"]) == 31 and result["rows"][0]["size"] == 8
    largest = nccl_tests.largest(result)
    assert largest["size"] == 8589934592
    assert largest["oop"] == {"time_us": 47535.0, "algbw": 180.71, "busbw": 338.82, "wrong": 0}
    assert largest["ip"]["busbw"] == 337.35
    assert result["avg_busbw"] == 70.742  # the average over every size: far below the largest
    assert result["out_of_bounds"] == 0 and nccl_tests.wrong_rows(result) == []


def test_nccl_tests_2_18_wide_wrong_column_and_test_name():
    result = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_gh200_2node_4gpu_int8_nccl_tests_2_18_header_concluded_wide_wrong.txt")
    )
    assert result["test"] == "all_reduce_perf" and result["nranks"] == 8
    assert result["rows"][-1]["type"] == "int8" and result["rows"][-1]["oop"]["busbw"] == 101.70


def test_nccl_tests_old_error_column():
    result = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_4x_dgx_a100_old_error_format_table_only_no_banner.txt")
    )
    assert result["nranks"] is None
    assert result["rows"][0]["oop"]["wrong"] == 7e-07
    assert nccl_tests.largest(result)["oop"]["busbw"] == 191.05
    assert nccl_tests.wrong_rows(result) == []
    edited = fixture("nccl_tests", "all_reduce_4x_dgx_a100_old_error_format_table_only_no_banner.txt").replace(
        "191.05  1e-06", "191.05  2e-01"
    )
    assert [row["size"] for row in nccl_tests.wrong_rows(nccl_tests.parse_nccl_tests(edited))] == [4294967296]


def test_nccl_tests_single_node_captures():
    one = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_a100_40gb_1node_8rank_mpirun_collective_test_starting_concluded.txt")
    )
    assert one["nranks"] == 8 and nccl_tests.largest(one)["oop"]["busbw"] == 232.20
    v100 = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_v100_sxm2_16gb_1node_8gpu_single_thread_g8_1g_only.txt")
    )
    assert v100["nranks"] == 8 and v100["avg_busbw"] == 135.455


def test_nccl_tests_wrong_count_is_found():
    text = fixture("nccl_tests", "all_reduce_v100_sxm2_16gb_1node_8gpu_single_thread_g8_1g_only.txt")
    edited = text.replace("135.50      0", "135.50     12")
    assert len(nccl_tests.wrong_rows(nccl_tests.parse_nccl_tests(edited))) == 1


def test_nccl_tests_launcher_preamble_tags_and_crlf_edit():
    """Edit: srun and NCCL INFO lines before the table, OpenMPI's --tag-output prefix, CRLF."""
    text = fixture("nccl_tests", "all_reduce_a100_40gb_1node_8rank_mpirun_collective_test_starting_concluded.txt")
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in text.split("\n"))
    preamble = "srun: job 42 queued and waiting for resources\nnode1:123:123 [0] NCCL INFO Bootstrap : Using eth0\n"
    result = nccl_tests.parse_nccl_tests((preamble + tagged).replace("\n", "\r\n"))
    assert result["nranks"] == 8 and nccl_tests.largest(result)["oop"]["busbw"] == 232.20


def test_nccl_tests_in_place_not_available_edit():
    text = fixture("nccl_tests", "all_reduce_v100_sxm2_16gb_1node_8gpu_single_thread_g8_1g_only.txt")
    edited = text.replace("13877   77.38  135.41      0", "  N/A     N/A     N/A    N/A")
    row = nccl_tests.parse_nccl_tests(edited)["rows"][0]
    assert row["ip"] == {"time_us": None, "algbw": None, "busbw": None, "wrong": None}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# nThread 1 nGpus 8\nTest NCCL failure common.cu:1005 'unhandled system error'\n", "no result table"),
        (
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw "
            "  busbw #wrong\n",
            "has no rows",
        ),
        (
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw "
            "  busbw #wrong\n  1024  256  float  sum  -1  12.0  0.08\n",
            "7 values where the table header has 13",
        ),
    ],
)
def test_nccl_tests_refusals_name_the_command(text, message):
    with pytest.raises(ParseError, match=message) as error:
        nccl_tests.parse_nccl_tests(text)
    assert "nccl-tests" in str(error.value)


# --- dcgmi diag -------------------------------------------------------------------------------


def test_dcgmi_table_r1():
    result = dcgm.parse_dcgmi_diag(fixture("dcgmi_diag", "r1_dcgm3_3_9_v100_pcie_1gpu_metadata_deployment_only.txt"))
    assert [t["name"] for t in result["tests"]][:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert len(result["tests"]) == 9 and result["passed"] and result["error"] is None


def test_dcgmi_table_wrapped_info_joins_back():
    result = dcgm.parse_dcgmi_diag(fixture("dcgmi_diag", "r2_verbose_dcgm3_3_9_v100_pcie_1gpu_wrapped_info_rows.txt"))
    pcie = next(t for t in result["tests"] if t["name"] == "PCIe")
    assert pcie["result"] == "Pass"  # "Pass - All"
    assert "GPU 0 GPU to Host latency: 2.078 us" in pcie["info"]
    assert "bidirectional latency: 3.957 us" in pcie["info"]


def test_dcgmi_table_failed_test_edit():
    text = fixture("dcgmi_diag", "r2_verbose_dcgm3_3_9_v100_pcie_1gpu_wrapped_info_rows.txt")
    edited = text.replace(
        "| GPU Memory                | Pass - All    ", "| GPU Memory                | Fail - GPU: 0 "
    )
    result = dcgm.parse_dcgmi_diag(edited)
    assert not result["passed"]
    assert [t["name"] for t in result["tests"] if t["result"] == "Fail"] == ["GPU Memory"]


def _dcgm4_document(memory_status="Pass"):
    """A DCGM 4 document in the shape of DCGM's dcgm_diag_schema.json (not a capture)."""
    return {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "software",
                            "results": [
                                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}
                            ],
                            "test_summary": {"status": "Pass"},
                        }
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "memory",
                            "results": [
                                {
                                    "entity_group": "GPU",
                                    "entity_group_id": 1,
                                    "entity_id": 0,
                                    "status": memory_status,
                                    "warnings": [
                                        {
                                            "error_category": 1,
                                            "error_id": 12,
                                            "error_severity": 2,
                                            "warning": "Memory error found on GPU 0",
                                        }
                                    ]
                                    if memory_status == "Fail"
                                    else [],
                                }
                            ],
                            "test_summary": {"status": memory_status},
                        }
                    ],
                },
            ]
        },
        "metadata": {"version": "4.2.3", "Driver Version Detected": "580.82.09"},
    }


def test_dcgmi_json_dcgm4_pass_and_fail():
    passed = dcgm.parse_dcgmi_diag(json.dumps(_dcgm4_document(), indent=4))
    assert passed["passed"] and [t["name"] for t in passed["tests"]] == ["software", "memory"]
    failed = dcgm.parse_dcgmi_diag(json.dumps(_dcgm4_document("Fail")))
    assert not failed["passed"]
    assert failed["tests"][1] == {"name": "memory", "result": "Fail", "info": "Memory error found on GPU 0"}


def test_dcgmi_json_dcgm3_shape_takes_the_worst_gpu():
    document = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Integration",
                    "tests": [
                        {
                            "name": "PCIe",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {"gpu_id": "1", "status": "Fail", "warnings": ["PCIe replay"]},
                            ],
                        }
                    ],
                }
            ]
        }
    }
    result = dcgm.parse_dcgmi_diag("Some launcher line\n" + json.dumps(document))
    assert result["tests"] == [{"name": "PCIe", "result": "Fail", "info": "PCIe replay"}]


def test_dcgmi_error_line_is_a_finding_not_a_parse_error():
    result = dcgm.parse_dcgmi_diag("Error: Unable to connect to host engine at localhost.\n")
    assert result == {"tests": [], "passed": False, "error": "Error: Unable to connect to host engine at localhost."}


def test_dcgmi_json_runtime_error_is_not_a_pass():
    result = dcgm.parse_dcgmi_diag(json.dumps({"DCGM Diagnostic": {"runtime_error": "The GPU is busy"}}))
    assert result == {"tests": [], "passed": False, "error": "The GPU is busy"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Successfully ran diagnostic for group.\n", "no test results"),
        ('{"DCGM Diagnostic": {"test_categories": [', "malformed JSON"),
        ('{"other": 1}', "no 'DCGM Diagnostic'"),
        ("+----+----+\n| Memory | Maybe |\n", "not Pass, Fail, Warn or Skip"),
    ],
)
def test_dcgmi_refusals(text, message):
    with pytest.raises(ParseError, match=message) as error:
        dcgm.parse_dcgmi_diag(text)
    assert "dcgmi diag" in str(error.value)


# --- slurmd -C --------------------------------------------------------------------------------


def test_slurmd_c_captures():
    las3 = slurm.parse_slurmd_config(
        fixture("slurmd_C", "slurm24_las3_vm_1x_l40s_gres_autodetect_nvml_found_line_uptime.txt")
    )
    assert las3 == {
        "NodeName": "las3",
        "CPUs": 8,
        "Boards": 1,
        "SocketsPerBoard": 8,
        "CoresPerSocket": 1,
        "ThreadsPerCore": 1,
        "RealMemory": 7935,
        "Gres": "gpu:nvidia_l40s:1",
    }
    tensei = slurm.parse_slurmd_config(
        fixture("slurmd_C", "slurm25_11_tenseinode1_8x_a100_sxm4_80gb_autodetect_nvidia_no_uptime.txt")
    )
    assert tensei["CPUs"] == 128 and tensei["ThreadsPerCore"] == 2 and tensei["RealMemory"] == 2063878


def test_slurmd_c_compare_against_the_generated_line():
    measured = slurm.parse_slurmd_config(
        fixture("slurmd_C", "slurm25_11_tenseinode1_8x_a100_sxm4_80gb_autodetect_nvidia_no_uptime.txt")
    )
    headroom = 2063878 - slurm.real_memory(2063878, 5, 1024)
    declared = dict(measured, RealMemory=2063878 - headroom)
    assert slurm.compare_node(declared, measured, headroom) == []
    assert slurm.compare_node(dict(declared, ThreadsPerCore=1), measured, headroom) == [
        {"key": "ThreadsPerCore", "declared": 1, "measured": 2}
    ]
    too_much = slurm.compare_node(dict(declared, RealMemory=2063879), measured, headroom)
    assert too_much == [{"key": "RealMemory", "declared": 2063879, "measured": 2063878}]
    assert slurm.compare_node(dict(declared, RealMemory=1000000), measured, headroom)[0]["key"] == "RealMemory"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("UpTime=1-02:27:56\n", "no NodeName= line"),
        ("NodeName=a CPUs=x RealMemory=1\n", "CPUs is not a number"),
        ("NodeName=a CPUs=²\n", "CPUs is not a number"),
        ("NodeName=a CPUs=2\n", "has no RealMemory"),
    ],
)
def test_slurmd_c_refusals(text, message):
    with pytest.raises(ParseError, match=message):
        slurm.parse_slurmd_config(text)


# --- ibv_devinfo and ibstatus -----------------------------------------------------------------


def test_ibv_devinfo_h100_node():
    hcas = ibstat.parse_ibv_devinfo(
        fixture("ibv_devinfo", "h100_node_dell_cx7_8_ib_hcas_nonconsecutive_mlx5_names.txt")
    )
    assert [h["hca_id"] for h in hcas] == [
        "mlx5_0",
        "mlx5_3",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_9",
        "mlx5_10",
        "mlx5_11",
    ]
    assert {h["fw_ver"] for h in hcas} == {"28.41.1000"} and {h["vendor_part_id"] for h in hcas} == {4129}
    assert hcas[0]["ports"] == [
        {"port": 1, "state": "PORT_ACTIVE", "link_layer": "InfiniBand", "active_mtu": 4096, "max_mtu": 4096}
    ]


def test_ibv_devinfo_device_ports_header_and_two_ports():
    (hca,) = ibstat.parse_ibv_devinfo(
        fixture("ibv_devinfo", "mlx4_cx3_roce_dualport_both_active_device_ports_header.txt")
    )
    assert hca["board_id"] == "MT_1090110023" and [p["port"] for p in hca["ports"]] == [1, 2]
    assert hca["ports"][1]["active_mtu"] == 1024 and hca["ports"][1]["link_layer"] == "Ethernet"


def test_ibv_devinfo_port_down_edit_and_refusal():
    text = fixture("ibv_devinfo", "h100_node_dell_cx7_8_ib_hcas_nonconsecutive_mlx5_names.txt")
    hcas = ibstat.parse_ibv_devinfo(text.replace("PORT_ACTIVE (4)", "PORT_DOWN (1)", 1))
    assert hcas[0]["ports"][0]["state"] == "PORT_DOWN"
    with pytest.raises(ParseError, match="unknown port state") as error:
        ibstat.parse_ibv_devinfo(text.replace("PORT_ACTIVE (4)", "ACTIVE-ish", 1))
    assert error.value.line_number == 12


def test_ibstatus_azure_a100():
    ports = ibstat.parse_ibstatus(fixture("ibstatus", "a100_azure_8x_ib_hdr200_plus_eth_gid_unknown.txt"))
    assert len(ports) == 9
    assert ports[0] == {
        "name": "mlx5_0",
        "port": 1,
        "state": "ACTIVE",
        "phys_state": "LinkUp",
        "rate": 200,
        "link_layer": "InfiniBand",
    }
    assert ports[-1]["rate"] == 40 and ports[-1]["link_layer"] == "Ethernet"


def test_ibstatus_half_rate_edit():
    text = fixture("ibstatus", "a100_azure_8x_ib_hdr200_plus_eth_gid_unknown.txt")
    ports = ibstat.parse_ibstatus(text.replace("200 Gb/sec (4X HDR)", "100 Gb/sec (2X HDR)", 1))
    assert ports[0]["rate"] == 100 and ports[1]["rate"] == 200


def test_ibstatus_refusal_names_the_line():
    with pytest.raises(ParseError, match="rate is not 'N Gb/sec'") as error:
        ibstat.parse_ibstatus("Infiniband device 'mlx5_0' port 1 status:\n\trate:\t fast\n")
    assert error.value.line_number == 2 and "ibstatus" in str(error.value)


def test_compute_apps_one_row_per_process_and_gpu_and_names_with_commas():
    rows = nvidia_smi.parse_compute_apps(fixture("compute_apps", "constructed_two_processes_na_memory.txt"))
    assert [(r["pid"], r["used_memory"]) for r in rows] == [(4242, 70144), (4242, 70144), (5150, None)]
    assert rows[2]["process_name"] == "/opt/apps/train, run 2/bin/worker"
    assert (
        nvidia_smi.parse_compute_apps("") == [] and nvidia_smi.parse_compute_apps("No running processes found\n") == []
    )
    with pytest.raises(ParseError) as error:
        nvidia_smi.parse_compute_apps("²42, GPU-x, 1 MiB, a\n")
    assert "nvidia-smi --query-compute-apps" in str(error.value) and "line 1" in str(error.value)


# --- MIG (DESIGN "MIG parsers") -------------------------------------------------------------------
def test_mig_profiles_h100_device_capture_and_a30_me_variants():
    h100 = nvidia_smi.parse_mig_profiles(fixture("mig", "h100_80gb_lgip_7_profiles_mig_disabled_device_capture.txt"))
    assert [(p["name"], p["id"], p["total"]) for p in h100] == [
        ("1g.10gb", 19, 7),
        ("1g.10gb+me", 20, 1),
        ("1g.20gb", 15, 4),
        ("2g.20gb", 14, 3),
        ("3g.40gb", 9, 2),
        ("4g.40gb", 5, 1),
        ("7g.80gb", 0, 1),
    ]
    assert h100[-1] == {"gpu": 0, "name": "7g.80gb", "id": 0, "free": 1, "total": 1, "memory_gib": 79.25}
    a30 = nvidia_smi.parse_mig_profiles(fixture("mig", "a30_lgip_5_profiles_with_me_variants.txt"))
    assert [p["name"] for p in a30] == ["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"]
    assert nvidia_smi.parse_mig_profiles("No MIG-capable devices found.\n") == []


def test_mig_instances_and_the_real_nothing_found_answers():
    rows = nvidia_smi.parse_mig_instances(fixture("mig", "a30_lgi_3_instances_1g_1g_2g.txt"))
    assert rows == [
        {"gpu": 0, "name": "1g.6gb", "profile_id": 14, "instance_id": 3, "placement": {"start": 0, "size": 1}},
        {"gpu": 0, "name": "1g.6gb", "profile_id": 14, "instance_id": 4, "placement": {"start": 1, "size": 1}},
        {"gpu": 0, "name": "2g.12gb", "profile_id": 5, "instance_id": 2, "placement": {"start": 2, "size": 2}},
    ]
    assert nvidia_smi.parse_mig_instances(fixture("mig", "a30_lgi_no_instances_not_found.txt")) == []
    disabled = fixture("mig", "h100_lgi_mig_disabled_no_mig_enabled_devices_device_capture.txt")
    assert nvidia_smi.parse_mig_instances(disabled) == []


def test_mig_placements_h100_device_capture():
    rows = nvidia_smi.parse_mig_placements(fixture("mig", "h100_80gb_lgipp_placements_device_capture.txt"))
    assert {r["profile_id"]: (r["starts"], r["size"]) for r in rows} == {
        19: ([0, 1, 2, 3, 4, 5, 6], 1),
        20: ([0, 1, 2, 3, 4, 5, 6], 1),
        15: ([0, 2, 4, 6], 2),
        14: ([0, 2, 4], 2),
        9: ([0, 4], 4),
        5: ([0], 4),
        0: ([0], 8),
    }


def test_mig_compute_instances_two_in_one_gpu_instance_and_the_older_layout():
    rows = nvidia_smi.parse_mig_compute_instances(fixture("mig", "a100_40gb_lci_4_instances_two_1c_in_one_gi.txt"))
    assert [(r["gpu_instance_id"], r["name"], r["profile_id"], r["instance_id"]) for r in rows] == [
        (9, "1g.5gb", 0, 0),
        (3, "1c.2g.10gb", 0, 0),
        (3, "1c.2g.10gb", 0, 1),
        (2, "4g.20gb", 3, 0),
    ]
    assert rows[1]["placement"] == {"start": 0, "size": 1} and rows[3]["placement"] == {"start": 0, "size": 4}
    old = nvidia_smi.parse_mig_compute_instances(fixture("mig", "a100_lci_old_layout_no_placement_column.txt"))
    assert [(r["gpu_instance_id"], r["instance_id"], r["placement"]) for r in old] == [
        (1, 0, None),
        (1, 1, None),
        (1, 2, None),
    ]
    assert nvidia_smi.parse_mig_compute_instances("No compute instances found: Not Found\n") == []
    disabled = fixture("mig", "h100_lgi_mig_disabled_no_mig_enabled_devices_device_capture.txt")
    assert nvidia_smi.parse_mig_compute_instances(disabled) == []
    # The GPU instances of the same A100: each compute instance lives in one of them.
    gis = nvidia_smi.parse_mig_instances(fixture("mig", "a100_40gb_lgi_3_instances_4g_2g_1g.txt"))
    assert {r["gpu_instance_id"] for r in rows} == {g["instance_id"] for g in gis}


@pytest.mark.parametrize(
    ("parser", "text", "command"),
    [
        (nvidia_smi.parse_mig_compute_instances, "|   0   3   MIG 1c.2g.10gb   0   x   |\n", "nvidia-smi mig -lci"),
        (nvidia_smi.parse_mig_profiles, "|   0  MIG 1g.10gb  19  7/x  9.75  No  16  1  0  |\n", "nvidia-smi mig -lgip"),
        (nvidia_smi.parse_mig_instances, "|   0  MIG 1g.6gb  14  3  0-1  |\n", "nvidia-smi mig -lgi"),
        (nvidia_smi.parse_mig_instances, "Failed to list GPU instances\n", "nvidia-smi mig -lgi"),
        (nvidia_smi.parse_mig_placements, "GPU  0 Profile ID 19 Placements: 0,1:1\n", "nvidia-smi mig -lgipp"),
    ],
)
def test_mig_refusals_name_the_command_and_the_line(parser, text, command):
    with pytest.raises(ParseError) as error:
        parser(text)
    assert command in str(error.value) and "line 1" in str(error.value)


def test_nccl_tests_rank_lines_without_group_are_counted():
    result = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_reduce_v100_pcie_4gpu_nccl_2_4_rank_lines_without_group_g4.txt")
    )
    assert result["nranks"] == 4 and result["complete"]
    assert result["max_bytes"] == 134217728 and result["step"] == {"factor": 2}
    assert nccl_tests.largest(result)["size"] == 134217728 and nccl_tests.reached_max(result)


NCCL_CAPTURES = sorted(p.name for p in fixtures("nccl_tests"))


@pytest.mark.parametrize("name", NCCL_CAPTURES)
def test_every_nccl_capture_is_complete_and_reaches_its_max(name):
    result = nccl_tests.parse_nccl_tests(fixture("nccl_tests", name))
    assert result["complete"] and nccl_tests.reached_max(result)


@pytest.mark.parametrize("name", NCCL_CAPTURES)
def test_a_capture_cut_after_some_size_is_not_complete(name):
    """Edit: the output as it stands when the run is killed half-way through its table."""
    lines = fixture("nccl_tests", name).split("\n")
    rows = [i for i, line in enumerate(lines) if line.split("<stdout>:")[-1].strip()[:1].isdigit()]
    cut = "\n".join(lines[: rows[len(rows) // 2] + 1]) + "\n"
    result = nccl_tests.parse_nccl_tests(cut)
    assert not result["complete"]


def test_nvlink_a_gpu_with_every_link_inactive_is_read_not_refused():
    """NVML's message in place of a GPU's Link lines, alone and (edit) after another GPU's links."""
    alone = fixture("nvlink", "b200_gpu2_all_links_inactive_nvml_message_uuid_redacted.txt")
    assert nvidia_smi.parse_nvlink_status(alone) == {
        2: {"name": "NVIDIA B200", "uuid": "GPU-xxx", "links": [], "all_inactive": True}
    }
    both = fixture("nvlink", "gb200_gpu0_18links_53gbs.txt").rstrip("\n") + "\n" + alone
    status = nvidia_smi.parse_nvlink_status(both)
    assert len(status[0]["links"]) == 18 and "all_inactive" not in status[0] and status[2]["all_inactive"]
    with pytest.raises(ParseError, match="follows no GPU line"):
        nvidia_smi.parse_nvlink_status(alone.split("\n", 1)[1])


def test_nccl_tests_under_skypilot_prefixes_in_front_of_openmpi_tags():
    result = nccl_tests.parse_nccl_tests(
        fixture("nccl_tests", "all_gather_h200_gke_2node_16rank_skypilot_head_prefix_before_mpi_tag.txt")
    )
    assert result["nranks"] == 16 and result["complete"] and nccl_tests.reached_max(result)
    assert nccl_tests.largest(result)["size"] == 8589934592 and nccl_tests.largest(result)["ip"]["busbw"] == 332.58


@pytest.mark.parametrize(
    "prefix",
    [
        "0: ",  # srun --label
        "  0: ",  # srun --label with more than 10 tasks pads the number
        "[pod/nccl-test-host-1/nccl] ",  # kubectl logs --prefix
        "[pod/nccl-test-host-1/nccl] [1,0]<stdout>:",
        "(head, rank=0, pid=3808) ",  # Ray or SkyPilot without OpenMPI's tag
        "0: [1,0]<stdout>:",
    ],
)
def test_nccl_tests_launcher_prefixes_edit(prefix):
    """Edit of a real single-node capture: each line as the launcher prints it."""
    text = fixture("nccl_tests", "all_reduce_a100_40gb_1node_8rank_mpirun_collective_test_starting_concluded.txt")
    result = nccl_tests.parse_nccl_tests("\n".join(prefix + line for line in text.split("\n")))
    assert result["nranks"] == 8 and result["complete"] and nccl_tests.largest(result)["oop"]["busbw"] == 232.20


def test_ibv_devinfo_verbose_flag_lines_are_read_not_refused():
    (hca,) = ibstat.parse_ibv_devinfo(fixture("ibv_devinfo", "cx5_mlx5_1_verbose_cap_flag_lines_cut_before_ports.txt"))
    assert (hca["hca_id"], hca["fw_ver"], hca["vendor_part_id"], hca["board_id"]) == (
        "mlx5_1",
        "16.23.1020",
        4119,
        "MT_0000000008",
    )
    # An unindented line that is no field is still refused.
    with pytest.raises(ParseError, match="not a 'key: value' line"):
        ibstat.parse_ibv_devinfo("hca_id:\tmlx5_1\nBAD_PKEY_CNTR\n")


# dcgmi health -c -j (fixtures built from DCGM's source: fixtures/SOURCES.md)


def test_dcgmi_health_reads_each_incident_with_its_wrapped_message_joined():
    assert dcgm.parse_dcgmi_health(fixture("dcgmi_health", "healthy_dcgm4.json")) == {
        "watches": True,
        "overall": "Healthy",
        "incidents": [],
    }
    result = dcgm.parse_dcgmi_health(fixture("dcgmi_health", "failures_gpu0_gpu5_dcgm4.json"))
    assert result["overall"] == "Failure"
    assert [(i["entity"], i["system"], i["health"]) for i in result["incidents"]] == [
        ("GPU 0", "Memory system", "Failure"),
        ("GPU 5", "NVLINK system", "Failure"),
        ("GPU 5", "Thermal system", "Warning"),
    ]
    assert result["incidents"][1]["message"] == (
        "GPU 5's NvLink link 3 is currently down, GPU 5's NvLink link 7 is currently down"
    )
    warning = dcgm.parse_dcgmi_health(fixture("dcgmi_health", "pcie_warning_gpu2_dcgm4.json"))
    assert warning["incidents"] == [
        {
            "entity": "GPU 2",
            "system": "PCIe system",
            "health": "Warning",
            "message": "Detected more than 8 PCIe replays per minute for GPU 2 : 23",
        }
    ]


def test_dcgmi_health_without_watches_says_so():
    result = dcgm.parse_dcgmi_health(fixture("dcgmi_health", "watches_off.txt"))
    assert result == {"watches": False, "overall": None, "incidents": []}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Error: Unable to check health watches. Return: The Group is not found\n", "DCGM refused the health check"),
        ("Health Monitor Report\n", "no health report"),
        ('{"body": {"Overall Health": {"value": "Fine"}}}', "unknown health 'Fine'"),
        ('{"body": {}}', "no Overall Health"),
        ('{"body": {"Overall Health": {"value": "Healthy"}, "GPU": {"children": {"1": {}}}}}', "without its value"),
        ('{"body": {"Overall Health": ', "malformed JSON"),
    ],
)
def test_dcgmi_health_refusals_name_the_command(text, message):
    with pytest.raises(ParseError, match=message) as error:
        dcgm.parse_dcgmi_health(text)
    assert str(error.value).startswith("dcgmi health -c -j: ")
