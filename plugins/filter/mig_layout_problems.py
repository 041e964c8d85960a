# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: mig_layout_problems
short_description: Why a MIG layout cannot be applied to a node's GPUs
version_added: 1.0.0
description:
  - Checks a layout (the mig role's C(mig_layout)) against the node's C(ansible_facts.nvidia_gpu),
    that is its shape, the GPU indices it names, whether each GPU can do MIG, and each GPU's profiles
    against that GPU model's profile table (placements and the slice budget), and, given the driver,
    whether that driver has MIG and the profiles on each GPU.
  - Each problem is one sentence that names the variable and the GPU; an impossible layout comes
    with what the GPU offers and the nearest layouts that fit.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The layout, a dict with C(name) and C(gpus), each entry of C(gpus) with C(devices) and C(profiles).
    type: raw
    required: true
  nvidia_gpu:
    description: The node's C(ansible_facts.nvidia_gpu) (from M(gpuops.cluster.gpu_facts)).
    type: dict
    required: true
  variable:
    description: The variable's name, for the messages.
    type: str
    default: mig_layout
  driver:
    description:
      - The driver the node will run, exact (V(580.95.05)) or a branch (V(580), taken at its newest).
      - With it, a GPU put in MIG mode is checked against the first driver with MIG on that GPU (MIG User
        Guide, Deployment Considerations), a profile against its own first driver, and drivers known to
        have MIG off on a GPU. Empty skips these checks.
    type: str
  driver_variable:
    description: The variable that sets O(driver), for the messages.
    type: str
    default: nvidia_driver_version
"""

EXAMPLES = r"""
- name: Refuse an impossible layout
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems | join(' ') }}"
  vars:
    __problems: "{{ mig_layout | gpuops.cluster.mig_layout_problems(ansible_facts.nvidia_gpu) }}"

- name: The same, and the driver the run installs
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems | join(' ') }}"
  vars:
    __problems: >-
      {{ mig_layout | gpuops.cluster.mig_layout_problems(ansible_facts.nvidia_gpu, driver='570.86.15',
         driver_variable='nvidia_driver_version') }}
"""

RETURN = r"""
_value:
  description: The problems, one sentence each; empty when the layout fits.
  type: list
  elements: str
"""

from ansible_collections.gpuops.cluster.plugins.module_utils.mig import layout_problems


def mig_layout_problems(
    layout, nvidia_gpu, variable="mig_layout", driver=None, driver_variable="nvidia_driver_version"
):
    return layout_problems(layout, nvidia_gpu, variable, driver, driver_variable)


class FilterModule:
    def filters(self):
        return {"mig_layout_problems": mig_layout_problems}
