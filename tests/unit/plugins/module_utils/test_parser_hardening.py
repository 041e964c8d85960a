# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a review and a fuzzer found in the parsers (issue: reliability and security, items 1-4):
each input below raised something other than ParseError, or parsed into a wrong fact, before."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import host, hostlist, ibstat, nvidia_smi, pci, slurm
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.modules import gpu_facts, ib_facts
from conftest import GPUSIM, fixture
from module_harness import Node, run_module


@pytest.mark.parametrize(
    ("parser", "text", "message"),
    [
        # str.isdigit() takes "²" and "⁰", which int() refuses: a ValueError escaped.
        (ibstat.parse_ibstat, "CA '1'\nPort 1:\nSM lid:²", "sm_lid is not a number"),
        (slurm.parse_lscpu, "#CPU,Core,Socket\n⁰,,", "holds '⁰', not a number"),
        # A lone surrogate cannot be encoded: a UnicodeEncodeError escaped.
        (nvidia_smi.parse_query_xml, "<nvidia_smi_log\ud800", "malformed XML"),
    ],
)
def test_inputs_that_escaped_the_error_type(parser, text, message):
    with pytest.raises(ParseError, match=message):
        parser(text)


def test_a_cut_off_nic_legend_is_an_error_naming_the_nics_not_a_fact():
    text = fixture("topo", "b200_8gpu_nv18_16nic_merged_cells_quirk.txt")
    legend = text.index("NIC Legend")
    cut = text[:legend] + "\n".join(text[legend:].split("\n")[:10])  # NIC0..NIC7 named, NIC8.. lost
    with pytest.raises(ParseError, match="NIC Legend is missing or cut off: no kernel name for NIC8, NIC9") as error:
        nvidia_smi.parse_topo(cut)
    assert error.value.line and "GPU0" in error.value.line
    assert nvidia_smi.parse_topo(text)["nics"][8] != "NIC8"  # the whole output still parses


def test_colour_codes_without_their_escape_bytes_are_accepted():
    """Edit of this project's H100 capture, whose header nvidia-smi underlines with real ESC bytes:
    copied through a terminal that dropped ESC, "[4mGPU0" and "[0m" remain."""
    text = fixture("topo", "h100_vm_1gpu_real_escape_codes_device_capture.txt")
    assert "\x1b[4mGPU0" in text
    assert nvidia_smi.parse_topo(text.replace("\x1b", "")) == nvidia_smi.parse_topo(text)


def test_every_topo_refusal_quotes_a_line():
    with pytest.raises(ParseError) as error:
        nvidia_smi.parse_topo("Failed to initialize NVML: Driver/library version mismatch\n")
    assert error.value.line_number == 1 and "version mismatch" in error.value.line


def test_ibstat_that_fails_after_printing_adapters_is_warned_about(monkeypatch):
    text = (GPUSIM / "profiles" / "dgx-h100" / "ibstat.txt").read_text()
    first = text[: text.index("CA 'mlx5_1'")]
    node = Node(
        monkeypatch,
        {"ibstat": "/usr/sbin/ibstat"},
        {("/usr/sbin/ibstat",): (1, first, "ibpanic: [1] main: stat of IB device 'mlx5_1' failed\n")},
    )
    result = run_module(ib_facts.main, {"ibdev2netdev": False}).result
    assert [ca["name"] for ca in result["ansible_facts"]["infiniband"]["hcas"]] == ["mlx5_0"]
    assert node.warnings == [
        "ibstat exited 1 after listing mlx5_0: ibpanic: [1] main: stat of IB device 'mlx5_1' failed; adapters it "
        "could not query are missing from the facts"
    ]


def test_attached_gpus_other_than_the_gpu_elements_is_warned_about(monkeypatch):
    """The telegraf A100 capture says attached_gpus 4 and lists one <gpu>."""
    xml = fixture("smi_xml", "a100_sxm4_80gb_mig_4x1g20gb_v12.xml")
    node = Node(monkeypatch, {"nvidia-smi": "/usr/bin/nvidia-smi"}, {("/usr/bin/nvidia-smi", "-q", "-x"): (0, xml, "")})
    run_module(gpu_facts.main, {"topology": False, "mig": False})
    assert any("attached_gpus 4 but lists 1 <gpu> element(s)" in w for w in node.warnings)


