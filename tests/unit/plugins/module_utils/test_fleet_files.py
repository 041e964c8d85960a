# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster-wide files say of a fleet-state section's nodes (fleet.files, the fleet_files
filter), and the templates that read it: slurm.conf's and gres.conf's node lines, the file_sd
targets."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.gpuops.cluster.plugins.filter.fleet_files import fleet_files
from ansible_collections.gpuops.cluster.plugins.module_utils import fleet
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm_topology import topology
from conftest import ROOT, trusted


def spec(gres, devices, cpus=64, memory=500_000):
    return {
        "boards": 1,
        "sockets_per_board": 2,
        "cores_per_socket": cpus // 4,
        "threads_per_core": 2,
        "cpus": cpus,
        "real_memory": memory,
        "gpus": len(devices),
        "gres": gres,
        "gres_devices": devices,
    }


L40S = spec("gpu:l40s:2", [{"type": "l40s", "file": f"/dev/nvidia{i}", "cores": "0-15"} for i in range(2)])
CAPS = "/dev/nvidia-caps/nvidia-cap"
MIG = spec(
    "gpu:a100_3g.20gb:2",
    [{"type": "a100_3g.20gb", "files": f"/dev/nvidia0,{CAPS}{c},{CAPS}{c + 1}"} for c in (12, 21)],
)
CPU_ONLY = spec("", [], cpus=32, memory=100_000)
NODES = {
    # Inventory names differ from host names: the lines name hosts, the partitions map one to the other.
    "gpu01": {"hostname": "ib-gpu01", "spec": L40S},
    "gpu02": {"hostname": "ib-gpu02", "spec": L40S},
    "gpu03": {"hostname": "ib-gpu03", "spec": MIG},
    "cpu01": {"hostname": "cpu01", "spec": CPU_ONLY},
    "gpu04": {"hostname": "ib-gpu04", "spec": dict(L40S, real_memory=499_000)},
}


def render(path, **variables):
    values = {}
    for part in ("defaults", "vars"):
        file = ROOT / "roles" / path.split("/")[0] / part / "main.yml"
        if file.is_file():
            values.update(yaml.safe_load(file.read_text()) or {})
    values.update(variables)
    text = (ROOT / "roles" / path.split("/")[0] / "templates" / path.split("/")[1]).read_text()
    # As the template action renders a file: backslashes in its expressions are Jinja escapes.
    return Templar(loader=DataLoader(), variables=trusted(values)).template(trusted(text), escape_backslashes=False)


def test_the_slurm_lines_group_equal_nodes_and_name_each_gpu_type_once():
    lines = fleet.files("slurm", NODES)
    assert [(group["nodes"], group["spec"]["real_memory"]) for group in lines["groups"]] == [
        ("cpu01", 100_000),
        ("ib-gpu03", 500_000),
        ("ib-gpu04", 499_000),
        ("ib-gpu[01-02]", 500_000),  # sorted by the expression: "[" after the digits
    ]
    assert lines["gpu_types"] == ["gres/gpu:a100_3g.20gb", "gres/gpu:l40s"]
    assert lines["hostnames"]["gpu03"] == "ib-gpu03"


def slurm_files(lines, partitions, **extra):
    variables = {
        "ansible_managed": "test",
        "inventory_hostname": "ctl",
        "groups": {"all": ["ctl", *NODES], "slurm_controller": ["ctl"], "slurm_compute": sorted(NODES),
                   "gpu": ["gpu01", "gpu02", "gpu03", "gpu04", "gpu99"], "slurm_dbd": [], "slurm_login": []},
        "hostvars": {"ctl": {"ansible_facts": {"hostname": "ctl"}}},
        "ansible_facts": {"hostname": "ctl"},
        "__slurm_lines": lines,
        "__slurm_topology": topology(lines),
        "__slurm_configless_hosts": [],
        "__slurm_configless_any": False,
        "__slurm_sliced_partitions": {},
        "__slurm_tiers": {"slurm_conf": {}},
        "__slurm_dbd_host": "ctl",
        "__slurm_job_gpu_metrics": False,
        "slurm_partitions": partitions,
        **extra,
    }  # fmt: skip
    return render("slurm/slurm.conf.j2", **variables), render("slurm/gres.conf.j2", **variables)


