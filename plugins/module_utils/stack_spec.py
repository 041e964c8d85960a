# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The declared stack variables as stack_check takes them.

Written by tests/scripts/stack_spec.py from roles/preflight/meta/argument_specs.yml: edit that.
"""

from __future__ import annotations

STACK_SPEC = {
    "nvidia_driver_branch": {"type": "str", "default": "580"},
    "nvidia_driver_version": {"type": "str", "default": ""},
    "nvidia_driver_kernel_module": {"type": "str", "choices": ["auto", "open", "proprietary"], "default": "auto"},
    "nvidia_driver_fabricmanager_version": {"type": "str", "default": ""},
    "nvidia_driver_source": {"type": "str", "choices": ["nvidia", "ubuntu"], "default": "nvidia"},
    "nvidia_driver_kernel": {"type": "str", "default": ""},
    "cuda_versions": {"type": "list", "elements": "str", "default": ["12.8"]},
    "cuda_default_version": {"type": "str", "default": ""},
    "cuda_forward_compat": {"type": "bool", "default": True},
    "cuda_minor_version_compat": {"type": "bool", "default": False},
    "cudnn_version": {"type": "str", "default": "9.10.2.21"},
    "cudnn_cuda_major": {"type": "int"},
    "nccl_version": {"type": "str", "default": "2.26.5"},
    "ofed_flavour": {"type": "str", "choices": ["doca", "mlnx_ofed", "inbox", "none"], "default": "doca"},
    "ofed_gpudirect": {"type": "str", "choices": ["auto", "peermem", "dmabuf", "none"], "default": "auto"},
    "dcgm_major": {"type": "int", "choices": [3, 4], "default": 4},
    "dcgm_cuda_major": {"type": "int"},
    "dcgm_version": {"type": "str", "default": "4.4.1"},
    "dcgm_exporter_version": {"type": "str", "default": "4.5.2"},
}
STACK_VARIABLES = tuple(STACK_SPEC)
