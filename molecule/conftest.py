# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Loaded by pytest for every scenario's tests: the shared test library, molecule/resources/testlib,
goes on the import path (driver_common, hosts, slurm_checks)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTLIB = Path(__file__).resolve().parent / "resources" / "testlib"
if str(TESTLIB) not in sys.path:
    sys.path.insert(0, str(TESTLIB))
