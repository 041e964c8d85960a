# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL, /etc/nccl.conf and SHARP on three fabrics: the exact file each node gets, the packages, HPC-X."""

from __future__ import annotations

import pytest
from hosts import name

HEAD = (
    "# gpuops.cluster.nccl derived these settings from {host}'s hardware facts; add or\n"
    "# change settings with nccl_conf_overrides. NCCL reads KEY=VALUE lines with no spaces; a process's\n"
    "# environment and ~/.nccl.conf take precedence over this file.\n"
)
# Everything after the ansible_managed line, per node.
NCCL_CONF = {
    # 8 NDR InfiniBand HCAs, one per GPU on its PCIe switch; the Ethernet ports are another fabric.
    "nccl-h100": "# compute fabric: InfiniBand, 8 Active port(s)\n"
    "# GPUDirect RDMA (peermem): every GPU's nearest compute NIC is at most PIX\n"
    "# SHARP: CollNet on\n"
    "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1\n"
    "NCCL_SOCKET_IFNAME==eth0\n"
    "NCCL_NET_GDR_LEVEL=PIX\n"
    "NCCL_COLLNET_ENABLE=1\n"
    "NCCL_DEBUG=WARN\n"
    "NCCL_IB_TIMEOUT=22\n",
    # One RoCE port on NUMA node 0: GPUs 2 and 3 reach it across the sockets.
    "nccl-l40s": "# compute fabric: Ethernet, 1 Active port(s)\n"
    "# RoCE: GID index 3 is RoCE v2 over IPv4 on a ConnectX port with one IPv4 address\n"
    "# GPU2, GPU3 reach a compute NIC only across the CPU sockets: capped at PHB, so they do not use "
    "GPUDirect RDMA\n"
    "NCCL_IB_HCA==mlx5_0:1\n"
    "NCCL_SOCKET_IFNAME==eth0\n"
    "NCCL_IB_GID_INDEX=3\n"
    "NCCL_NET_GDR_LEVEL=PHB\n",
    # Two HCAs without link: left out, and GPU2/GPU5 now reach a live HCA across host bridges.
    "nccl-a100": "# compute fabric: InfiniBand, 6 Active port(s)\n"
    "# left out: mlx5_2:1 (Initializing), mlx5_6:1 (Down)\n"
    "# GPUDirect RDMA (peermem): every GPU's nearest compute NIC is at most NODE\n"
    "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_3:1,mlx5_5:1,mlx5_7:1,mlx5_8:1\n"
    "NCCL_SOCKET_IFNAME==eth0\n"
    "NCCL_NET_GDR_LEVEL=PHB\n",
}
NCCL_BUILD = "2.26.5-1+cuda12.8"
# HPC-X's OS names: debian12, ubuntu22.04, ubuntu24.04.
HPCX = "/opt/hpcx/hpcx-v2.21-gcc-doca_ofed-{os}-cuda12-x86_64"


def test_nccl_conf_is_exactly_what_the_hardware_gives(host):
    conf = host.file("/etc/nccl.conf")
    assert conf.user == "root"
    assert conf.mode == 0o644
    first, rest = conf.content_string.split("\n", 1)
    assert first.startswith("# ")
    assert rest == HEAD.format(host=name(host)) + NCCL_CONF[name(host)]


def test_every_line_is_in_nccls_format(host):
    for line in host.file("/etc/nccl.conf").content_string.splitlines():
        if not line.startswith("#"):
            key, _sep, value = line.partition("=")
            assert key.isupper()
            assert value
            assert " " not in line


def test_nccl_is_the_build_for_the_default_cuda_and_held(host):
    for package in ("libnccl2", "libnccl-dev"):
        assert host.package(package).version == NCCL_BUILD
    held = host.check_output("apt-mark showhold").split()
    assert {"libnccl2", "libnccl-dev"} <= set(held)
    assert host.file("/usr/lib/x86_64-linux-gnu/libnccl.so.2.26.5").exists


def test_sharp_plugin_and_libraries_are_on_the_loader_path(host):
    if name(host) != "nccl-h100":
        assert not host.file("/opt/hpcx").exists
        return
    info = host.system_info
    os_name = f"ubuntu{info.release}" if info.distribution == "ubuntu" else f"debian{info.release.split('.')[0]}"
    assert host.file("/opt/hpcx/current").linked_to == HPCX.format(os=os_name)
    lines = host.file("/etc/ld.so.conf.d/gpuops-hpcx-sharp.conf").content_string.splitlines()
    assert lines[1:] == ["/opt/hpcx/current/nccl_rdma_sharp_plugin/lib", "/opt/hpcx/current/sharp/lib"]
    assert host.file("/opt/hpcx/current/nccl_rdma_sharp_plugin/lib/libnccl-net.so").is_file
    # Ask the loader: its cache (ldconfig ran) resolves the plugin and SHARP's library into HPC-X.
    cache = {}
    for line in host.check_output("ldconfig -p").splitlines()[1:]:
        soname, _sep, path = line.strip().partition(" => ")
        cache.setdefault(soname.split(" (")[0], []).append(path)
    assert [p for p in cache.get("libnccl-net.so", []) if p.endswith("/nccl_rdma_sharp_plugin/lib/libnccl-net.so")]
    assert [p for p in cache.get("libsharp_coll.so.5", []) if p.startswith("/opt/hpcx/")]


def test_ucx_uses_the_compute_ports(host):
    if name(host) != "nccl-h100":
        pytest.skip("SHARP node only")
    profile = host.file("/etc/profile.d/gpuops-hpcx.sh").content_string
    assert "export HPCX_HOME=/opt/hpcx/current\n" in profile
    env = host.check_output("bash -lc 'echo $UCX_NET_DEVICES'")
    assert env == "mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"


def test_sharp_am_runs_on_the_subnet_manager_host_with_its_config(host):
    if name(host) != "nccl-h100":
        assert not host.file("/etc/systemd/system/sharp_am.service").exists
        return
    service = host.service("sharp_am")
    assert service.is_enabled
    assert service.is_running
    assert host.file("/etc/sharp/sharp_am.cfg").content_string.splitlines()[-1] == "log_verbosity 3"
    assert "/etc/sharp/sharp_am.cfg: log_verbosity 3" in host.file("/var/log/sharp_am.log").content_string
    assert "sharp/bin/sharp_am -O /etc/sharp/sharp_am.cfg" in host.check_output("ps -eo args")
