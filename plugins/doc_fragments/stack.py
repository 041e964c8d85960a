# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    # Written by tests/scripts/stack_spec.py from roles/preflight/meta/argument_specs.yml: edit that.
    DOCUMENTATION = r"""
options:
  nvidia_driver_branch:
    description:
    - The driver branch, the number only ("580").
    type: str
    default: '580'
  nvidia_driver_version:
    description:
    - Exact driver version ("580.95.05"); empty takes the branch's newest.
    type: str
    default: ''
  nvidia_driver_kernel_module:
    description:
    - The kernel module flavour, auto, open or proprietary. auto takes open where the GPU needs it (Blackwell,
      GH200), proprietary where it needs it (Volta and older), else NVIDIA's default for the branch.
    type: str
    choices:
    - auto
    - open
    - proprietary
    default: auto
  nvidia_driver_fabricmanager_version:
    description:
    - Fabric Manager's version, only to declare it apart; it must equal the driver's. Best left empty.
    type: str
    default: ''
  nvidia_driver_source:
    description:
    - Where the driver comes from. nvidia is NVIDIA's CUDA repository (cuda_repository_url for a mirror).
    - ubuntu is Canonical's -server packages in the Ubuntu archive, on Ubuntu only.
    - The user-mode driver nvidia-headless-no-dkms-BRANCH-server(-open) with nvidia-utils-BRANCH-server.
    - The kernel's modules built and signed by Canonical, linux-modules-nvidia-BRANCH-server(-open)-KERNEL,
      where the archive has them at a driver release it also carries; else DKMS, with a warning.
    - Fabric Manager and NSCQ at the driver's exact release on NVSwitch systems.
    - Preflight reads the versions from the node's package index, that is, from the configured mirror.
    type: str
    choices:
    - nvidia
    - ubuntu
    default: nvidia
  nvidia_driver_kernel:
    description:
    - The kernel release the driver's modules are for ("6.8.0-149-generic"); empty means the running kernel.
      Set it when the node is to boot a kernel that is installed but not running yet.
    - With nvidia_driver_source ubuntu it picks the precompiled module package; with DKMS, the headers.
    type: str
    default: ''
  cuda_versions:
    description:
    - CUDA toolkits side by side, each MAJOR.MINOR (a YAML list, not "12,8").
    type: list
    elements: str
    default:
    - '12.8'
  cuda_default_version:
    description:
    - The toolkit /usr/local/cuda points at; empty means the newest of cuda_versions.
    type: str
    default: ''
  cuda_forward_compat:
    description:
    - Allow a CUDA major newer than the driver's through cuda-compat-X-Y (datacenter GPUs on LTSB and
      production branches).
    type: bool
    default: true
  cuda_minor_version_compat:
    description:
    - Accept a driver older than a CUDA minor's minimum but within its major's family (limited features,
      no PTX JIT of newer code) as a warning instead of an error.
    type: bool
    default: false
  cudnn_version:
    description:
    - cuDNN version ("9.10.2.21", "8.9.7.29-1+cuda12.2"); empty for none.
    type: str
    default: 9.10.2.21
  cudnn_cuda_major:
    description:
    - CUDA major of the cuDNN build; empty follows the default CUDA.
    type: int
  nccl_version:
    description:
    - NCCL version, optionally with its build ("2.26.5" or "2.26.5-1+cuda12.8"); empty for none.
    type: str
    default: 2.26.5
  ofed_flavour:
    description:
    - The RDMA stack, doca, mlnx_ofed, inbox or none (leave the node's RDMA stack alone).
    type: str
    choices:
    - doca
    - mlnx_ofed
    - inbox
    - none
    default: doca
  ofed_gpudirect:
    description:
    - GPUDirect RDMA method; auto takes peermem with DOCA/MLNX OFED, DMA-BUF with inbox.
    type: str
    choices:
    - auto
    - peermem
    - dmabuf
    - none
    default: auto
  dcgm_major:
    description:
    - DCGM's major version. The dcgm role installs DCGM 4; preflight refuses 3 (the old monolithic package).
    type: int
    choices:
    - 3
    - 4
    default: 4
  dcgm_cuda_major:
    description:
    - CUDA major of datacenter-gpu-manager-4-cudaN; empty follows the driver.
    type: int
  dcgm_version:
    description:
    - DCGM version for every datacenter-gpu-manager-4-* package, such as 4.4.1 (epoch and revision added).
    type: str
    default: 4.4.1
  dcgm_exporter_version:
    description:
    - The dcgm-exporter release, one NVIDIA built for dcgm_version (4.5.2 and 4.6.0 with DCGM 4.4.1, 4.1.3
      with 4.2.3); preflight refuses another pair.
    type: str
    default: 4.5.2
"""
