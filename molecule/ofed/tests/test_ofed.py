# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ofed role: one RDMA stack per node, the other flavour gone, GPUDirect set up as resolved."""

from __future__ import annotations

import re

import pytest
from hosts import name

INBOX = ["rdma-core", "infiniband-diags", "ibverbs-utils", "perftest"]
DOCA_PACKAGES = ["doca-ofed", "doca-ofed-userspace", "mlnx-ofed-kernel-utils", "mlnx-ofed-kernel-dkms"]
PEERMEM = "/etc/modules-load.d/gpuops-nvidia-peermem.conf"
SOURCE = "/etc/apt/sources.list.d/nvidia-doca.sources"


def doca_os(host):
    """DOCA's name of the node's OS: its folder (debian12, ubuntu24.04) and, without the dot, the
    end of its package versions."""
    info = host.system_info
    return f"{info.distribution}{info.release if info.distribution == 'ubuntu' else info.release.split('.')[0]}"


def installed(host):
    out = host.check_output("dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n'")
    # ii (installed) or hi (held and installed): the second letter is the state.
    return {line.split()[0] for line in out.splitlines() if line.split()[1][1:2] == "i"}


def test_one_flavour_and_nothing_of_the_other(host):
    packages = installed(host)
    if name(host) == "ofed-doca":
        assert set(DOCA_PACKAGES) <= packages
        # inbox -> doca: the distribution's tools went first.
        assert not {"infiniband-diags", "perftest"} & packages
    else:
        assert set(INBOX) <= packages
        # doca -> inbox (ofed-back): DOCA's packages purged, not just removed.
        assert not set(DOCA_PACKAGES) & packages
        rc_left = host.run("dpkg -l doca-ofed mlnx-ofed-kernel-utils 2>/dev/null | grep -E '^(rc|ii)'")
        assert rc_left.stdout == ""
        assert not host.file(SOURCE).exists


def test_doca_is_pinned_by_its_versioned_repository_and_held(host):
    if name(host) != "ofed-doca":
        pytest.skip("DOCA node only")
    os_name = doca_os(host)
    assert host.package("doca-ofed").version == "2.9.1-018000-24.10-" + os_name.replace(".", "")
    source = host.file(SOURCE).content_string
    assert f"URIs: http://gpusim-repo/doca/2.9.1/{os_name}/x86_64/" in source
    # GPG-KEY-Mellanox.pub at the mirror's root (key URL unset), ASCII armour.
    assert "Signed-By: /etc/apt/keyrings/nvidia-doca.asc" in source
    assert "doca-ofed" in host.check_output("apt-mark showhold").split()


def test_openibd_loaded_the_ofed_stack(host):
    if name(host) != "ofed-doca":
        pytest.skip("DOCA node only")
    service = host.service("openibd")
    assert service.is_enabled
    assert service.is_running
    assert "Loading HCA driver and Access Layer" in host.check_output("journalctl -u openibd --no-pager")


def test_ibstat_is_the_distribution_tool(host):
    if name(host) == "ofed-doca":
        pytest.skip("the stand-in DOCA ships no tools of its own")
    assert host.check_output("dpkg -S /usr/sbin/ibstat").startswith("infiniband-diags:")
    # The distribution's build (Debian 12: 44.0-2, Ubuntu 24.04: 50.0-2ubuntu0.2) is the one that runs.
    upstream = host.package("infiniband-diags").version.split(":")[-1].split("-")[0]
    assert re.fullmatch(r"[0-9]+[.][0-9]+", upstream)
    version = host.run("/usr/sbin/ibstat -V")
    assert f"BUILD VERSION: {upstream}" in version.stdout + version.stderr
    assert host.check_output("dpkg -S /usr/bin/ibv_devinfo").startswith("ibverbs-utils:")
    assert host.check_output("dpkg -S /usr/bin/ib_write_bw").startswith("perftest:")


def test_rdma_core_units_are_installed_for_udev_to_start(host):
    if name(host) == "ofed-doca":
        pytest.skip("inbox nodes only")
    # rdma-ndd and rdma-load-modules@ have no [Install]: udev starts them when an RDMA device
    # appears, which a container never has. They must be there and loadable.
    for unit in ("rdma-ndd.service", "rdma-hw.target", "rdma-load-modules@rdma.service"):
        assert host.check_output(f"systemctl show -p LoadState --value {unit}") == "loaded", unit
    assert host.file("/lib/udev/rules.d/90-rdma-hw-modules.rules").exists


def test_gpudirect_is_what_preflight_resolved(host):
    conf = host.file(PEERMEM)
    if name(host) == "ofed-doca":
        # DOCA-OFED: nvidia-peermem, loaded at every boot.
        assert conf.mode == 0o644
        assert conf.content_string.splitlines()[-1] == "nvidia-peermem"
    else:
        # inbox: DMA-BUF (L40S, open modules) or none (V100, proprietary): nothing to load.
        assert not conf.exists
