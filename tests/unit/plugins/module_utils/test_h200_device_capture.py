# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real H200 (141 GB, driver 580.159.04, open module), captured on a lent machine with
tests/device/capture.sh (tests/unit/fixtures/SOURCES.md): the parsers read its outputs, and the
collection's MIG table for the H200 is what the H200 itself reports."""

from __future__ import annotations

from ansible_collections.gpuops.cluster.plugins.module_utils import mig, nvidia_smi
from conftest import fixture


def test_the_h200_mig_table_is_what_the_h200_reports():
    profiles = nvidia_smi.parse_mig_profiles(
        fixture("mig", "h200_141gb_lgip_7_profiles_mig_disabled_device_capture.txt")
    )
    placements = nvidia_smi.parse_mig_placements(fixture("mig", "h200_141gb_lgipp_placements_device_capture.txt"))
    assert [(p["name"], p["id"], p["total"], p["memory_gib"]) for p in profiles] == [
        ("1g.18gb", 19, 7, 16.0),
        ("1g.18gb+me", 20, 1, 16.0),
        ("1g.35gb", 15, 4, 32.5),
        ("2g.35gb", 14, 3, 32.5),
        ("3g.71gb", 9, 2, 69.75),
        ("4g.71gb", 5, 1, 69.75),
        ("7g.141gb", 0, 1, 140.0),
    ]
    own = mig.from_smi("NVIDIA H200", profiles, placements)
    table = mig.for_device("0x2335")
    assert own.profiles == table.profiles
    assert own.compute == table.compute == 7


def test_the_h200_topology_with_its_gpu_numa_id_column():
    """Driver 580's topo -m adds a "GPU NUMA ID" column (N/A here) after NUMA Affinity, and
    underlines the header with real escape bytes."""
    text = fixture("topo", "h200_vm_1gpu_gpu_numa_id_column_escape_codes_device_capture.txt")
    assert "\x1b[4m" in text and "GPU NUMA ID" in text
    topo = nvidia_smi.parse_topo(text)
    assert topo["gpus"] == ["GPU0"] and topo["nics"] == []
    assert topo["cpu_affinity"] == {"GPU0": list(range(16))}
    assert topo["numa_affinity"] == {"GPU0": 0}


def test_the_h200_query_xml():
    info = nvidia_smi.parse_query_xml(fixture("smi_xml", "h200_141gb_vm_1gpu_driver580_159_04_open_device_capture.xml"))
    assert (info["driver_version"], info["cuda_version"]) == ("580.159.04", "13.0")
    (gpu,) = info["gpus"]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["memory_total_mib"] == 143771
    assert gpu["mig_mode"] == "disabled"


def test_the_h200_health_and_remapped_rows_csv():
    (row,) = nvidia_smi.parse_query_csv(
        fixture("smi_csv", "h200_vm_1gpu_health_fields_na_bracketed_device_capture.txt")
    )
    assert row["name"] == "NVIDIA H200" and row["memory.total"] == 143771
    assert row["retired_pages.pending"] is None and row["remapped_rows.failure"] == "No"
    (remap,) = nvidia_smi.parse_query_csv(
        fixture("smi_csv", "h200_vm_1gpu_query_remapped_rows_2_correctable_device_capture.txt")
    )
    # Two rows remapped for correctable errors, none pending: a healthy GPU that has used spares.
    assert (remap["remapped_rows.correctable"], remap["remapped_rows.uncorrectable"]) == (2, 0)
    assert remap["remapped_rows.pending"] == "No"


def test_the_h200_compute_apps_with_two_processes_holding_it():
    """Two processes with a CUDA context and 1 GiB each (capture.sh's holders): nvidia-smi names a
    process by the path it was started with, counts the context in its memory, and writes the comma
    of a path as '?' in CSV (its own table and the XML keep the comma)."""
    rows = nvidia_smi.parse_compute_apps(
        fixture("compute_apps", "h200_vm_1gpu_two_processes_comma_written_as_question_mark_device_capture.txt")
    )
    assert [(r["pid"], r["used_memory"]) for r in rows] == [(591, 1542), (590, 1542)]
    assert {r["gpu_uuid"] for r in rows} == {"GPU-95d669f2-3d9d-f8a7-d72c-e2743901c2b0"}
    assert rows[0]["process_name"].endswith("/gpu?holder/python3") and rows[1]["process_name"] == "python3"