def test_slurm_conf_and_gres_conf_take_their_node_lines_from_the_worked_out_groups():
    partitions = [{"name": "gpu", "group": "gpu", "default": True}, {"name": "empty", "group": "slurm_dbd"}]
    slurm_conf, gres_conf = slurm_files(fleet.files("slurm", NODES), partitions)
    node_lines = [line.split(" CPUs=")[0] for line in slurm_conf.splitlines() if line.startswith("NodeName=")]
    assert node_lines == ["NodeName=cpu01", "NodeName=ib-gpu03", "NodeName=ib-gpu04", "NodeName=ib-gpu[01-02]"]
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:a100_3g.20gb,gres/gpu:l40s" in slurm_conf
    # The partition's group names an inventory host with no record (gpu99): left out, the rest by host name.
    assert "PartitionName=gpu Nodes=ib-gpu[01-04] Default=YES" in slurm_conf
    assert "PartitionName=empty Default=NO" in slurm_conf
    gres = [line for line in gres_conf.splitlines() if line.startswith("NodeName=")]
    assert gres[-2] == "NodeName=ib-gpu[01-02] Name=gpu Type=l40s File=/dev/nvidia0 Cores=0-15"
    assert "NodeName=ib-gpu03 Name=gpu Type=a100_3g.20gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12," \
           "/dev/nvidia-caps/nvidia-cap13" in gres  # fmt: skip
    assert not any(line.startswith("NodeName=cpu01") for line in gres) and len(gres) == 6


def test_an_awx_slice_lists_the_other_slices_nodes_in_their_recorded_partitions():
    """A slice of the pinned controller and gpu03: the inventory's gpu group holds gpu03 alone, gpu01,
    gpu02 and gpu04 are in the fleet state with the partitions their records list. The partition
    line is the one of a run over everything, and enable_configless stays where a record asks it."""
    partitions = [{"name": "gpu", "group": "gpu", "default": True}]
    whole, _gres = slurm_files(fleet.files("slurm", NODES), partitions)
    groups = {"all": ["ctl", "gpu03"], "slurm_controller": ["ctl"], "slurm_compute": ["gpu03"], "gpu": ["gpu03"],
              "slurm_dbd": [], "slurm_login": []}  # fmt: skip
    sliced, _gres = slurm_files(
        fleet.files("slurm", NODES),
        partitions,
        groups=groups,
        __slurm_sliced_partitions={"gpu": ["gpu01", "gpu02", "gpu04"]},
    )
    assert "PartitionName=gpu Nodes=ib-gpu[01-04] Default=YES" in sliced and sliced == whole
    # Without the records' partitions (what a slice wrote before), the slice would shrink the partition.
    shrunk, _gres = slurm_files(fleet.files("slurm", NODES), partitions, groups=groups)
    assert "PartitionName=gpu Nodes=ib-gpu03 Default=YES" in shrunk
    configless, _gres = slurm_files(fleet.files("slurm", NODES), partitions, __slurm_configless_any=True)
    assert "SlurmctldParameters=enable_configless" in configless and "enable_configless" not in whole


def test_the_scrape_targets_list_each_node_once_per_job_its_labels_after_the_node():
    nodes = {
        "gpu02": {"targets": {"dcgm": "gpu02:9400", "node": "gpu02:9100"}, "labels": {"gpu_model": "l40s"}},
        "gpu01": {"targets": {"dcgm": "gpu01:9400"}},
        # A label named node wins over the record's name, as the template's combine() did.
        "gpu03": {"targets": {"node": "gpu03:9100"}, "labels": {"node": "gpu03-bmc"}},
    }
    jobs = fleet.files("scrape", nodes)
    assert jobs == {
        "dcgm": [
            {"targets": ["gpu01:9400"], "labels": {"node": "gpu01"}},
            {"targets": ["gpu02:9400"], "labels": {"node": "gpu02", "gpu_model": "l40s"}},
        ],
        "node": [
            {"targets": ["gpu02:9100"], "labels": {"node": "gpu02", "gpu_model": "l40s"}},
            {"targets": ["gpu03:9100"], "labels": {"node": "gpu03-bmc"}},
        ],
    }
    text = render("dcgm/file_sd.yml.j2", ansible_managed="test", __dcgm_file_sd=jobs, item=[None, "dcgm"])
    assert yaml.safe_load(text) == jobs["dcgm"]
    assert text.endswith("- labels:\n    gpu_model: l40s\n    node: gpu02\n  targets:\n  - gpu02:9400\n")
    empty = render("dcgm/file_sd.yml.j2", ansible_managed="test", __dcgm_file_sd={}, item=[None, "dcgm"])
    assert yaml.safe_load(empty) == [] and empty.endswith("[]\n")
    assert fleet.files("validation", {"gpu01": {}}) == {}


def test_the_filter_gives_the_module_s_answer_and_refuses_what_is_not_a_section():
    assert fleet_files(NODES, "slurm") == fleet.files("slurm", NODES)
    with pytest.raises(AnsibleFilterError, match="fleet_files: expected inventory name to section data, got list"):
        fleet_files([], "slurm")
    with pytest.raises(AnsibleFilterError, match=r"gpu01: .*slurm section has no node description"):
        fleet_files({"gpu01": {"hostname": "gpu01"}}, "slurm")
    with pytest.raises(AnsibleFilterError, match="'racks' is not a fleet-state section"):
        fleet_files({}, "racks")
