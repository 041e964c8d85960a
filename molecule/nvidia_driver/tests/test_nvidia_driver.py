# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver, CUDA and cuDNN roles on four node kinds: what is installed, pinned, held and running."""

from __future__ import annotations

import pytest
from driver_common import driver_packages, held, installed, smi_versions, upgradable

# What each node must end up with, from its profile and the scenario's inventory.
EXPECTED = {
    "drv-h100": {"driver": "580.65.06", "flavour": "open", "meta": "nvidia-open-580", "fm": True, "nvlsm": False,
                 "cuda": ["12.4", "12.8"], "default": "12.4", "cudnn": ("libcudnn9-cuda-12", "9.10.2.21-1")},
    "drv-l40s": {"driver": "580.95.05", "flavour": "open", "meta": "nvidia-open-580", "fm": False, "nvlsm": False,
                 "cuda": ["12.8"], "default": "12.8", "cudnn": ("libcudnn9-cuda-12", "9.10.2.21-1")},
    "drv-b200": {"driver": "580.95.05", "flavour": "open", "meta": "nvidia-open-580", "fm": True, "nvlsm": True,
                 "cuda": ["12.8"], "default": "12.8", "cudnn": ("libcudnn9-cuda-12", "9.10.2.21-1")},
    "drv-v100": {"driver": "570.172.08", "flavour": "proprietary", "meta": "cuda-drivers-570", "fm": False,
                 "nvlsm": False, "cuda": ["12.4"], "default": "12.4", "cudnn": ("libcudnn8", "8.9.7.29-1+cuda12.2")},
}  # fmt: skip
# On Debian the fifth node takes NVIDIA's packages like drv-l40s; on Ubuntu, Canonical's real ones
# from Ubuntu's archive, at the release their signed modules for the declared kernel were built for.
EXPECTED["drv-canonical"] = EXPECTED["drv-l40s"]
CANONICAL = dict(EXPECTED["drv-l40s"], driver="580.178.04", meta="nvidia-headless-no-dkms-580-server-open",
                 kernel="6.8.0-149-generic", source="ubuntu")  # fmt: skip


@pytest.fixture(scope="module")
def want(host):
    name = host.backend.get_hostname()
    if name == "drv-canonical" and host.system_info.distribution == "ubuntu":
        return CANONICAL
    return EXPECTED[name]


@pytest.fixture(scope="module")
def nvidia_source(want):
    if want.get("source") == "ubuntu":
        pytest.skip("NVIDIA's packages only; test_canonical_* check Canonical's")


def test_the_driver_is_installed_at_one_version_with_the_flavour_the_gpus_need(host, want, nvidia_source):
    packages = driver_packages(host)
    branch = want["driver"].split(".")[0]
    assert packages[want["meta"]].startswith(want["driver"] + "-")
    versions = {name: v for name, v in packages.items() if name != "nvlsm"}
    assert {v.split("-")[0] for v in versions.values()} == {want["driver"]}, versions
    assert all(name.endswith(branch) or branch in name or name == "nvlsm" for name in packages), packages
    assert host.file("/usr/share/gpusim/kernel-module-flavour").content_string.strip() == want["flavour"]
    dkms = f"nvidia-dkms-{branch}-open" if want["flavour"] == "open" else f"nvidia-dkms-{branch}"
    assert dkms in packages


def test_nvidia_smi_reports_the_pinned_version_on_every_gpu(host, want):
    versions = smi_versions(host)
    assert versions and set(versions) == {want["driver"]}


def test_the_driver_is_pinned_and_held(host, want, nvidia_source):
    pref = host.file("/etc/apt/preferences.d/gpuops-nvidia-driver.pref")
    assert pref.mode == 0o644
    branch = want["driver"].split(".")[0]
    pin = f"{want['driver']}-*" if host.backend.get_hostname() == "drv-h100" else f"{branch}.*"
    assert f"Pin: version {pin}\nPin-Priority: 1001" in pref.content_string
    assert f"nvidia-driver-pinning-{branch}" in driver_packages(host)
    assert set(driver_packages(host)) <= held(host)
    # A routine upgrade moves none of it, though the repository has a newer 580 for drv-h100.
    assert not [p for p in upgradable(host) if p.startswith(("nvidia", "libnvidia", "cuda-drivers", "libcudnn"))]


