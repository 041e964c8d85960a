# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""After R570.133.20 -> R580.95.05: nothing of 570 left, everything of 580 held, Fabric Manager
following, forward compatibility no longer needed."""

from __future__ import annotations

from driver_common import driver_packages, held, installed, smi_versions, upgradable

NEW = "580.95.05"


def test_no_package_of_the_old_branch_is_left(host):
    packages = driver_packages(host)
    assert not [name for name, version in packages.items() if "570" in name or version.startswith("570.")]
    dpkg = host.check_output("dpkg-query -W -f '${Package} ${db:Status-Abbrev}\\n'")
    # Removed, not left half-configured or held.
    assert not [line for line in dpkg.splitlines() if "570" in line.split()[0] and line.split()[1] not in ("un", "rc")]


def test_every_new_package_is_at_the_new_version_and_held(host):
    packages = driver_packages(host)
    for name in ("nvidia-open-580", "nvidia-driver-580-open", "libnvidia-compute-580", "nvidia-utils-580",
                 "nvidia-compute-utils-580", "nvidia-dkms-580-open", "nvidia-driver-pinning-580",
                 "nvidia-fabricmanager-580", "libnvidia-nscq-580"):  # fmt: skip
        # NVIDIA's Ubuntu folders carry -0ubuntu1 on the user-mode driver packages; Fabric Manager,
        # NSCQ and the pinning package keep -1 (the stand-in's folders, as NVIDIA's).
        keeps = name.startswith(("nvidia-fabricmanager", "libnvidia-nscq", "nvidia-driver-pinning"))
        revision = "0ubuntu1" if host.system_info.distribution == "ubuntu" and not keeps else "1"
        assert packages.get(name) == f"{NEW}-{revision}", name
    assert set(packages) <= held(host)
    assert not [p for p in upgradable(host) if p.startswith(("nvidia", "libnvidia"))]
    pref = host.file("/etc/apt/preferences.d/gpuops-nvidia-driver.pref").content_string
    assert f"Pin: version {NEW}-*" in pref


def test_nvidia_smi_reports_the_new_driver(host):
    assert set(smi_versions(host)) == {NEW}
    assert host.file("/usr/share/gpusim/driver-version").content_string.strip() == NEW


def test_fabric_manager_followed_the_driver(host):
    service = host.service("nvidia-fabricmanager")
    # The stand-in, like the real one, does not start unless its version equals the driver's.
    assert service.is_running and service.is_enabled
    log = host.check_output("journalctl -u nvidia-fabricmanager --no-pager -o cat")
    assert f"version {NEW} started" in log
    assert host.service("nvidia-persistenced").is_running


def test_forward_compatibility_is_gone_once_the_driver_runs_cuda_13(host):
    packages = installed(host)
    assert "cuda-toolkit-13-0" in packages and "cuda-toolkit-12-8" in packages
    assert "cuda-compat-13-0" not in packages
    profile = host.file("/etc/profile.d/gpuops-cuda.sh").content_string
    assert "compat" not in profile
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.8"
