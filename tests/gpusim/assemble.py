# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Assemble the gpusim node profiles from their specs.

A profile spec (``profiles/<name>.yml``) describes one node: its GPUs and their PCI addresses,
NVSwitches, NICs, CPU/NUMA layout and, where we have them, real captures to take verbatim
(``captures/``). This script writes, for every spec, the outputs the node's tools print:

    profiles/<name>/lspci-Dnn.txt        lspci -Dnn
    profiles/<name>/lspci-Dvvv.txt       lspci -D -vvv: the bridges above the GPUs and NICs, with ACS
    profiles/<name>/infiniband.json      /sys/class/infiniband as the kernel writes it (gpusim-sysfs)
    profiles/<name>/nvidia-smi-q-x.xml   nvidia-smi -q -x
    profiles/<name>/nvidia-smi-topo-m.txt  nvidia-smi topo -m
    profiles/<name>/ibstat.txt           ibstat
    profiles/<name>/ibdev2netdev.txt     ibdev2netdev
    profiles/<name>/lscpu-p.txt          lscpu -p=CPU,CORE,SOCKET,NODE
    profiles/<name>/profile.json         a summary the stand-in tools and the tests read

Every output is derived from the same spec, so GPU count, bus IDs and NIC names agree across
them. ``--check`` exits 1 when a committed output differs from what the spec gives.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import ClassVar

import yaml

HERE = Path(__file__).resolve().parent
PROFILES = HERE / "profiles"
CAPTURES = HERE / "captures"

# The driver the captured XML is written for; the stand-in nvidia-smi substitutes the
# installed driver's version when it prints it.
PROFILE_DRIVER = "570.133.20"
PROFILE_CUDA = "12.8"

NIC_PCI_NAMES = {
    "1013": "MT27700 Family [ConnectX-4]",
    "101b": "MT28908 Family [ConnectX-6]",
    "101d": "MT2892 Family [ConnectX-6 Dx]",
    "1021": "MT2910 Family [ConnectX-7]",
    "a2dc": "MT43244 BlueField-3 integrated ConnectX-7 network controller",
}
NIC_DEFAULTS = {"firmware": "28.39.1002", "link_layer": "InfiniBand", "state": "Active", "rate": 400}
TOPO_LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()


