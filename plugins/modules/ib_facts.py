#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: ib_facts
short_description: InfiniBand and RoCE adapters and ports, as facts
version_added: 1.0.0
description:
  - Sets C(ansible_facts.infiniband) from one run of C(ibstat) (Debian/Ubuntu package
    C(infiniband-diags)).
  - Each port's network interface comes from C(ibdev2netdev) when it is installed (MLNX/DOCA OFED),
    otherwise from C(/sys/class/infiniband/<ca>/device/net/).
  - C(present) is false when there is no adapter or no C(ibstat); the module does not fail then.
  - Output the parser cannot read fails the module with the command, the line number and the line.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.facts
options:
  ibstat_path:
    description:
      - Path of C(ibstat). By default it is looked up in C(PATH) and C(/usr/sbin).
    type: path
  ibdev2netdev:
    description:
      - Use C(ibdev2netdev) for the port-to-interface map when it is installed.
    type: bool
    default: true
  neighbours:
    description:
      - Also read the node at the other end of each Active InfiniBand port (its leaf switch), with two
        read-only direct-route queries of one hop (C(smpquery -C <ca> -P <port> -D nodeinfo 0,1) and
        C(nodedesc 0,1)), into the port's C(neighbour) (C(kind), C(guid), C(description)), or
        C(neighbour_error) saying why it could not be read. The slurm role's topology discovery reads it.
    type: bool
    default: false
    version_added: 1.2.0
"""

EXAMPLES = r"""
- name: Read the InfiniBand adapters
  gpuops.cluster.ib_facts:

- name: Every node has its 8 compute-fabric ports up
  ansible.builtin.assert:
    that: ansible_facts.infiniband.active_ports.InfiniBand | length == 8
    fail_msg: "active InfiniBand ports: {{ ansible_facts.infiniband.active_ports.InfiniBand }}"

