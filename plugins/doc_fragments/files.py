# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    # Attributes of the modules that keep files of their own on a node (the fleet state).
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Nothing is written in check mode; the return says what would be.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: Each file written or deleted, before and after.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""
