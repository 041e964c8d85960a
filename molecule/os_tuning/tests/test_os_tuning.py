# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The os_tuning role's real state on a converged Debian node."""

from __future__ import annotations

from pathlib import Path

import pytest

SYSCTL = {
    "fs.inotify.max_user_instances": "8192",
    "fs.inotify.max_user_watches": "1048576",
    "kernel.numa_balancing": "0",
    "kernel.pid_max": "4194304",
    "net.core.netdev_max_backlog": "250000",
    "net.core.rmem_max": "268435456",
    "net.core.wmem_max": "268435456",
    "vm.max_map_count": "1048576",
    "vm.zone_reclaim_mode": "0",
}


def test_boots_to_the_multi_user_target(host):
    assert host.check_output("systemctl get-default") == "multi-user.target"


def test_sysctl_file_holds_every_value_once(host):
    conf = host.file("/etc/sysctl.d/60-gpuops-cluster.conf")
    assert conf.mode == 0o644 and conf.user == "root"
    lines = [line for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    settings = dict(line.split(" = ", 1) for line in lines)
    assert settings == SYSCTL
    assert len(lines) == len(SYSCTL)


def test_every_setting_names_a_kernel_parameter(host):
    """A misspelt name would be skipped with a warning at boot: each one must exist on this kernel.
    A container's network namespace hides the kernel-wide net.core settings (netdev_max_backlog);
    the test containers share the kernel of the machine running this test, which shows them."""
    container = host.file("/.dockerenv").exists or host.file("/run/.containerenv").exists
    for key in SYSCTL:
        path = "/proc/sys/" + key.replace(".", "/")
        assert host.file(path).exists or (container and key.startswith("net.") and Path(path).exists()), key


def test_the_kernel_took_the_values_where_it_can(host):
    """In the unprivileged test container /proc/sys is read-only, so the role writes the settings
    and the kernel loads them at the next boot of a real host; there, the values must be live."""
    if "ro," in host.check_output("findmnt -n -o OPTIONS /proc/sys || true") + ",":
        pytest.skip("/proc/sys is read-only in this container: the values load at boot on a real host")
    for key, value in SYSCTL.items():
        assert host.check_output(f"sysctl -n {key}") == value, key


def test_memlock_is_unlimited_for_logins_and_services(host):
    limits = host.file("/etc/security/limits.d/90-gpuops-memlock.conf").content_string
    assert "*    hard    memlock    unlimited" in limits
    assert "*    soft    memlock    unlimited" in limits
    assert host.check_output("systemctl show --property=DefaultLimitMEMLOCK") == "DefaultLimitMEMLOCK=infinity"


def test_chrony_runs_with_the_configured_servers(host):
    assert host.package("chrony").is_installed
    service = host.service("chrony")
    assert service.is_running and service.is_enabled
    conf = host.file("/etc/chrony/chrony.conf").content_string
    assert "server 0.debian.pool.ntp.org iburst" in conf
    assert "server 1.debian.pool.ntp.org iburst" in conf
    assert "pool " not in conf
    # chronyc talks to the running daemon over its socket.
    assert "Reference ID" in host.check_output("chronyc -n tracking")


def test_numa_tools_work(host):
    assert host.package("numactl").is_installed
    assert host.package("hwloc").is_installed
    assert "available:" in host.check_output("numactl --hardware")
    assert "Machine" in host.check_output("lstopo-no-graphics --of console")


def test_the_acs_unit_ran_at_converge_and_starts_at_boot(host):
    service = host.service("gpuops-acs-clear")
    assert service.is_enabled
    shown = host.check_output("systemctl show gpuops-acs-clear -p ActiveState -p Result -p ExecMainStatus")
    assert dict(line.split("=", 1) for line in shown.splitlines()) == {
        "ActiveState": "active",
        "Result": "success",
        "ExecMainStatus": "0",
    }
    # The host's PCI bus has no NVIDIA device: the real script walked it and said so.
    log = host.check_output("journalctl -u gpuops-acs-clear --no-pager -o cat")
    assert "gpuops-acs-clear: no bridge above a GPU or NIC (0 such devices on PCI): nothing to clear" in log
    assert host.run("setpci --version").rc == 0
