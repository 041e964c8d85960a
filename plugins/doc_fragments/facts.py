# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    # Attributes shared by the hardware facts modules.
    DOCUMENTATION = r"""
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. Only tests change it.
    type: path
    default: /sys
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - The module never reports a change.
  - To gather these facts with C(gather_facts) instead of a task, list the module in the
    C(facts_modules) setting, for example C(facts_modules = smart, gpuops.cluster.gpu_facts,
    gpuops.cluster.ib_facts) under C([defaults]) in C(ansible.cfg), or the C(ANSIBLE_FACTS_MODULES)
    environment variable. Options can then be set with C(module_defaults).
"""