- name: NCCL_IB_HCA from the active InfiniBand ports
  ansible.builtin.debug:
    msg: "NCCL_IB_HCA={{ '=' ~ ansible_facts.infiniband.active_ports.InfiniBand | join(',') }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    infiniband:
      description: The node's RDMA adapters (InfiniBand and RoCE).
      returned: always
      type: dict
      contains:
        present:
          description: ibstat listed at least one adapter.
          type: bool
        reason:
          description: Why C(present) is false (no ibstat, or what ibstat said); null otherwise.
          type: str
          sample: ibstat was not found (Debian/Ubuntu package infiniband-diags)
        ca_count:
          description: Number of adapters (CAs).
          type: int
          sample: 12
        sysfs_cas:
          description: Adapter names under C(/sys/class/infiniband), also listed without ibstat.
          type: list
          elements: str
        hcas:
          description:
            - One entry per adapter in natural order (mlx5_2 before mlx5_10). Keys C(name),
              C(ca_type), C(number_of_ports), C(firmware_version), C(hardware_version),
              C(node_guid), C(system_image_guid), C(netdev) (first port's interface),
              C(netdevs) and C(ports).
            - Each port has C(port), C(state), C(physical_state), C(rate) (Gb/s), C(base_lid),
              C(lmc), C(sm_lid), C(capability_mask), C(port_guid), C(link_layer) (InfiniBand or
              Ethernet; old ibstat without the line means InfiniBand, C(link_layer_reported) says
              which) and C(netdev); with O(neighbours), C(neighbour) or C(neighbour_error) on each Active
              InfiniBand port.
          type: list
          elements: dict
        leaves:
          description: With O(neighbours), the switches the Active InfiniBand ports link to (C(guid), C(description)),
            in GUID order.
          type: list
          elements: dict
          version_added: 1.2.0
        neighbour_errors:
          description: With O(neighbours), each Active InfiniBand port whose neighbour could not be read, as C(ca:port
            (why)).
          type: list
          elements: str
          version_added: 1.2.0
        active_ports:
          description: The Active ports (C(ca:port)) per link layer; both keys are always there.
          type: dict
          sample: {InfiniBand: ["mlx5_0:1", "mlx5_3:1"], Ethernet: ["mlx5_1:1"]}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import first_line, parse_or_fail, run
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.ib_fabric import neighbour
from ansible_collections.gpuops.cluster.plugins.module_utils.ibstat import (
    active_ports,
    parse_ibdev2netdev,
    parse_ibstat,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.topology import natural_key


def _listdir(path):
    try:
        return sorted(os.listdir(path), key=natural_key)
    except OSError:
        return []


def _absent(sysfs_cas, reason):
    return {
        "present": False,
        "reason": reason,
        "ca_count": 0,
        "sysfs_cas": sysfs_cas,
        "hcas": [],
        "active_ports": {"InfiniBand": [], "Ethernet": []},
    }


def _read_neighbours(module, cas):
    """Each Active InfiniBand port's ``neighbour`` (the node at the other end, by a direct-route
    query of one hop), or ``neighbour_error`` saying why it could not be read."""
    tool = module.get_bin_path("smpquery", opt_dirs=["/usr/sbin"])
    for ca in cas:
        for port in ca["ports"]:
            if port.get("link_layer") != "InfiniBand" or port.get("state") != "Active":
                continue
            if not tool:
                port["neighbour_error"] = "smpquery was not found (Debian/Ubuntu package infiniband-diags)"
                continue
            outputs = []
            for attribute in ("nodeinfo", "nodedesc"):
                argv = [tool, "-C", ca["name"], "-P", str(port["port"]), "-D", attribute, "0,1"]
                rc, out, err = run(module, argv)
                if rc != 0:
                    port["neighbour_error"] = "`{}` exited {}: {}".format(
                        " ".join(argv[1:]), rc, first_line(err, out) or "no output"
                    )
                    break
                outputs.append(out)
            else:
                try:
                    port["neighbour"] = neighbour(*outputs)
                except ParseError as exc:
                    port["neighbour_error"] = str(exc)


def main():
    module = AnsibleModule(
        argument_spec={
            "ibstat_path": {"type": "path"},
            "ibdev2netdev": {"type": "bool", "default": True},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "neighbours": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    sysfs_class = os.path.join(params["sysfs_root"], "class", "infiniband")
    sysfs_cas = _listdir(sysfs_class)

    ibstat = params["ibstat_path"] or module.get_bin_path("ibstat", opt_dirs=["/usr/sbin"])
    if not ibstat:
        facts = _absent(sysfs_cas, "ibstat was not found (Debian/Ubuntu package infiniband-diags)")
        module.exit_json(changed=False, ansible_facts={"infiniband": facts})

    argv = [ibstat]
    rc, out, err = run(module, argv)
    if rc != 0 and "CA '" not in out:
        facts = _absent(sysfs_cas, "ibstat: {}".format(first_line(err, out) or f"exit code {rc}"))
        module.exit_json(changed=False, ansible_facts={"infiniband": facts})
    cas = parse_or_fail(module, parse_ibstat, out, argv)
    if rc != 0:
        # ibstat prints the adapters it could query and exits non-zero when one fails.
        module.warn(
            "ibstat exited {} after listing {}: {}; adapters it could not query are missing from the facts".format(
                rc, ", ".join(ca["name"] for ca in cas) or "no adapter", first_line(err) or "no message"
            )
        )
    if not cas:
        module.exit_json(changed=False, ansible_facts={"infiniband": _absent(sysfs_cas, "ibstat lists no adapter")})

    netdevs = {}
    tool = module.get_bin_path("ibdev2netdev", opt_dirs=["/usr/sbin"]) if params["ibdev2netdev"] else None
    if tool:
        rc, out, err = run(module, [tool])
        if rc == 0:
            for entry in parse_or_fail(module, parse_ibdev2netdev, out, [tool]):
                netdevs[(entry["ca"], entry["port"])] = entry["netdev"]
        else:
            module.warn(f"ibdev2netdev failed (rc {rc}): {first_line(err, out)}")

    for ca in cas:
        from_sysfs = _listdir(os.path.join(sysfs_class, ca["name"], "device", "net"))
        for port in ca["ports"]:
            port["netdev"] = netdevs.get((ca["name"], port["port"]))
            if port["netdev"] is None and len(from_sysfs) == 1 and len(ca["ports"]) == 1:
                port["netdev"] = from_sysfs[0]
        named = [port["netdev"] for port in ca["ports"] if port["netdev"]]
        ca["netdevs"] = sorted(set(named) | set(from_sysfs), key=natural_key)
        ca["netdev"] = named[0] if named else (from_sysfs[0] if from_sysfs else None)

    if params["neighbours"]:
        _read_neighbours(module, cas)
    ports = active_ports(cas)
    facts = {
        "present": True,
        "reason": None,
        "ca_count": len(cas),
        "sysfs_cas": sysfs_cas,
        "hcas": sorted(cas, key=lambda ca: natural_key(ca["name"])),
        "active_ports": {"InfiniBand": ports.get("InfiniBand", []), "Ethernet": ports.get("Ethernet", [])},
    }
    if params["neighbours"]:
        read = [(ca["name"], port) for ca in facts["hcas"] for port in ca["ports"]]
        switches = {
            port["neighbour"]["guid"]: port["neighbour"]["description"]
            for _ca, port in read
            if (port.get("neighbour") or {}).get("kind") == "switch"
        }
        facts["leaves"] = [{"guid": guid, "description": switches[guid]} for guid in sorted(switches)]
        facts["neighbour_errors"] = [
            f"{ca}:{port['port']} ({port['neighbour_error']})" for ca, port in read if "neighbour_error" in port
        ]
    module.exit_json(changed=False, ansible_facts={"infiniband": facts})


if __name__ == "__main__":
    main()