# Item 4: each of these was quadratic or unbounded; bench/facts.py prints their times ("hostile
# input"). The tests check the rewritten paths give the same answers and that the bound holds.


def test_hostlist_expand_is_bounded_before_it_expands():
    assert len(hostlist.hostlist_expand("n[1-100000]")) == hostlist.MAX_HOSTS
    for expression in ("n[1-100001]", "a[1-1000]b[1-1000]", "n[0-99999999999999]"):
        with pytest.raises(hostlist.HostlistError, match="names more than 100000 hosts"):
            hostlist.hostlist_expand(expression)


def test_apt_candidate_reads_the_same_without_crossing_lines():
    policy = "nvidia-driver-580-open:\n  Installed: (none)\n  Candidate: 580.95.05-1\n  Version table:\n"
    assert host.apt_candidate(policy) == "580.95.05-1"
    assert host.apt_candidate("\n" * 1000 + policy) == "580.95.05-1"
    assert host.apt_candidate("  Candidate:\n580\n") is None  # the value must be on its own line


def test_lspci_nn_in_steps_reads_what_the_single_regex_read():
    line = "0000:53:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)"
    (device,) = pci.parse_lspci(line)
    assert device == {
        "pci_bus_id": "0000:53:00.0",
        "class_id": "0302",
        "class_name": "3D controller",
        "vendor_id": "10de",
        "vendor_name": "NVIDIA Corporation",
        "device_id": "2330",
        "device_name": "GH100 [H100 SXM5 80GB]",
        "revision": "a1",
    }
    with pytest.raises(ParseError, match="not an lspci -nn device line"):
        pci.parse_lspci("0000:00:00.0 " + "[0300]: x " * 50)


def test_ibstat_key_value_lines_without_the_lazy_regex():
    text = "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tRate : 400\n"
    (ca,) = ibstat.parse_ibstat(text)
    assert ca["ca_type"] == "MT4129" and ca["ports"][0]["rate"] == 400
    with pytest.raises(ParseError, match="not a CA, Port or 'key: value' line"):
        ibstat.parse_ibstat("CA 'a'\na" + " " * 1000 + "x")


def test_nvlink_peers_of_a_large_node():
    lines = [
        f"0000:{b:02x}:00.0 3D controller [0302]: NVIDIA Corporation GH100 [10de:2330] (rev a1)" for b in range(64)
    ]
    gpus = [f"GPU{i}" for i in range(64)]
    links = {g: {o: "NV18" for o in gpus if o != g} for g in gpus}
    topology = {"gpus": gpus, "nics": [], "links": links, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}}
    facts = build_gpu_facts(pci.classify(pci.parse_lspci("\n".join(lines))), None, topology)
    assert {gpu["nvlink_peers"] for gpu in facts["gpus"]} == {63}


@pytest.mark.parametrize(
    "line",
    [
        "normal|0²|||",  # a superscript digit in the priority (the fuzzer, issue: trust)
        "normal|10||cluster|00:0²:00",  # and in the grace time
        "normal|10||cluster|²-00:00:00",
    ],
)
def test_sacctmgr_superscript_digits_are_a_parse_error(line):
    with pytest.raises(ParseError, match="whole-number priority"):
        slurm.parse_qos(line + "\n")


def test_an_xml_declaration_with_an_unknown_encoding_is_a_parse_error():
    """The fuzzer (issue: trust): a mangled encoding name made the XML parser raise LookupError."""
    with pytest.raises(ParseError, match="malformed XML declaration"):
        nvidia_smi.parse_query_xml('<?xml version="1.0" encoding="UTF000-8"?>\n<nvidia_smi_log></nvidia_smi_log>\n')
