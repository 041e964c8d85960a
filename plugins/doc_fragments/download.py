# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations


class ModuleDocFragment:
    # Options and attributes of the modules that read mirrors and vendor repositories over HTTP (the air-gap bundle).
    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds for each request.
    type: int
    default: 60
  validate_certs:
    description: Check the servers' TLS certificates.
    type: bool
    default: true
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: The servers are read and what they serve is checked; nothing is written in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""
