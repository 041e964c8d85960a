# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation report's bandwidth picture: drawn only where there is a point to draw."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import report


def test_no_point_draws_no_figure(monkeypatch):
    def no_pyplot():
        raise AssertionError("a figure was made for runs without a point")

    monkeypatch.setattr(report, "_pyplot", no_pyplot)
    assert report.bandwidth_svg([], "gpu01") is None
    assert report.bandwidth_svg([{"subject": "nccl", "series": [{"size": 8, "busbw": None}]}], "gpu01") is None


def test_a_run_with_points_is_drawn_with_its_subject():
    pytest.importorskip("matplotlib")
    runs = [
        {
            "subject": "all_reduce 8 GPUs",
            "floor": 300,
            "series": [{"size": 2**k, "busbw": 10.0 * k} for k in range(3, 9)],
        }
    ]
    svg = report.bandwidth_svg(runs, "gpu01: all_reduce bus bandwidth")
    assert svg.startswith("<svg") and "all_reduce 8 GPUs" in svg and "gpu01: all_reduce bus bandwidth" in svg
