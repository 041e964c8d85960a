# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each GPU's NVLink fabric registration (nvidia-smi -q -x's <fabric>) and the node's multi-node
NVLink domain (a GB200 NVL72 rack's clique) in gpu_facts.

The element names come from the real driver 580 capture of this project's device machine (an H100
whose <fabric> is all N/A). The registered values are those published for GB200 trays:
leptonai/gpud#1106 (four GPUs in clique 4026 of cluster 9c6f5af3-53bf-49b5-a436-b66766c413c3, state
Completed, status Success) and Azure/azhpc-images#506 (a failed registration: Completed,
Insufficient Resources, clique 0, a cluster UUID of zeros), set into copies of that capture's GPU."""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts, nvlink_domain
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import parse_query_xml
from conftest import fixture

CAPTURE = fixture("smi_xml", "h100_sxm5_80gb_vm_1gpu_driver580_open_device_capture.xml")
CLUSTER = "9c6f5af3-53bf-49b5-a436-b66766c413c3"
ZERO = "00000000-0000-0000-0000-000000000000"


def tray(*fabrics):
    """The capture with one GPU per (state, status, clique, cluster), each on its own bus."""
    start, end = CAPTURE.index("<gpu id="), CAPTURE.index("</gpu>") + len("</gpu>")
    gpus = []
    for index, (state, status, clique, cluster) in enumerate(fabrics):
        gpu = CAPTURE[start:end].replace('<gpu id="00000000:', f'<gpu id="0000000{index}:', 1)
        gpu = re.sub(r"<pci_bus_id>00000000:", f"<pci_bus_id>0000000{index}:", gpu, count=1)
        gpu = re.sub(r"<state>N/A</state>", f"<state>{state}</state>", gpu, count=1)
        gpu = re.sub(r"<status>N/A</status>", f"<status>{status}</status>", gpu, count=1)
        gpu = gpu.replace("<cliqueId>N/A</cliqueId>", f"<cliqueId>{clique}</cliqueId>")
        gpu = gpu.replace("<clusterUuid>N/A</clusterUuid>", f"<clusterUuid>{cluster}</clusterUuid>")
        gpus.append(gpu)
    return build_gpu_facts(None, parse_query_xml(CAPTURE[:start] + "".join(gpus) + CAPTURE[end:]), machine="aarch64")


REGISTERED = ("Completed", "Success", 4026, CLUSTER)


def test_the_real_capture_registers_in_no_domain():
    facts = build_gpu_facts(None, parse_query_xml(CAPTURE), machine="x86_64")
    assert facts["gpus"][0]["fabric"] == {"state": None, "status": None, "clique_id": None, "cluster_uuid": None}
    assert facts["nvlink_domain"] is None and facts["host_architecture"] == "x86_64"


def test_a_gb200_tray_registered_in_one_clique():
    facts = tray(*[REGISTERED] * 4)
    assert facts["gpus"][3]["fabric"] == {"state": "Completed", "status": "Success", "clique_id": 4026,
                                          "cluster_uuid": CLUSTER}  # fmt: skip
    assert facts["nvlink_domain"] == {"cluster_uuid": CLUSTER, "clique_id": 4026, "gpus": [0, 1, 2, 3], "problem": None}
    assert facts["host_architecture"] == "aarch64"


@pytest.mark.parametrize(
    ("odd", "problem"),
    [
        (("In Progress", "N/A", 4026, CLUSTER), "GPU2 has fabric state In Progress, status N/A"),
        (("Completed", "Success", 4027, CLUSTER), f"GPU2 is in cluster {CLUSTER} clique 4027"),
        # A failed registration names no cluster: the GPU is outside the domain its neighbours are in.
        (("Completed", "Insufficient Resources", 0, ZERO), f"GPU2 is in cluster {ZERO} clique 0"),
    ],
)
def test_a_gpu_out_of_step_with_its_neighbours_is_named(odd, problem):
    domain = tray(REGISTERED, REGISTERED, odd, REGISTERED)["nvlink_domain"]
    assert domain["cluster_uuid"] == CLUSTER and domain["clique_id"] == 4026
    assert domain["problem"] == f"not every GPU is registered in cluster {CLUSTER} clique 4026: {problem}"


def test_a_tray_whose_registration_failed_everywhere_names_no_domain():
    # Azure/azhpc-images#506: the GPUs say Completed with a zero cluster; the facts name no domain,
    # and the per-GPU fabric keeps what the driver said for the gates that judge it.
    facts = tray(*[("Completed", "Insufficient Resources", 0, ZERO)] * 4)
    assert facts["nvlink_domain"] is None
    assert {gpu["fabric"]["status"] for gpu in facts["gpus"]} == {"Insufficient Resources"}


def test_before_the_driver_no_gpu_has_a_fabric():
    assert nvlink_domain([{"index": 0, "fabric": None}]) is None
    assert nvlink_domain([]) is None
