# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe ACS: lspci -vvv read into bridges and their ACS bits (a real 8 x H100 capture), and the acs
check that fails a bridge redirecting peer-to-peer traffic between a GPU and its NIC or peer GPU."""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import pci
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from conftest import fixture

CAPTURE = fixture("lspci", "lspci_vvv_dell_8x_h100_pex890xx_cx7_nvswitch_excerpt.txt")
# The GPU and the ConnectX-7 below one PEX890xx switch; the NVSwitch below the PMC-Sierra switch.
ENDPOINTS = [("GPU0", "0000:19:00.0", "gpu"), ("0000:1a:00.0", "0000:1a:00.0", "nic")]
ACS_ON = "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"


def with_acs(text, address, line=ACS_ON):
    """The capture with one device's ACSCtl line replaced (the line the capture's own 82:00.0 prints)."""
    blocks = text.split("\n\n")
    return "\n\n".join(
        re.sub(r"ACSCtl:\t.*", "ACSCtl:\t" + line, b) if b.startswith(address + " ") else b for b in blocks
    )


def test_the_capture_reads_as_bridges_with_their_bus_ranges_and_acs_bits():
    devices = {d["pci_bus_id"]: d for d in pci.parse_lspci_verbose(CAPTURE)}
    assert len(devices) == 10
    assert devices["0000:15:01.0"]["bridge"] == {"primary": 0x15, "secondary": 0x16, "subordinate": 0x1C}
    assert devices["0000:16:00.0"]["acs"] is None  # the switch's upstream port has no ACS capability
    assert devices["0000:17:01.0"]["acs"]["ReqRedir"] is False
    assert devices["0000:82:00.0"]["acs"] == {
        "SrcValid": True,
        "TransBlk": False,
        "ReqRedir": True,
        "CmpltRedir": True,
        "UpstreamFwd": True,
        "EgressCtrl": False,
        "DirectTrans": False,
    }
    assert devices["0000:19:00.0"]["bridge"] is None and devices["0000:19:00.0"]["description"].startswith(
        "3D controller: NVIDIA Corporation Device 2330"
    )
    above = [d["pci_bus_id"] for d in pci.pci_ancestors(list(devices.values()), "0000:19:00.0")]
    assert above == ["0000:17:01.0", "0000:16:00.0", "0000:15:01.0"]


def test_acs_redirect_off_between_the_gpu_and_its_nic_passes_though_the_nvswitch_port_redirects():
    # The capture's PMC-Sierra port above the NVSwitch redirects: it is on no GPU's path to a NIC.
    records = v.check_acs(pci.parse_lspci_verbose(CAPTURE), ENDPOINTS)
    assert [(r["subject"], r["verdict"], r["measured"]) for r in records] == [
        ("all bridges", "pass", "2 bridges between them, none redirects")
    ]


def test_redirect_on_the_gpus_switch_port_fails_naming_the_port_the_gpu_and_the_fix():
    records = v.check_acs(pci.parse_lspci_verbose(with_acs(CAPTURE, "17:01.0")), ENDPOINTS)
    assert [(r["subject"], r["verdict"], r["measured"]) for r in records] == [
        ("0000:17:01.0", "fail", "ReqRedir+ CmpltRedir+")
    ]
    assert "of GPU0 below it" in records[0]["reason"]
    assert "setpci -s 0000:17:01.0 ECAP_ACS+0x6.w=0000" in records[0]["reason"]


def test_source_validation_alone_redirects_nothing():
    line = "SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
    records = v.check_acs(pci.parse_lspci_verbose(with_acs(CAPTURE, "17:02.0", line)), ENDPOINTS)
    assert records[0]["verdict"] == "pass"


def test_the_bridge_above_both_devices_is_not_between_them():
    # Redirect at the root port above the switch: GPU-to-NIC traffic turns inside the switch.
    records = v.check_acs(pci.parse_lspci_verbose(with_acs(CAPTURE, "15:01.0")), ENDPOINTS)
    assert records[0]["verdict"] == "pass"


@pytest.mark.parametrize(
    ("devices", "endpoints", "virtualization", "reason"),
    [
        ("capture", ENDPOINTS, "Pass-Through", "virtual machine (nvidia-smi virtualization mode Pass-Through)"),
        (None, ENDPOINTS, None, "lspci is not installed"),
        ("capture", ENDPOINTS[:1], None, "fewer than two"),
        ("capture", [("GPU0", "0000:99:00.0", "gpu"), ENDPOINTS[1]], None, "fewer than two"),
        ("denied", ENDPOINTS, None, "<access denied>"),
    ],
)
def test_what_cannot_be_judged_is_a_skip_with_its_reason(devices, endpoints, virtualization, reason):
    text = {"capture": CAPTURE, "denied": re.sub(r"\tCapabilities: \[.*", "\tCapabilities: <access denied>", CAPTURE)}
    parsed = pci.parse_lspci_verbose(text[devices]) if devices else None
    records = v.check_acs(parsed, endpoints, virtualization, "lspci is not installed")
    assert [r["verdict"] for r in records] == ["skip"] and reason in records[0]["reason"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\tBus: primary=00, secondary=01, subordinate=01\n", "a detail line before any device"),
        ("junk line\n", "not an lspci -vvv device line"),
        ("00:01.0 PCI bridge: X\n\tBus: primary=00\n", "without primary, secondary and subordinate"),
        ("00:01.0 PCI bridge: X\n\t\tACSCtl:\tSrcValid? ReqRedir+\n", "ACSCtl lists 'SrcValid?'"),
        ("00:01.0 PCI bridge: X\n\t\tACSCtl:\n", "ACSCtl lists no control bit"),
        ("00:01.0 PCI bridge: X\n00:01.0 PCI bridge: X\n", "PCI address listed twice"),
    ],
)
def test_unreadable_output_is_refused_naming_the_command_and_line(text, message):
    with pytest.raises(ParseError) as error:
        pci.parse_lspci_verbose(text)
    assert message in str(error.value) and str(error.value).startswith("lspci -D -vvv: ")


def test_a_long_hostile_acs_line_still_reads_as_what_it_says():
    # bench/facts.py times it among the hostile inputs.
    devices = pci.parse_lspci_verbose("00:01.0 PCI bridge: X\n\t\tACSCtl:\t" + "SrcValid+ " * 20_000 + "\n")
    assert devices[0]["acs"] == {"SrcValid": True}