def gpu_uuid(profile: str, bus: str) -> str:
    h = _digest(profile, "gpu", bus)
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class Profile:
    """One node profile: the spec plus everything derived from it."""

    def __init__(self, name: str, spec: dict):
        self.name = name
        self.spec = spec
        gpu = spec["gpu"]
        self.gpu = gpu
        self.gpu_bus = [f"0000:{b}:00.0" for b in gpu["bus"]]
        self.nvswitch_bus = [f"0000:{b}:00.0" for b in (spec.get("nvswitch") or {}).get("bus", [])]
        defaults = dict(NIC_DEFAULTS, **(spec.get("nic_defaults") or {}))
        self.nics = []
        for nic in spec.get("nics") or []:
            n = dict(defaults, **nic)
            if isinstance(n["gpu"], int):
                n["gpu"] = [n["gpu"]]
            n["gpu"] = n["gpu"] or []
            n.setdefault("guid", "0x" + _digest(name, "nic", n["name"])[:16])
            self.nics.append(n)
        if spec.get("ibstat_capture"):
            self._nics_from_ibstat((CAPTURES / spec["ibstat_capture"]).read_text())

    # -- helpers -------------------------------------------------------------------------
    def _nics_from_ibstat(self, text: str) -> None:
        """Take CA type, firmware, GUID, state, rate and link layer from a real capture."""
        by_name = {n["name"]: n for n in self.nics}
        current = None
        for line in text.splitlines():
            m = re.match(r"CA '(\S+)'", line)
            if m:
                current = by_name[m.group(1)]
                continue
            key, _sep, value = line.strip().partition(": ")
            field = {
                "CA type": "ca_type",
                "Firmware version": "firmware",
                "Node GUID": "guid",
                "State": "state",
                "Rate": "rate",
                "Link layer": "link_layer",
            }.get(key)
            if field and current is not None:
                current[field] = int(value) if field == "rate" else value
        if set(by_name) != {n["name"] for n in self.nics}:
            raise SystemExit(f"{self.name}: NIC list does not match {self.spec['ibstat_capture']}")

    def cpus(self, numa: int) -> str:
        return self.spec["cpu"]["numa_cpus"][numa]

    def gpu_link(self, i: int, j: int) -> str:
        links = self.gpu["links"]
        if i == j:
            return "X"
        if isinstance(links, list):
            return links[i][j]
        if links == "pcie":
            return "NODE" if self.gpu["numa"][i] == self.gpu["numa"][j] else "SYS"
        return links

    def gpu_nic_link(self, g: int, nic: dict) -> str:
        if self.gpu.get("c2c"):  # a Grace superchip's GPU hangs off NVLink-C2C, not the PCIe of any NIC
            return "SYS"
        if g in nic["gpu"]:
            return "PIX"
        return "NODE" if self.gpu["numa"][g] == nic["numa"] else "SYS"

    @staticmethod
    def nic_nic_link(a: dict, b: dict) -> str:
        if a is b:
            return "X"
        if a["bus"].split(":")[0] == b["bus"].split(":")[0]:
            return "PIX"
        return "NODE" if a["numa"] == b["numa"] else "SYS"

    # -- outputs -------------------------------------------------------------------------
    def lspci(self) -> str:
        rows = {
            "0000:00:00.0": "Host bridge [0600]: Intel Corporation Device [8086:09a2] (rev 20)",
            "0000:03:00.0": "VGA compatible controller [0300]: ASPEED Technology, Inc. "
            "ASPEED Graphics Family [1a03:2000] (rev 52)",
        }
        for bus in self.gpu_bus:
            rows[bus] = (
                f"3D controller [0302]: NVIDIA Corporation {self.gpu['pci_class_name']} "
                f"[10de:{self.gpu['pci_id']}] (rev a1)"
            )
        sw = self.spec.get("nvswitch") or {}
        for bus in self.nvswitch_bus:
            rows[bus] = f"Bridge [0680]: NVIDIA Corporation {sw['pci_class_name']} [10de:{sw['pci_id']}] (rev a1)"
        for nic in self.nics:
            cls = "Infiniband controller [0207]" if nic["link_layer"] == "InfiniBand" else "Ethernet controller [0200]"
            rows[f"0000:{nic['bus']}"] = (
                f"{cls}: Mellanox Technologies {NIC_PCI_NAMES[nic['pci_id']]} [15b3:{nic['pci_id']}]"
            )
        return "".join(f"{addr} {rows[addr]}\n" for addr in sorted(rows))

    # lspci -vvv of the bridges: a GPU and the NICs on its PCIe switch (the profile's nic.gpu, PIX in
    # topo -m) sit below one switch (its upstream port on a root port); a GPU or NIC alone sits in a
    # root port of its own. The bridges' names and ACS lines are those of a real 8 x H100 host with
    # Broadcom PEX890xx switches (leptonai/gpud pkg/pci/testdata/lspci-vvv, tests/unit/fixtures/
    # lspci/SOURCES.md): ACS redirect off on every port, as NCCL's guidance asks of bare metal.
    ACS_OFF = "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
    ACS_CAP = "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"

    def pcie_groups(self) -> list[list[int]]:
        """The endpoints' buses grouped by PCIe switch, each group's buses sorted, groups by first bus."""
        gpu = [int(bus[5:7], 16) for bus in self.gpu_bus]
        merged: list[set[int]] = []
        nics = [{int(n["bus"][:2], 16)} | {gpu[g] for g in n["gpu"]} for n in self.nics]
        for members in [{bus} for bus in gpu] + nics:
            group = set(members)
            for other in [m for m in merged if m & group]:
                merged.remove(other)
                group |= other
            merged.append(group)
        return sorted((sorted(group) for group in merged), key=lambda group: group[0])

    @staticmethod
    def _bridge(addr: str, name: str, port: str, bus: tuple[int, int, int], acs: bool) -> str:
        lines = [
            f"{addr} PCI bridge: {name} (prog-if 00 [Normal decode])",
            "\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR+ FastB2B- DisINTx+",
            "\tBus: primary={:02x}, secondary={:02x}, subordinate={:02x}, sec-latency=0".format(*bus),
            f"\tCapabilities: [40] Express (v2) {port}, MSI 00",
        ]
        if acs:
            lines += [
                "\tCapabilities: [220 v1] Access Control Services",
                f"\t\tACSCap:\t{Profile.ACS_CAP}",
                f"\t\tACSCtl:\t{Profile.ACS_OFF}",
            ]
        return "\n".join(lines) + "\n"

    def lspci_verbose(self) -> str:
        used = {int(b[5:7], 16) for b in self.gpu_bus + self.nvswitch_bus} | {int(n["bus"][:2], 16) for n in self.nics}
        used |= {0x00, 0x03}
        blocks = {}
        previous = 0x00
        root = "Intel Corporation Device 352a (rev 04)"
        switch = "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)"
        for slot, group in enumerate(self.pcie_groups(), 1):
            first, last = group[0], group[-1]
            foreign = [b for b in used if first <= b <= last and b not in group]
            if foreign or first <= previous:
                raise SystemExit(f"{self.name}: PCIe group {group} overlaps bus {foreign or previous}")
            upstream, internal = first - 2, first - 1
            as_switch = len(group) > 1 and upstream > previous and not {upstream, internal} & used
            secondary = upstream if as_switch else first
            blocks[f"0000:00:{slot:02x}.0"] = self._bridge(
                f"0000:00:{slot:02x}.0", root, "Root Port (Slot+)", (0, secondary, last), True
            )
            if as_switch:
                blocks[f"0000:{upstream:02x}:00.0"] = self._bridge(
                    f"0000:{upstream:02x}:00.0", switch, "Upstream Port", (upstream, internal, last), False
                )
                for port, bus in enumerate(group):
                    addr = f"0000:{internal:02x}:{port:02x}.0"
                    blocks[addr] = self._bridge(addr, switch, "Downstream Port (Slot+)", (internal, bus, bus), True)
            previous = last
        for bus in self.gpu_bus:
            blocks[bus] = (
                f"{bus} 3D controller: NVIDIA Corporation {self.gpu['pci_class_name']} (rev a1)\n"
                f"\tSubsystem: NVIDIA Corporation Device {self.gpu['subsystem_id'][:4].lower()}\n"
                "\tCapabilities: [60] Express (v2) Endpoint, MSI 00\n"
                "\tKernel driver in use: nvidia\n"
            )
        sw = self.spec.get("nvswitch") or {}
        for bus in self.nvswitch_bus:
            blocks[bus] = f"{bus} Bridge: NVIDIA Corporation {sw['pci_class_name']} (rev a1)\n"
        for nic in self.nics:
            cls = "Infiniband controller" if nic["link_layer"] == "InfiniBand" else "Ethernet controller"
            addr = f"0000:{nic['bus']}"
            blocks[addr] = (
                f"{addr} {cls}: Mellanox Technologies {NIC_PCI_NAMES[nic['pci_id']]}\n"
                "\tCapabilities: [60] Express (v2) Endpoint, MSI 00\n"
                "\tKernel driver in use: mlx5_core\n"
            )
        return "\n".join(blocks[addr] for addr in sorted(blocks))

    def topo(self) -> str:
        if self.spec.get("topo_capture"):
            return self._topo_from_capture()
        n = len(self.gpu_bus)
        labels = [f"GPU{i}" for i in range(n)] + [f"NIC{i}" for i in range(len(self.nics))]
        out = ["\t" + "\t".join([*labels, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]

        def cell(v: str) -> str:
            return " X " if v == "X" else v

        for i in range(n):
            cells = [self.gpu_link(i, j) for j in range(n)] + [self.gpu_nic_link(i, nic) for nic in self.nics]
            numa = self.gpu["numa"][i]
            out.append("\t".join([f"GPU{i}"] + [cell(c) for c in cells] + [self.cpus(numa), str(numa), "", "N/A"]))
        for k, nic in enumerate(self.nics):
            cells = [self.gpu_nic_link(g, nic) for g in range(n)] + [self.nic_nic_link(nic, o) for o in self.nics]
            out.append("\t".join([f"NIC{k}"] + [cell(c) for c in cells]))
        text = "\n".join(out) + "\n\n" + TOPO_LEGEND
        if self.nics:
            text += "\nNIC Legend:\n\n" + "".join(f"  NIC{k}: {nic['name']}\n" for k, nic in enumerate(self.nics))
        return text

    def _topo_from_capture(self) -> str:
        text = (CAPTURES / self.spec["topo_capture"]).read_text()
        # The issue the capture comes from merged some cells; split them back.
        text = text.replace("PXBNODE", "PXB\tNODE").replace("SYSSYS", "SYS\tSYS").replace(" X NODE", " X \tNODE")
        lines = text.splitlines()
        width = len(lines[0].split("\t"))
        for line in lines[1:]:
            if not re.match(r"(GPU|NIC)\d+\t", line):
                continue
            cells = line.split("\t")
            # GPU rows carry an empty cell before "GPU NUMA ID", as real nvidia-smi prints them.
            expected = width + 1 if line.startswith("GPU") else width - 3
            if len(cells) != expected:
                raise SystemExit(f"{self.name}: topo row has {len(cells)} cells, expected {expected}: {line!r}")
        legend = [line.split(": ")[1] for line in lines if re.match(r"\s+NIC\d+: ", line)]
        if legend != [nic["name"] for nic in self.nics]:
            raise SystemExit(f"{self.name}: NIC legend of the capture does not match the spec")
        return "\n".join(lines) + "\n"

    def ibstat(self) -> str:
        if self.spec.get("ibstat_capture"):
            return (CAPTURES / self.spec["ibstat_capture"]).read_text()
        out = []
        for lid, nic in enumerate(sorted(self.nics, key=lambda n: n["name"]), start=11):
            eth = nic["link_layer"] == "Ethernet"
            up = nic["state"] == "Active"
            # Initializing: the link trained but no subnet manager answered (LID 65535, as in the
            # real capture cx4_single_ca_no_catype_initializing_lid65535.txt).
            init = nic["state"] == "Initializing"
            out += [
                f"CA '{nic['name']}'",
                f"\tCA type: {nic['ca_type']}",
                "\tNumber of ports: 1",
                f"\tFirmware version: {nic['firmware']}",
                "\tHardware version: 0",
                f"\tNode GUID: {nic['guid']}",
                f"\tSystem image GUID: {nic['guid']}",
                "\tPort 1:",
                f"\t\tState: {nic['state']}",
                f"\t\tPhysical state: {'LinkUp' if up or init else ('Disabled' if eth else 'Polling')}",
                f"\t\tRate: {nic['rate'] if up or init else 40}",
                f"\t\tBase lid: {65535 if init else (0 if eth or not up else lid)}",
                "\t\tLMC: 0",
                f"\t\tSM lid: {0 if eth or not up else 1}",
                f"\t\tCapability mask: {'0x00010000' if eth else '0xa651e848'}",
                f"\t\tPort GUID: {nic['guid']}",
                f"\t\tLink layer: {nic['link_layer']}",
            ]
        return "\n".join(out) + "\n"

    # /sys/class/infiniband's files as the kernel's ib_core writes them (Documentation/ABI/stable/
    # sysfs-class-infiniband): "<id>: <NAME>" states, "<Gb/s> Gb/sec (<lanes>X <speed>)" rates, the
    # node GUID in four groups. The same CA, port state and rate as ibstat.txt.
    SPEEDS: ClassVar[dict[int, str]] = {10: "QDR", 14: "FDR", 25: "EDR", 50: "HDR", 100: "NDR", 200: "XDR"}

    def infiniband(self) -> str:
        cas = {}
        for nic in sorted(self.nics, key=lambda n: (len(n["name"]), n["name"])):  # mlx5_2 before mlx5_10
            up = nic["state"] == "Active"
            init = nic["state"] == "Initializing"
            eth = nic["link_layer"] == "Ethernet"
            rate = nic["rate"] if up or init else 40
            state = {"Active": "4: ACTIVE", "Initializing": "2: INIT"}.get(nic["state"], "1: DOWN")
            phys = "5: LinkUp" if up or init else ("3: Disabled" if eth else "2: Polling")
            guid = nic["guid"].removeprefix("0x").rjust(16, "0")
            cas[nic["name"]] = {
                # The board's PSID: the simulator has none (a real one names the card's vendor build).
                # node exporter 1.5 (Debian 12) needs the file; later ones read it where it is.
                "board_id": "MT_0000000000",
                "fw_ver": nic["firmware"],
                "hca_type": nic["ca_type"],
                "node_guid": ":".join(guid[i : i + 4] for i in range(0, 16, 4)),
                "ports": {
                    "1": {
                        "link_layer": nic["link_layer"],
                        "state": state,
                        "phys_state": phys,
                        "rate": f"{rate} Gb/sec (4X {self.SPEEDS.get(rate // 4, '')})".replace(" )", ")"),
                    }
                },
            }
        return json.dumps(cas, indent=2) + "\n"

    def ibdev2netdev(self) -> str:
        return "".join(
            f"{nic['name']} port 1 ==> {nic['netdev']} ({'Up' if nic['state'] == 'Active' else 'Down'})\n"
            for nic in sorted(self.nics, key=lambda n: n["name"])
        )

    def xml(self) -> str:
        g = self.gpu
        mig = "Disabled" if g["mig_capable"] else "N/A"
        gen = {"Volta": 3, "Ada Lovelace": 4}.get(g["architecture"], 5)  # PCIe generation
        volta = g["architecture"] == "Volta"
        out = [
            '<?xml version="1.0" ?>',
            '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
            "<nvidia_smi_log>",
            "\t<timestamp>Mon Nov  2 09:00:00 2026</timestamp>",
            f"\t<driver_version>{PROFILE_DRIVER}</driver_version>",
            f"\t<cuda_version>{PROFILE_CUDA}</cuda_version>",
            f"\t<attached_gpus>{len(self.gpu_bus)}</attached_gpus>",
        ]
        for minor, bus in enumerate(self.gpu_bus):
            b = bus.split(":")[1]
            serial = str(int(_digest(self.name, "serial", bus)[:12], 16))[:13]
            used = 0
            out += [
                f'\t<gpu id="0000{bus}">',
                f"\t\t<product_name>{g['name']}</product_name>",
                f"\t\t<product_brand>{'Tesla' if g['architecture'] == 'Volta' else 'NVIDIA'}</product_brand>",
                f"\t\t<product_architecture>{g['architecture']}</product_architecture>",
                "\t\t<display_mode>Disabled</display_mode>",
                "\t\t<display_active>Disabled</display_active>",
                "\t\t<persistence_mode>Enabled</persistence_mode>",
                "\t\t<addressing_mode>None</addressing_mode>",
                "\t\t<mig_mode>",
                f"\t\t\t<current_mig>{mig}</current_mig>",
                f"\t\t\t<pending_mig>{mig}</pending_mig>",
                "\t\t</mig_mode>",
                "\t\t<mig_devices>None</mig_devices>",
                "\t\t<accounting_mode>Disabled</accounting_mode>",
                "\t\t<accounting_mode_buffer_size>4000</accounting_mode_buffer_size>",
                "\t\t<driver_model>",
                "\t\t\t<current_dm>N/A</current_dm>",
                "\t\t\t<pending_dm>N/A</pending_dm>",
                "\t\t</driver_model>",
                f"\t\t<serial>{serial}</serial>",
                f"\t\t<uuid>{gpu_uuid(self.name, bus)}</uuid>",
                f"\t\t<minor_number>{minor}</minor_number>",
                f"\t\t<vbios_version>{g['vbios']}</vbios_version>",
                "\t\t<multigpu_board>No</multigpu_board>",
                f"\t\t<board_id>0x{int(b, 16) << 8:x}</board_id>",
                f"\t\t<gpu_module_id>{minor + 1}</gpu_module_id>",
                f"\t\t<gsp_firmware_version>{'N/A' if g['architecture'] == 'Volta' else PROFILE_DRIVER}"
                "</gsp_firmware_version>",
                "\t\t<gpu_virtualization_mode>",
                "\t\t\t<virtualization_mode>None</virtualization_mode>",
                "\t\t\t<host_vgpu_mode>N/A</host_vgpu_mode>",
                "\t\t</gpu_virtualization_mode>",
                "\t\t<pci>",
                f"\t\t\t<pci_bus>{b}</pci_bus>",
                "\t\t\t<pci_device>00</pci_device>",
                "\t\t\t<pci_domain>0000</pci_domain>",
                f"\t\t\t<pci_device_id>{g['pci_id'].upper()}10DE</pci_device_id>",
                f"\t\t\t<pci_bus_id>0000{bus.upper()}</pci_bus_id>",
                f"\t\t\t<pci_sub_system_id>{g['subsystem_id']}</pci_sub_system_id>",
                "\t\t\t<pci_gpu_link_info>",
                "\t\t\t\t<pcie_gen>",
                f"\t\t\t\t\t<max_link_gen>{gen}</max_link_gen>",
                f"\t\t\t\t\t<current_link_gen>{gen}</current_link_gen>",
                "\t\t\t\t</pcie_gen>",
                "\t\t\t\t<link_widths>",
                "\t\t\t\t\t<max_link_width>16x</max_link_width>",
                "\t\t\t\t\t<current_link_width>16x</current_link_width>",
                "\t\t\t\t</link_widths>",
                "\t\t\t</pci_gpu_link_info>",
                "\t\t</pci>",
                "\t\t<fan_speed>N/A</fan_speed>",
                "\t\t<performance_state>P0</performance_state>",
                "\t\t<fb_memory_usage>",
                f"\t\t\t<total>{g['memory_mib']} MiB</total>",
                "\t\t\t<reserved>0 MiB</reserved>",
                f"\t\t\t<used>{used} MiB</used>",
                f"\t\t\t<free>{g['memory_mib'] - used} MiB</free>",
                "\t\t</fb_memory_usage>",
                "\t\t<compute_mode>Default</compute_mode>",
                "\t\t<ecc_mode>",
                "\t\t\t<current_ecc>Enabled</current_ecc>",
                "\t\t\t<pending_ecc>Enabled</pending_ecc>",
                "\t\t</ecc_mode>",
                "\t\t<ecc_errors>",
                "\t\t\t<volatile>",
                "\t\t\t\t<sram_correctable>0</sram_correctable>",
                "\t\t\t\t<sram_uncorrectable>0</sram_uncorrectable>",
                "\t\t\t\t<dram_correctable>0</dram_correctable>",
                "\t\t\t\t<dram_uncorrectable>0</dram_uncorrectable>",
                "\t\t\t</volatile>",
                "\t\t</ecc_errors>",
                "\t\t<retired_pages>",
                # Volta retires pages; Ampere and later remap rows instead (N/A here, as on the H100 capture).
                f"\t\t\t<pending_retirement>{'No' if volta else 'N/A'}</pending_retirement>",
                "\t\t</retired_pages>",
                "\t\t<remapped_rows>",
                f"\t\t\t<remapped_row_pending>{'N/A' if volta else 'No'}</remapped_row_pending>",
                f"\t\t\t<remapped_row_failure>{'N/A' if volta else 'No'}</remapped_row_failure>",
                "\t\t</remapped_rows>",
                *self.fabric(),
                *self.temperature(),
                "\t\t<gpu_power_readings>",
                "\t\t\t<power_state>P0</power_state>",
                "\t\t\t<power_draw>71.20 W</power_draw>",
                f"\t\t\t<current_power_limit>{g['power_limit_w']}.00 W</current_power_limit>",
                "\t\t</gpu_power_readings>",
                "\t\t<processes>",
                "\t\t</processes>",
                "\t</gpu>",
            ]
        out.append("</nvidia_smi_log>")
        return "\n".join(out) + "\n"

    # Where a GPU slows down and shuts down, in the form each generation's real capture prints:
    # absolute thresholds on Volta (a 300 W V100, NVIDIA/nvidia-docker#1076: 90/87 C) and Ampere (the
    # A100 capture, tests/unit/fixtures/smi_xml: 92/89 C); margins to T.Limit on Hopper (the H100 and
    # H200 captures of 580 drivers: -8/-2 C, 54 C below T.Limit at 34 C). No capture of Ada or
    # Blackwell with the block filled was found: those print N/A, a GPU whose threshold is unknown.
    ABSOLUTE: ClassVar[dict[str, tuple[int, int]]] = {"Volta": (90, 87), "Ampere": (92, 89)}
    TLIMIT: ClassVar[dict[str, tuple[int, int]]] = {"Hopper": (-8, -2)}

    def temperature(self) -> list[str]:
        arch = self.gpu["architecture"]
        current = 31
        out = ["\t\t<temperature>", f"\t\t\t<gpu_temp>{current} C</gpu_temp>"]
        if arch in self.TLIMIT:
            shutdown, slowdown = self.TLIMIT[arch]
            out += [
                f"\t\t\t<gpu_temp_tlimit>{88 - current} C</gpu_temp_tlimit>",
                f"\t\t\t<gpu_temp_max_tlimit_threshold>{shutdown} C</gpu_temp_max_tlimit_threshold>",
                f"\t\t\t<gpu_temp_slow_tlimit_threshold>{slowdown} C</gpu_temp_slow_tlimit_threshold>",
                "\t\t\t<gpu_temp_max_gpu_tlimit_threshold>0 C</gpu_temp_max_gpu_tlimit_threshold>",
            ]
        else:
            shutdown, slowdown = self.ABSOLUTE.get(arch, ("N/A", "N/A"))
            unit = "" if shutdown == "N/A" else " C"
            out += [
                "\t\t\t<gpu_temp_tlimit>N/A</gpu_temp_tlimit>",
                f"\t\t\t<gpu_temp_max_threshold>{shutdown}{unit}</gpu_temp_max_threshold>",
                f"\t\t\t<gpu_temp_slow_threshold>{slowdown}{unit}</gpu_temp_slow_threshold>",
            ]
        return [*out, "\t\t</temperature>"]

    def fabric(self) -> list[str]:
        """The GPU's NVLink fabric registration: registered (Completed, Success) on Hopper and later
        behind NVSwitches, where the driver reports it; N/A elsewhere, as the A100 and VM captures.
        A tray of a multi-node NVLink domain (nvlink_domain) registers with the rack's clique and
        cluster UUID, in the elements the 580 driver prints (the H100 and H200 captures)."""
        domain = self.spec.get("nvlink_domain")
        registered = (bool(self.nvswitch_bus) or bool(domain)) and self.gpu["architecture"] in ("Hopper", "Blackwell")
        state, status = ("Completed", "Success") if registered else ("N/A", "N/A")
        ids = []
        if domain:
            ids = [
                f"\t\t\t<cliqueId>{domain['clique_id']}</cliqueId>",
                f"\t\t\t<clusterUuid>{domain['cluster_uuid']}</clusterUuid>",
            ]
        return [
            "\t\t<fabric>",
            f"\t\t\t<state>{state}</state>",
            f"\t\t\t<status>{status}</status>",
            *ids,
            "\t\t</fabric>",
        ]

    def lscpu(self) -> str:
        """One socket per NUMA node; a node's CPU ranges are its cores' first, second... threads."""
        rows, first_core = [], 0
        for node, text in enumerate(self.spec["cpu"]["numa_cpus"]):
            ranges = [range(int(low), int(high) + 1) for low, high in (part.split("-") for part in text.split(","))]
            for thread in ranges:
                rows.extend((cpu, first_core + offset, node, node) for offset, cpu in enumerate(thread))
            first_core += len(ranges[0])
        head = (
            "# The following is the parsable format, which can be fed to other\n"
            "# programs. Each different item in every column has an unique ID\n"
            "# starting usually from zero.\n"
            "# CPU,Core,Socket,Node\n"
        )
        return head + "".join(",".join(map(str, row)) + "\n" for row in sorted(rows))

    def summary(self) -> dict:
        return {
            "name": self.name,
            "description": self.spec["description"],
            "gpu_name": self.gpu["name"],
            "gpu_count": len(self.gpu_bus),
            "gpu_pci_bus_ids": self.gpu_bus,
            "gpu_uuids": [gpu_uuid(self.name, b) for b in self.gpu_bus],
            "nvswitch_count": len(self.nvswitch_bus),
            "nics": [{k: nic[k] for k in ("name", "netdev", "link_layer", "state", "rate")} for nic in self.nics],
            "profile_driver_version": PROFILE_DRIVER,
            # What the stand-in nvidia-smi nvlink and nccl-tests report (the hardware's figures).
            "nvlink": self.spec.get("nvlink"),
            "nccl_busbw": self.spec["nccl_busbw"]["value"],
        }

    def outputs(self) -> dict[str, str]:
        return {
            "lspci-Dnn.txt": self.lspci(),
            "lspci-Dvvv.txt": self.lspci_verbose(),
            "infiniband.json": self.infiniband(),
            "nvidia-smi-q-x.xml": self.xml(),
            "nvidia-smi-topo-m.txt": self.topo(),
            "ibstat.txt": self.ibstat(),
            "ibdev2netdev.txt": self.ibdev2netdev(),
            "lscpu-p.txt": self.lscpu(),
            "profile.json": json.dumps(self.summary(), indent=2) + "\n",
        }


def load_profiles() -> list[Profile]:
    return [Profile(p.stem, yaml.safe_load(p.read_text())) for p in sorted(PROFILES.glob("*.yml"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    stale = []
    for profile in load_profiles():
        folder = PROFILES / profile.name
        folder.mkdir(exist_ok=True)
        for fname, text in profile.outputs().items():
            path = folder / fname
            if args.check:
                if not path.exists() or path.read_text() != text:
                    stale.append(str(path.relative_to(HERE)))
            elif not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"wrote {path.relative_to(HERE)}")
    if stale:
        print("out of date (run tests/gpusim/assemble.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