def test_the_candidate_is_the_pinned_version(host, want, nvidia_source):
    """NVIDIA's build at the pinned version ("-1" on Debian, "-0ubuntu1" on Ubuntu), though Ubuntu's
    archive has newer builds of the same names within the branch: those are never candidates."""
    branch = want["driver"].split(".")[0]
    policy = host.check_output(f"apt-cache policy libnvidia-compute-{branch} nvidia-driver-{branch}-open")
    revision = "0ubuntu1" if host.system_info.distribution == "ubuntu" else "1"
    assert policy.count(f"Candidate: {want['driver']}-{revision}\n") == 2, policy


def test_fabric_manager_and_nscq_only_with_nvswitches(host, want):
    packages = driver_packages(host)
    branch = want["driver"].split(".")[0]
    fm = host.service("nvidia-fabricmanager")
    if want["fm"]:
        assert packages[f"nvidia-fabricmanager-{branch}"] == want["driver"] + "-1"
        assert packages[f"libnvidia-nscq-{branch}"] == want["driver"] + "-1"
        # The stand-in refuses to start unless its version equals the driver's, like the real one.
        assert fm.is_running and fm.is_enabled
    else:
        assert not [p for p in packages if "fabricmanager" in p or "nscq" in p]
        assert not host.file("/lib/systemd/system/nvidia-fabricmanager.service").exists


def test_nvlsm_only_on_nvlink5(host, want):
    assert ("nvlsm" in installed(host)) is want["nvlsm"]
    assert host.file("/etc/modules-load.d/gpuops-nvlsm.conf").exists is want["nvlsm"]
    if want["nvlsm"]:
        assert "nvlsm" in held(host)


def test_persistenced_runs(host):
    service = host.service("nvidia-persistenced")
    assert service.is_running and service.is_enabled


def test_nouveau_is_blacklisted(host):
    conf = host.file("/etc/modprobe.d/gpuops-blacklist-nouveau.conf")
    assert "blacklist nouveau" in conf.content_string.splitlines()
    assert "options nouveau modeset=0" in conf.content_string.splitlines()
    assert host.package("initramfs-tools").is_installed


def test_nouveau_blacklist_goes_into_the_initramfs(host):
    """The container has no kernel of its own, so update-initramfs has nothing to rebuild there.
    Build one with the installed initramfs-tools for an empty module tree and look inside: the
    blacklist must be in it, or nouveau binds the GPUs at boot before the root filesystem is up."""
    version = "0.0.0-gpuops-probe"
    modules = f"/lib/modules/{version}"
    try:
        host.check_output(
            f"mkdir -p {modules} && touch {modules}/modules.order {modules}/modules.builtin "
            f"{modules}/modules.builtin.modinfo && depmod {version} && "
            f"echo CONFIG_RD_GZIP=y > /boot/config-{version} && "
            f"mkinitramfs -c gzip -o /tmp/gpuops-probe.img {version}"
        )
        inside = host.check_output("lsinitramfs /tmp/gpuops-probe.img").splitlines()
        assert "etc/modprobe.d/gpuops-blacklist-nouveau.conf" in inside
        extracted = host.check_output(
            "unmkinitramfs /tmp/gpuops-probe.img /tmp/gpuops-probe && "
            "cat $(find /tmp/gpuops-probe -path '*etc/modprobe.d/gpuops-blacklist-nouveau.conf')"
        )
        assert "blacklist nouveau" in extracted.splitlines()
    finally:
        host.run(f"rm -rf {modules} /boot/config-{version} /tmp/gpuops-probe.img /tmp/gpuops-probe")


def test_the_cuda_repository_uses_a_signed_by_keyring(host):
    source = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources").content_string
    # NVIDIA's folder for the node's distribution: debian12, debian13, ubuntu2204, ubuntu2404.
    info = host.system_info
    release = info.release.replace(".", "") if info.distribution == "ubuntu" else info.release.split(".")[0]
    assert f"URIs: http://gpusim-repo/compute/cuda/repos/{info.distribution}{release}/x86_64/" in source
    # 3bf863cc.pub from the mirror's repository folder (key URL unset), ASCII armour as NVIDIA's.
    assert "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc" in source
    assert not host.file("/etc/apt/trusted.gpg").exists


def test_toolkits_side_by_side_with_the_chosen_default(host, want):
    for version in want["cuda"]:
        assert host.package("cuda-toolkit-" + version.replace(".", "-")).is_installed
        assert host.file(f"/usr/local/cuda-{version}/bin/nvcc").is_file
    assert host.file("/usr/local/cuda").linked_to == f"/usr/local/cuda-{want['default']}"
    query = host.check_output("update-alternatives --query cuda")
    assert f"Value: /usr/local/cuda-{want['default']}" in query
    if len(want["cuda"]) > 1:
        # Auto mode would take the newest; the role chose the declared default by hand.
        assert "Status: manual" in query
    major = want["default"].split(".")[0]
    assert host.file(f"/usr/local/cuda-{major}").linked_to == f"/usr/local/cuda-{want['default']}"


