#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: node_health
short_description: Measure a GPU node's health against what its hardware facts lead to expect
version_added: 1.0.0
description:
  - Reads the node fresh (C(nvidia-smi -q -x), C(nvidia-smi nvlink -s), the kernel log since boot,
    C(ibstat), C(ibv_devinfo), C(lspci -D -vvv), sysfs PCIe links of the HCAs, C(/etc/nccl.conf), C(dcgmi diag -r N -j),
    C(slurmd -C) and slurm.conf) and returns one record per check with its expected value (derived
    from the facts C(gpu_facts) and C(ib_facts) gathered, see the validate role's README), the
    measured value and a verdict (C(pass), C(fail), C(warn), C(skip) with the reason).
  - "Checks: C(gpu_count), C(driver_version), C(persistence_mode), C(ecc), C(fabric) (each GPU's
    NVLink fabric registration: C(Completed) with status C(Success) where the GPU reports one),
    C(recovery_action) (the driver's GPU recovery action, C(None) where the driver reports one),
    C(imex) (on a tray of a multi-node NVLink domain with the imex role's node list, C(nvidia-imex-ctl -N -j) - the
    domain C(UP), every node C(READY) and C(CONNECTED), with the tray's node list),
    C(kernel_modules) (per kernel, the running one and every installed one, the driver's modules at the
    installed version, signed by the certificate the nvidia_driver role's DKMS configuration names where
    there is one; fails for the running kernel, warns for another),
    C(xid), C(nvlink), C(pcie), C(acs) (PCIe ACS P2P redirect on a bridge between two GPUs or a GPU
    and a NIC, from C(lspci -D -vvv); skipped in a VM), C(hca_pcie), C(ib_ports), C(nccl_hcas),
    C(dcgm_diag), C(slurmd). The cluster-wide checks (one HCA firmware per model, NCCL across nodes)
    are the validation_report module's."
  - A failed check does not fail the module, nor does output a parser cannot read (that check
    fails, naming the command and the line); one run gives every finding.
  - Never changes the node. C(dcgmi diag) runs GPU tests (level 3 takes about 15 minutes); it runs
    in check mode as well, because it only reads.
  - On a GPU in MIG mode C(dcgmi diag) is not run, and a C(skip) names the GPUs, because DCGM
    runs its diagnostic only on whole GPUs (MIG off, or one GPU instance of the whole GPU with one
    compute instance).
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.root
options:
  nvidia_gpu:
    description: The node's C(ansible_facts.nvidia_gpu) (gpuops.cluster.gpu_facts).
    type: dict
    required: true
  infiniband:
    description: The node's C(ansible_facts.infiniband) (gpuops.cluster.ib_facts); its CAs are the
      adapters C(ibstat) must list now. The module runs C(ibstat) again for their state now.
    type: dict
    default: {}
  driver_branch:
    description: Driver branch whose installed package version the loaded driver must equal.
      Without it, the only branch installed.
    type: str
  fabric:
    description:
      - Link layer of the compute fabric, as the nccl role's C(nccl_fabric).
      - V(none) for a node without one (its ConnectX adapters carry only storage or management
        traffic), and no port is checked. Otherwise a node with adapters (O(infiniband)'s CAs, or
        the HCAs O(nvidia_gpu) found on PCI) where C(ibstat) is missing, fails or lists fewer CAs
        fails C(ib_ports).
    type: str
    choices: [auto, InfiniBand, Ethernet, none]
    default: auto
  dcgm_level:
    description: C(dcgmi diag -r LEVEL); 0 skips DCGM.
    type: int
    default: 1
  dcgm_timeout:
    description: Seconds C(dcgmi diag) may take.
    type: int
    default: 1800
  dcgm_version:
    description:
      - The DCGM release on the node where its package (C(datacenter-gpu-manager-4-core)) cannot be read,
        such as the stack's C(dcgm_version). With the release the tray runs, RV(mndiag) says whether
        DCGM's multi-node diagnostic runs on its GPUs (GB200 NVL from DCGM 4.3, GB300 NVL from 4.4).
    type: str
  nccl_conf:
    description: The NCCL configuration file whose C(NCCL_IB_HCA) is compared with the active ports.
    type: path
    default: /etc/nccl.conf
  slurm_conf:
    description: slurm.conf with this node's C(NodeName) line.
    type: path
    default: /etc/slurm/slurm.conf
  slurm_node_name:
    description: This node's name in slurm.conf. Without it, the short host name.
    type: str
  slurm_headroom_mib:
    description: Memory the slurm role keeps from C(RealMemory) on this node, in MiB.
    type: int
    default: 0
  thresholds:
    description: Overrides of the derived values (the validate role's C(validate_thresholds)).
    type: dict
    default: {}
  health_state:
    description:
      - The state file of the node's health check (gpuops-health), returned as it is (RV(health_state)) for the
        validation report's repair section; none where the check does not run here.
    type: path
    default: /var/lib/gpuops/health-state.json
  nccl_tests:
    description:
      - Path of nccl-tests' C(all_reduce_perf) on this node. When it is not there, C(nccl_node) is a
        C(skip) naming the path (the nccl role builds it only where a CUDA compiler is), and
        C(nccl_tests_present) tells the validate role not to run it.
    type: path
"""

EXAMPLES = r"""
- name: Measure the node
  gpuops.cluster.node_health:
    nvidia_gpu: "{{ ansible_facts.nvidia_gpu }}"
    infiniband: "{{ ansible_facts.infiniband }}"
    dcgm_level: 1
  register: health

- name: Show what failed
  ansible.builtin.debug:
    msg: "{{ health.checks | selectattr('verdict', 'eq', 'fail') | list }}"
"""

RETURN = r"""
checks:
  description: One record per check and subject.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description: The check's name (the drain reason lists them).
      type: str
      sample: nvlink
    subject:
      description: What it is about (a GPU, a port, a test, or the node).
      type: str
      sample: GPU3
    expected:
      description: The value a healthy node gives, from the facts or a threshold.
      type: raw
    measured:
      description: What the node gave.
      type: raw
    verdict:
      description: pass, fail, warn or skip.
      type: str
    reason:
      description: Where the expected value comes from, or why the check was skipped.
      type: str
verdict:
  description: fail if any check failed, else warn, pass or skip.
  returned: always
  type: str
hcas:
  description: The HCAs C(ibv_devinfo) lists (the cluster-wide firmware check reads them).
  returned: always
  type: list
  elements: dict
compute_ports:
  description: The compute fabric's ports with their state and rate, from C(ibstat) now.
  returned: always
  type: list
  elements: dict
nccl_expected:
  description: The single-node all_reduce bus bandwidth to expect and its floor, with the formula.
  returned: always
  type: dict
health_state:
  description: The text of O(health_state) (what the node owes, its last repair), or null where there is none.
  returned: when the node has NVIDIA GPUs
  type: str
nvlink_domain:
  description:
    - The multi-node NVLink domain the node's GPUs registered in (gpu_facts' C(nvlink_domain)), or null.
      The trays of one domain take part in an NCCL run over NVLink (C(nccl_mnnvl)).
  returned: always
  type: dict
nccl_mnnvl_expected:
  description: The all_reduce bus bandwidth to expect across the trays of the node's NVLink domain, and its floor.
  returned: always
  type: dict
mndiag:
  description: Null where DCGM's multi-node diagnostic runs on this node's GPUs, else why it does not.
  returned: always
  type: str
nccl_tests_present:
  description: Whether O(nccl_tests) is an executable file on this node (false without O(nccl_tests)).
  returned: always
  type: bool
mig_gpus:
  description:
    - The indices of the GPUs in MIG mode. NCCL runs are not made on such a node (MIG devices have
      no peer-to-peer access), nor DCGM's diagnostic where a GPU is split into several instances;
      C(skip) records say so.
  returned: always
  type: list
  elements: int
fabric:
  description: The compute fabric's link layer (InfiniBand or Ethernet).
  returned: always
  type: str
gpus:
  description: The GPUs nvidia-smi reports (C(index), C(name), C(pci_bus_id), C(pcie), C(ecc)).
  returned: always
  type: list
  elements: dict
"""

import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils import validation as v
from ansible_collections.gpuops.cluster.plugins.module_utils.commands import first_line, run
from ansible_collections.gpuops.cluster.plugins.module_utils.dcgm import parse_dcgmi_diag
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.health import sysfs_gpus
from ansible_collections.gpuops.cluster.plugins.module_utils.host import (
    ROOT_OPTION,
    Host,
    branch_driver_version,
    container_runtime,
    driver_branches,
    installed_packages,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.hostlist import hostlist_expand
from ansible_collections.gpuops.cluster.plugins.module_utils.ibstat import (
    active_ports,
    parse_ibstat,
    parse_ibv_devinfo,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.imex import NODES_CONFIG as IMEX_NODES_CONFIG
from ansible_collections.gpuops.cluster.plugins.module_utils.imex import check_records as imex_records
from ansible_collections.gpuops.cluster.plugins.module_utils.kernel_modules import (
    installed_kernels,
    read_kernel_modules,
    signing_certificate,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import (
    parse_nvlink_status,
    parse_query_xml,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import parse_lspci_verbose
from ansible_collections.gpuops.cluster.plugins.module_utils.slurm import parse_slurmd_config

_SLURM_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")


class Reader:
    """Runs the node's commands; a command that fails or prints what its parser cannot read
    becomes a failed check of its own instead of stopping the others."""

    def __init__(self, module):
        self.module = module
        self.problems = []

    def output(self, check, argv, parser=None, missing_ok=True):
        path = self.module.get_bin_path(argv[0], opt_dirs=["/usr/sbin", "/sbin", "/usr/local/sbin"])
        if not path:
            return None, f"{argv[0]} is not installed"
        rc, out, err = run(self.module, [path, *argv[1:]])
        if rc != 0 and not out.strip():
            reason = "`{}` exited {}: {}".format(" ".join(argv), rc, first_line(err, out) or "no output")
            if missing_ok:
                return None, reason
            self.problems.append(v.record(check, "node", None, None, "fail", reason))
            return None, reason
        if parser is None:
            return out, None
        try:
            return parser(out), None
        except ParseError as exc:
            reason = "could not read `{}`: {}".format(" ".join(argv), exc)
            self.problems.append(v.record(check, "node", None, None, "fail", reason))
            return None, reason


def _nccl_hcas(text):
    """The value of NCCL_IB_HCA (``=mlx5_0:1,mlx5_3:1``, ``^mlx5_4``, ``mlx5``), or None when the file sets none."""
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip() == "NCCL_IB_HCA":
            return value.strip()
    return None


def _slurm_line(text, node):
    """The NodeName line's counts for ``node`` and whether SlurmdParameters has config_overrides."""
    declared, overrides = None, False
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("SlurmdParameters=") and "config_overrides" in line:
            overrides = True
        if not line.startswith("NodeName="):
            continue
        values = dict(word.partition("=")[::2] for word in line.split())
        try:
            names = hostlist_expand(values["NodeName"])
        except (ValueError, KeyError):
            continue
        if node in names:
            declared = {key: int(values[key]) for key in _SLURM_KEYS if values.get(key, "").isdigit()}
    return declared, overrides


def _hca_links(host, hcas):
    links = {}
    for hca in hcas:
        base = f"/sys/class/infiniband/{hca}/device/"
        values = {
            key: (host.read(base + key) or "").strip()
            for key in ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")
        }
        if all(values.values()):
            links[hca] = {
                "current_speed": values["current_link_speed"],
                "max_speed": values["max_link_speed"],
                "current_width": values["current_link_width"],
                "max_width": values["max_link_width"],
            }
    return links


def _kernel_modules(module, host, version):
    """``kernel_modules`` records: the running kernel (not in a container) and the installed ones."""
    container = container_runtime(host)
    running = os.uname().release
    # The running kernel is this machine's: not a container's, nor under another root (the tests').
    own = not container and host.root == "/"
    kernels = list(dict.fromkeys(([running] if own else []) + installed_kernels(host)))
    certificate = signing_certificate(host)
    result = read_kernel_modules(module, host, kernels, version or "", certificate)
    signer = (result["certificate"] or {}).get("common_name")
    return v.check_kernel_modules(result["kernels"], running, container, signer)


def _imex(module, host, reader, facts):
    """``imex``: where the node's GPUs registered in a multi-node NVLink domain and the imex role wrote
    the tray's node list for a daemon on the host (not masked for Kubernetes), the daemons' own word."""
    nodes_text = host.read(IMEX_NODES_CONFIG)
    masked = os.path.realpath(host.path("/etc/systemd/system/nvidia-imex.service")) == "/dev/null"
    if not facts.get("nvlink_domain") or nodes_text is None or masked:
        return []
    if not module.get_bin_path("nvidia-imex-ctl"):
        return imex_records(nodes_text, None, "nvidia-imex-ctl is not installed")
    out, reason = reader.output("imex", ["nvidia-imex-ctl", "-N", "-j"])
    return imex_records(nodes_text, out, reason)


def _dcgm_release(reader, facts, declared):
    """The DCGM the tray runs (its installed datacenter-gpu-manager-4-core), else ``declared``: read on
    the trays of a multi-node NVLink domain only, the GPUs DCGM's multi-node diagnostic is for."""
    if not facts.get("nvlink_domain"):
        return declared
    out, _reason = reader.output("mndiag", ["dpkg-query", "-W", "-f", "${Version}", "datacenter-gpu-manager-4-core"])
    return (out or "").strip() or declared


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_gpu": {"type": "dict", "required": True},
            "infiniband": {"type": "dict", "default": {}},
            "driver_branch": {"type": "str"},
            "fabric": {"type": "str", "default": "auto", "choices": ["auto", "InfiniBand", "Ethernet", "none"]},
            "dcgm_level": {"type": "int", "default": 1},
            "dcgm_timeout": {"type": "int", "default": 1800},
            "dcgm_version": {"type": "str"},
            "nccl_conf": {"type": "path", "default": "/etc/nccl.conf"},
            "slurm_conf": {"type": "path", "default": "/etc/slurm/slurm.conf"},
            "slurm_node_name": {"type": "str"},
            "slurm_headroom_mib": {"type": "int", "default": 0},
            "thresholds": {"type": "dict", "default": {}},
            "nccl_tests": {"type": "path"},
            "health_state": {"type": "path", "default": "/var/lib/gpuops/health-state.json"},
            **ROOT_OPTION,
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["dcgm_level"] not in (0, 1, 2, 3, 4):
        module.fail_json(msg=f"dcgm_level is {p['dcgm_level']}; use 0 (no DCGM) or a dcgmi diag level 1 to 4.")
    bad_thresholds = v.threshold_problems(p["thresholds"])
    if bad_thresholds:
        module.fail_json(msg=" ".join(bad_thresholds))
    host = Host(module)
    reader = Reader(module)
    facts = p["nvidia_gpu"]
    checks = []

    if not facts.get("present"):
        module.exit_json(
            changed=False,
            checks=[v.record("gpu_count", "node", 0, None, "skip", "no NVIDIA GPU")],
            verdict="skip",
            hcas=[],
            compute_ports=[],
            nccl_expected={},
            nvlink_domain=None,
            nccl_mnnvl_expected={},
            mndiag="no NVIDIA GPU",
        )

    query, reason = reader.output("gpu_count", ["nvidia-smi", "-q", "-x"], parse_query_xml, missing_ok=False)
    gpus = (query or {}).get("gpus") or []
    pci_count, source = facts.get("pci_gpu_count") or 0, "lspci"
    if not pci_count:
        pci_count, source = sysfs_gpus(host.path("/sys/bus/pci/devices")), "sysfs"
    checks += v.check_gpu_count(pci_count, gpus, source)

    _manager, packages = installed_packages(host)
    branch = p["driver_branch"]
    if not branch:
        branches = sorted(driver_branches(packages))
        branch = branches[0] if len(branches) == 1 else None
    installed = branch_driver_version(packages, branch) if branch else None
    checks += v.check_driver(installed, (query or {}).get("driver_version"))
    checks += _kernel_modules(module, host, installed)
    if gpus:
        checks += v.check_persistence(gpus)
        checks += v.check_ecc(gpus)
        checks += v.check_pcie(gpus)
        checks += v.check_fabric(gpus, facts.get("nvswitch_count") or 0)
        checks += v.check_recovery_action(gpus)
    checks += _imex(module, host, reader, facts)

    verbose, reason = reader.output("acs", ["lspci", "-D", "-vvv"], parse_lspci_verbose)
    endpoints = [("GPU{}".format(gpu["index"]), gpu["pci_bus_id"], "gpu") for gpu in gpus if gpu.get("pci_bus_id")]
    endpoints += [
        (nic["pci_bus_id"], nic["pci_bus_id"], "nic")
        for nic in facts.get("hca_pci") or []
        if nic.get("pci_bus_id") and not nic.get("virtual_function")
    ]
    modes = sorted({gpu.get("virtualization_mode") or "None" for gpu in gpus} - {"None"})
    checks += v.check_acs(verbose, endpoints, modes[0] if modes else None, reason)

    kernel_log, reason = reader.output("xid", ["dmesg"])
    if kernel_log is None:
        kernel_log, reason = reader.output("xid", ["journalctl", "-k", "-b", "--no-pager", "-q"])
    if kernel_log is None:
        checks.append(v.record("xid", "node", "no fatal Xid since boot", None, "skip", reason))
    else:
        checks += v.check_xids(v.parse_xids(kernel_log), gpus)

    expectation = v.nvlink_expectation(facts, p["thresholds"])
    status = None
    if expectation["kind"] != "none":
        status, reason = reader.output("nvlink", ["nvidia-smi", "nvlink", "-s"], parse_nvlink_status, missing_ok=False)
    if expectation["kind"] == "none" or status is not None:
        checks += v.check_nvlink(expectation, status, gpus)

    cas, reason = reader.output("ib_ports", ["ibstat"], parse_ibstat)
    if p["fabric"] == "none":
        cas, reason = [], None
    else:
        checks += v.check_hcas_listed(cas, reason, p["infiniband"], facts.get("hca_pci"))
    infiniband = {"hcas": cas or [], "active_ports": active_ports(cas or [])}
    fabric, ports = v.compute_ports(infiniband, "auto" if p["fabric"] == "none" else p["fabric"])
    checks += v.check_ib_ports(fabric, ports, v.nic_expectation(ports, p["thresholds"]))
    checks += v.check_hca_pcie(_hca_links(host, sorted({port["hca"] for port in ports})))
    hcas, reason = reader.output("hca_firmware", ["ibv_devinfo"], parse_ibv_devinfo)
    conf = host.read(p["nccl_conf"])
    if ports:
        checks += v.check_nccl_hcas(_nccl_hcas(conf), ports)

    split = v.mig_split_gpus(facts) if p["dcgm_level"] else []
    if split:
        checks.append(
            v.record(
                "dcgm_diag",
                f"level {p['dcgm_level']}",
                "every test passes",
                None,
                "skip",
                "GPU {} in MIG mode: dcgmi diag runs only on whole GPUs (MIG off, or one GPU instance of the whole "
                "GPU with one compute instance; NVIDIA/DCGM#31), so it is not run; the other checks cover "
                "them".format(", ".join(map(str, split))),
            )
        )
    elif p["dcgm_level"]:
        if not module.get_bin_path("dcgmi"):
            checks += v.check_dcgm(None, p["dcgm_level"])
        else:
            argv = [module.get_bin_path("dcgmi"), "diag", "-r", str(p["dcgm_level"]), "-j"]
            # Bounded as nccl_run is: a wedged dcgmi diag must not hold validation forever.
            timeout = module.get_bin_path("timeout")
            if timeout:
                argv = [timeout, str(p["dcgm_timeout"]), *argv]
            rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
            if timeout and rc in (124, 137):
                checks += v.check_dcgm(
                    None,
                    p["dcgm_level"],
                    error=f"dcgmi diag -r {p['dcgm_level']} did not finish within dcgm_timeout ({p['dcgm_timeout']} s)",
                )
            else:
                try:
                    checks += v.check_dcgm(parse_dcgmi_diag(out), p["dcgm_level"])
                except ParseError as exc:
                    text = first_line(err, out) if rc else str(exc)
                    checks += v.check_dcgm(None, p["dcgm_level"], error=f"dcgmi diag exited {rc}: {text}")

    node = p["slurm_node_name"] or socket.gethostname().split(".")[0]
    slurm_conf = host.read(p["slurm_conf"])
    measured = None
    if slurm_conf is not None and module.get_bin_path("slurmd", opt_dirs=["/usr/sbin"]):
        measured, reason = reader.output("slurmd", ["slurmd", "-C"], parse_slurmd_config)
    declared, overrides = _slurm_line(slurm_conf, node)
    checks += v.check_slurmd(declared, measured, p["slurm_headroom_mib"], overrides)

    nccl_tests = p["nccl_tests"]
    present = bool(nccl_tests) and os.access(host.path(nccl_tests), os.X_OK)
    # GPUs in MIG mode have no peer-to-peer access (MIG User Guide: no GPU-to-GPU P2P, PCIe or
    # NVLink, in MIG mode): an NCCL run over them, on the node or across nodes, measures nothing
    # the checks could gate.
    mig_gpus = [g.get("index") for g in facts.get("gpus") or [] if g.get("mig_mode") == "enabled"]
    no_nccl = []
    if nccl_tests and not present:
        no_nccl.append(
            f"{nccl_tests} is not on this node (the nccl role builds nccl-tests where a CUDA compiler is: "
            "nccl_tests_build)"
        )
    if mig_gpus:
        no_nccl.append(
            "GPU {} in MIG mode: MIG devices have no peer-to-peer access, so nccl-tests across the node's GPUs "
            "is not run (and the node takes no part in the runs across nodes)".format(", ".join(map(str, mig_gpus)))
        )
    if len(gpus) >= 2:
        checks += [v.record("nccl_node", "node", None, None, "skip", reason) for reason in no_nccl]
    checks += reader.problems
    module.exit_json(
        changed=False,
        checks=checks,
        mig_gpus=mig_gpus,
        verdict=v.worst(checks),
        hcas=hcas or [],
        compute_ports=ports,
        fabric=fabric,
        nccl_expected=v.nccl_node_expectation(facts, gpus, p["thresholds"]),
        nvlink_domain=facts.get("nvlink_domain"),
        nccl_mnnvl_expected=v.nccl_mnnvl_expectation(facts, p["thresholds"]),
        mndiag=v.mndiag_support(facts, _dcgm_release(reader, facts, p["dcgm_version"])),
        nccl_tests_present=present,
        gpus=[{k: g.get(k) for k in ("index", "name", "pci_bus_id", "pcie", "ecc")} for g in gpus],
        health_state=(host.read(p["health_state"]) or None),
    )


if __name__ == "__main__":
    main()
