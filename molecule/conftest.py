# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Loaded by pytest for every scenario's tests: the shared test library, molecule/resources/testlib,
goes on the import path (driver_common, hosts, slurm_checks), and so does the collection."""

from __future__ import annotations

import sys
from pathlib import Path

TESTLIB = Path(__file__).resolve().parent / "resources" / "testlib"
# The checkout as the collection (the committed .collections link), for tests that use its module_utils.
COLLECTIONS = Path(__file__).resolve().parents[1] / ".collections"
for path in (TESTLIB, COLLECTIONS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