def test_a_login_shell_finds_the_default_nvcc(host, want):
    out = host.check_output("bash -lc 'command -v nvcc; nvcc --version; echo $LD_LIBRARY_PATH'")
    assert out.splitlines()[0] == "/usr/local/cuda/bin/nvcc"
    assert f"release {want['default']}," in out
    assert "/usr/local/cuda/lib64" in out.splitlines()[-1]
    assert "compat" not in out.splitlines()[-1]


def test_cudnn_matches_the_default_cuda_major(host, want):
    name, version = want["cudnn"]
    assert installed(host)[name] == version
    assert name in held(host)
    others = [p for p in installed(host) if p.startswith("libcudnn") and not p.startswith(name)]
    assert others in ([], [name.replace("libcudnn9-", "libcudnn9-dev-")], ["libcudnn8-dev"])


# --- Canonical's packages (drv-canonical on Ubuntu) ------------------------------------------------


@pytest.fixture(scope="module")
def canonical(want):
    if want.get("source") != "ubuntu":
        pytest.skip("Canonical's packages: drv-canonical on Ubuntu only")
    return want


def test_canonical_packages_are_the_archive_s_at_one_release(host, canonical):
    packages = driver_packages(host)
    ours = {n: v for n, v in packages.items() if not n.startswith("cuda-")}
    assert ours[canonical["meta"]].startswith(canonical["driver"] + "-0ubuntu")
    assert ours["nvidia-utils-580-server"] == ours[canonical["meta"]]
    # One release across the user space, from Canonical's archive (its -0ubuntu revisions).
    assert {v.split("-")[0] for n, v in ours.items()} == {canonical["driver"]}, ours
    assert all("ubuntu" in v for v in ours.values()), ours
    # The precompiled modules, not DKMS; no NVIDIA package (pinning, nvidia-open) mixed in.
    assert not [n for n in ours if n.startswith(("nvidia-dkms", "nvidia-open", "nvidia-driver-pinning"))], ours
    assert host.package(f"linux-modules-nvidia-580-server-open-{canonical['kernel']}").is_installed


def test_canonical_module_is_signed_by_canonical_for_the_declared_kernel(host, canonical):
    ko = host.check_output(f"find /lib/modules/{canonical['kernel']} -name nvidia.ko")
    assert ko == f"/lib/modules/{canonical['kernel']}/kernel/nvidia-580srv-open/nvidia.ko"
    assert host.check_output(f"modinfo -F signer {ko}") == "Canonical Ltd. Kernel Module Signing"
    assert host.check_output(f"modinfo -F version {ko}") == canonical["driver"]


def test_canonical_nvidia_smi_is_diverted_and_reports_the_module_s_release(host, canonical):
    diversions = host.check_output("dpkg-divert --list /usr/bin/nvidia-smi")
    assert "diversion of /usr/bin/nvidia-smi to /usr/bin/nvidia-smi.distrib by gpusim" in diversions
    # The real binary is there, moved aside; it cannot reach a driver in a container.
    assert host.file("/usr/bin/nvidia-smi.distrib").is_file
    assert set(smi_versions(host)) == {canonical["driver"]}


def test_canonical_driver_is_pinned_at_its_release_and_held(host, canonical):
    pref = host.file("/etc/apt/preferences.d/gpuops-nvidia-driver.pref").content_string
    assert f"Pin: version {canonical['driver']}-*\nPin-Priority: 1001" in pref
    assert "Pin: release o=Ubuntu" not in pref
    assert {canonical["meta"], "nvidia-utils-580-server", "libnvidia-compute-580-server"} <= held(host)
    assert not [p for p in upgradable(host) if p.startswith(("nvidia", "libnvidia", "linux-modules-nvidia"))]


def test_canonical_persistenced_runs_with_persistence_mode(host, canonical):
    unit = host.check_output("systemctl cat nvidia-persistenced")
    # Canonical's unit, with the drop-in that takes --no-persistence-mode out.
    assert "--no-persistence-mode" in unit
    assert host.check_output("systemctl show -p ExecStart --value nvidia-persistenced").count("argv[]=") == 1
    assert "--no-persistence-mode" not in host.check_output("systemctl show -p ExecStart --value nvidia-persistenced")
    assert host.service("nvidia-persistenced").is_running
