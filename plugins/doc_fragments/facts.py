# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    # Options, the facts attribute and notes shared by the hardware facts modules (with gpuops.cluster.readonly).
    DOCUMENTATION = r"""
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. Only tests change it.
    type: path
    default: /sys
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
notes:
  - The module never reports a change.
  - To gather these facts with C(gather_facts) instead of a task, list the module in the
    C(facts_modules) setting, for example C(facts_modules = smart, gpuops.cluster.gpu_facts,
    gpuops.cluster.ib_facts) under C([defaults]) in C(ansible.cfg), or the C(ANSIBLE_FACTS_MODULES)
    environment variable. Options can then be set with C(module_defaults).
"""
