#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: NVIDIA GPUs, NVSwitches and their topology, as facts
version_added: 1.0.0
description:
  - Sets C(ansible_facts.nvidia_gpu) from C(lspci -Dnn), C(nvidia-smi -q -x) and
    C(nvidia-smi topo -m).
  - Runs each command at most once. C(nvidia-smi) is only run when it is installed; the topology
    matrix only when the driver answered and I(topology=true).
  - Works before the driver is installed. GPUs, NVSwitches and Mellanox adapters then come from
    C(lspci) and a table of PCI device IDs (datacenter GPUs from V100 to B300), and
    C(driver_loaded) is false. CPU affinity and NUMA node then come from sysfs where it knows the
    device.
  - Works with no GPU at all (C(present=false)).
  - Output a parser cannot read fails the module with the command, the line number and the line.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.facts
options:
  topology:
    description:
      - Run C(nvidia-smi topo -m) for the GPU/NIC matrix, CPU and NUMA affinity and C(nearest_nics).
      - Set to false to save the call (0.1 to 1 s on large nodes); per-GPU affinity then comes
        from sysfs and C(nearest_nics) stays empty.
    type: bool
    default: true
  mig:
    description:
      - Where a GPU can do MIG, read its profiles with C(nvidia-smi mig -lgip) and, where MIG is
        enabled on a GPU, its GPU and compute instances with C(mig -lgi) and C(mig -lci).
      - Set to false to save the calls; C(mig_profiles) and C(mig_instances) are then null.
    type: bool
    default: true
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). By default it is looked up in C(PATH) and C(/usr/bin).
    type: path
  lspci_path:
    description:
      - Path of C(lspci) (Debian package C(pciutils)). By default it is looked up in C(PATH).
    type: path
"""

EXAMPLES = r"""
- name: Read the GPUs
  gpuops.cluster.gpu_facts:

- name: Fail a node that lost a GPU
  ansible.builtin.assert:
    that: ansible_facts.nvidia_gpu.count == 8
    fail_msg: "{{ inventory_hostname }} shows {{ ansible_facts.nvidia_gpu.count }} GPUs"

- name: Quicker, without the topology matrix
  gpuops.cluster.gpu_facts:
    topology: false

- name: Fabric Manager is needed where NVSwitches are
  ansible.builtin.debug:
    msg: "needs Fabric Manager: {{ ansible_facts.nvidia_gpu.nvswitch_count > 0 }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    nvidia_gpu:
      description: What the node's NVIDIA GPUs are and how they are connected.
      returned: always
      type: dict
      contains:
        present:
          description: NVIDIA GPUs were seen (on PCI or by the driver).
          type: bool
          sample: true
        pci_read:
          description:
            - Whether C(lspci) ran. False when it is not installed (package C(pciutils)); a false
              RV(ansible_facts.nvidia_gpu.present) then means that the PCI bus was not looked at,
              and preflight refuses a host the GPU roles are applied to.
          type: bool
          sample: true
        source:
          description: Where the GPU list came from, C(nvidia-smi) or C(lspci); null with no GPU.
          type: str
          sample: nvidia-smi
        driver_loaded:
          description: C(nvidia-smi -q -x) answered.
          type: bool
        driver_version:
          description: The driver's version; null before the driver.
          type: str
          sample: 570.133.20
        cuda_version:
          description: The highest CUDA version the driver supports; null before the driver.
          type: str
          sample: "12.8"
        nvidia_smi_error:
          description: First line of what C(nvidia-smi) said when it is installed but failed.
          type: str
          sample: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.
        count:
          description: Number of GPUs.
          type: int
          sample: 8
        pci_gpu_count:
          description:
            - NVIDIA GPUs on PCI. Fewer GPUs in C(count) than here, with the driver loaded, means
              the driver lost some.
          type: int
          sample: 8
        product:
          description:
            - Name of the first GPU. The driver's name (C(NVIDIA H100 80GB HBM3)) once it is loaded;
              before, C(NVIDIA) and the PCI ID database's model (C(NVIDIA H100 SXM5 80GB)).
          type: str
        slug:
          description: Short lowercase model name of the first GPU, for GRES types and labels.
          type: str
          sample: h100
        architecture:
          description: volta, turing, ampere, ada, hopper or blackwell.
          type: str
          sample: hopper
        compute_capability:
          description: CUDA compute capability of the first GPU.
          type: str
          sample: "9.0"
        heterogeneous:
          description: The node holds more than one GPU model.
          type: bool
        models:
          description: Each GPU model with its count.
          type: list
          elements: dict
          sample: [{product: NVIDIA H100 80GB HBM3, slug: h100, count: 8}]
        mig_enabled:
          description: MIG is enabled on at least one GPU.
          type: bool
        mig_capable:
          description: The driver reports a MIG mode (enabled or disabled) for at least one GPU.
          type: bool
        mig_pending:
          description:
            - A GPU's pending MIG mode differs from its current one (the change waits for a GPU
              reset or a reboot).
          type: bool
        nvlink_domain:
          description:
            - The multi-node NVLink domain (a GB200 or GB300 NVL72 rack's clique) the GPUs registered in, from
              each GPU's C(fabric); null where no GPU names a cluster (PCIe GPUs, HGX systems whose NVLink stays
              in the node, a driver before the fabric).
            - C(cluster_uuid) and C(clique_id) of the domain most GPUs are in, C(gpus) (their indexes), and
              C(problem), null when every GPU registered in it with state C(Completed) and status C(Success),
              else what differs, GPU by GPU.
          type: dict
          sample:
            {cluster_uuid: 9c6f5af3-53bf-49b5-a436-b66766c413c3, clique_id: 4026, gpus: [0, 1, 2, 3], problem: null}
          version_added: 1.1.0
        host_architecture:
          description: The host's CPU architecture as the kernel names it (C(x86_64); C(aarch64) on Grace).
          type: str
          sample: aarch64
          version_added: 1.1.0
        nvswitch_count:
          description: NVSwitch chips on PCI. More than 0 means Fabric Manager is required.
          type: int
          sample: 4
        nvswitches:
          description: PCI addresses of the NVSwitch chips.
          type: list
          elements: str
        hca_pci:
          description: Mellanox/NVIDIA network adapters on PCI (pci_bus_id, device_id, model, virtual_function).
          type: list
          elements: dict
        gpus:
          description:
            - One entry per GPU, ordered by index. Keys C(index), C(uuid), C(serial) (the board's, which
              follows the GPU to another slot or node), C(name), C(pci_bus_id),
              C(pci_device_id), C(minor_number), C(memory_total_mib), C(mig_mode) and
              C(mig_mode_pending) (C(enabled), C(disabled), or null where the GPU has no MIG),
              C(mig_devices), C(mig_profiles) (from C(nvidia-smi mig -lgip), each with C(name),
              C(id), C(free), C(total) and C(memory_gib); null where not read), C(mig_instances)
              (from C(mig -lgi) and C(mig -lci), each with C(id), C(profile), C(profile_id),
              C(placement) as C(start) and C(size), and C(compute_instances) with C(id),
              C(profile) and C(profile_id); null where MIG is off on every GPU),
              C(virtualization_mode), C(persistence_mode), C(vbios_version), C(module_id),
              C(pcie), C(temperature_thresholds) (degrees Celsius, each null where the driver does
              not print it; C(slowdown_c) and C(shutdown_c), absolute, from older drivers and GPUs;
              C(slowdown_tlimit_c) and C(shutdown_tlimit_c), margins to the GPU's T.Limit, from
              Hopper and later on recent drivers; null as a whole before the driver answers),
              C(slug), C(architecture), C(compute_capability), C(cpu_affinity) (list of
              CPU numbers), C(numa_node), C(nearest_nics) (kernel names of the NICs at the
              smallest topology distance), C(nearest_nic_link) (that distance, such as C(PIX)),
              C(nvlink_peers), and C(fabric), the GPU's NVLink fabric registration (C(state), C(status),
              C(clique_id), C(cluster_uuid); null before the driver).
            - Fields the source cannot tell are null (before the driver, C(uuid) and
              C(minor_number) among others).
          type: list
          elements: dict
        topology:
          description:
            - C(links) maps every device to every other (GPUs as C(GPU0), NICs by kernel name) to
              the matrix cell (C(NV18), C(PIX), C(PXB), C(PHB), C(NODE), C(SYS)); C(nics) lists the
              NICs in matrix order. Both empty without the matrix.
          type: dict
          sample: {links: {GPU0: {GPU1: NV18, mlx5_0: PIX}}, nics: [mlx5_0]}
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import first_line, parse_or_fail, read_mig, run
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import parse_query_xml, parse_topo
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci


