# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    # The option of the modules that read the node's files through module_utils.host.Host.
    DOCUMENTATION = r"""
options:
  root:
    description: Where the node's file system is mounted. Only tests change it.
    type: path
    default: /
"""