def _sysfs_reader(root):
    def read(relative):
        try:
            with open(os.path.join(root, relative)) as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None

    return read


def main():
    module = AnsibleModule(
        argument_spec={
            "topology": {"type": "bool", "default": True},
            "mig": {"type": "bool", "default": True},
            "nvidia_smi_path": {"type": "path"},
            "lspci_path": {"type": "path"},
            "sysfs_root": {"type": "path", "default": "/sys"},
        },
        supports_check_mode=True,
    )
    params = module.params

    pci = None
    lspci = params["lspci_path"] or module.get_bin_path("lspci")
    if lspci:
        argv = [lspci, "-Dnn"]
        rc, out, err = run(module, argv)
        if rc != 0:
            module.fail_json(
                msg="`{}` failed (rc {}): {}".format(" ".join(argv), rc, first_line(err, out)),
                cmd=argv,
                rc=rc,
                stdout=out,
                stderr=err,
            )
        pci = classify(parse_or_fail(module, parse_lspci, out, argv))
    else:
        module.warn(
            "lspci was not found (package pciutils): the PCI bus was not read, so GPUs without a loaded driver, "
            "NVSwitches and adapters are not seen (nvidia_gpu.pci_read is false); install pciutils"
        )

    query = None
    topology = None
    smi_error = None
    nvidia_smi = params["nvidia_smi_path"] or module.get_bin_path("nvidia-smi", opt_dirs=["/usr/bin"])
    if nvidia_smi:
        argv = [nvidia_smi, "-q", "-x"]
        rc, out, err = run(module, argv)
        if rc == 0:
            query = parse_or_fail(module, parse_query_xml, out, argv)
            if query["attached_gpus"] is not None and query["attached_gpus"] != len(query["gpus"]):
                module.warn(
                    "`{}` says attached_gpus {} but lists {} <gpu> element(s): the facts hold only the listed "
                    "ones".format(" ".join(argv), query["attached_gpus"], len(query["gpus"]))
                )
        else:
            smi_error = first_line(out, err) or f"exit code {rc}"
    if query and query["gpus"] and params["topology"]:
        argv = [nvidia_smi, "topo", "-m"]
        rc, out, err = run(module, argv)
        if rc == 0:
            topology = parse_or_fail(module, parse_topo, out, argv)
        else:
            module.warn("`{}` failed (rc {}): {}".format(" ".join(argv), rc, first_line(err, out)))

    mig = read_mig(module, nvidia_smi, query["gpus"] if query else []) if params["mig"] else {}
    facts = build_gpu_facts(
        pci, query, topology, _sysfs_reader(params["sysfs_root"]), smi_error, mig=mig, machine=platform.machine()
    )
    module.exit_json(changed=False, ansible_facts={"nvidia_gpu": facts})


if __name__ == "__main__":
    main()
