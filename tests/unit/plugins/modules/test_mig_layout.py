# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_layout with run_command mocked: the exact commands, a node already in its layout left alone,
check mode's per-GPU answer, an impossible layout refused before the apply, a failed apply."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.cluster.plugins.modules import mig_layout
from conftest import GPUSIM
from module_harness import Node, run_module

SMI = "/usr/bin/nvidia-smi"
APPLY = ("systemctl", "start", "nvidia-mig-manager.service")
XML = (GPUSIM / "profiles" / "dgx-h100" / "nvidia-smi-q-x.xml").read_text()
TUTORIAL = {"name": "tutorial", "gpus": [{"devices": [0], "profiles": {"7g.40gb": 7}}]}
SEVEN = {"name": "h100-inference", "gpus": [{"devices": [0], "profiles": {"1g.10gb": 7}}]}


def enabled_on_gpu0(xml):
    return xml.replace("<current_mig>Disabled</current_mig>", "<current_mig>Enabled</current_mig>", 1)


LGI = "".join(f"|   0  MIG 1g.10gb          19       {7 + i:>2}          {i}:1     |\n" for i in range(7))
LCI = "".join(f"|   0     {7 + i:>2}       MIG 1g.10gb          0         0          0:1     |\n" for i in range(7))


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_node_in_its_layout_is_left_alone(monkeypatch, check_mode):
    node = Node(
        monkeypatch,
        {"nvidia-smi": SMI},
        {
            (SMI, "-q", "-x"): (0, enabled_on_gpu0(XML), ""),
            (SMI, "mig", "-lgi"): (0, LGI, ""),
            (SMI, "mig", "-lci"): (0, LCI, ""),
        },
    )
    exited = run_module(mig_layout.main, {"layout": SEVEN}, check_mode=check_mode)
    assert not exited.failed and exited.result["changed"] is False and exited.result["changes"] == []
    assert node.calls == [[SMI, "-q", "-x"], [SMI, "mig", "-lgi"], [SMI, "mig", "-lci"]]


def test_check_mode_says_per_gpu_what_would_change_and_runs_nothing(monkeypatch):
    node = Node(monkeypatch, {"nvidia-smi": SMI}, {(SMI, "-q", "-x"): (0, XML, "")})
    exited = run_module(mig_layout.main, {"layout": SEVEN}, check_mode=True, diff=True)
    assert exited.result["changed"] is True
    assert exited.result["changes"] == [
        {
            "gpu": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "before": {"mig": "disabled", "instances": {}},
            "after": {"mig": "enabled", "instances": {"1g.10gb": 7}},
        }
    ]
    assert exited.result["summary"] == ["GPU 0 (NVIDIA H100 80GB HBM3): MIG disabled -> MIG enabled 1g.10gb x 7"]
    assert exited.result["diff"]["after"] == {"GPU 0": {"mig": "enabled", "instances": {"1g.10gb": 7}}}
    assert node.calls == [[SMI, "-q", "-x"]]


def test_an_impossible_layout_is_refused_before_anything_runs(monkeypatch):
    node = Node(monkeypatch, {"nvidia-smi": SMI}, {(SMI, "-q", "-x"): (0, XML, "")})
    exited = run_module(mig_layout.main, {"layout": TUTORIAL})
    assert exited.failed
    assert "7g.40gb x 7 does not fit" in exited.result["msg"] and "7g.80gb x 1" in exited.result["msg"]
    assert node.calls == [[SMI, "-q", "-x"]]


def test_apply_then_read_again(monkeypatch):
    outputs = {(SMI, "-q", "-x"): (0, XML, ""), APPLY: (0, "", "")}
    node = Node(monkeypatch, {"nvidia-smi": SMI}, outputs)

    # The apply changes what nvidia-smi answers next.
    def after_apply(_module, argv, **kwargs):
        answer = node.run_command(argv, **kwargs)
        if tuple(argv) == APPLY:
            outputs[SMI, "-q", "-x"] = (0, enabled_on_gpu0(XML), "")
            outputs[SMI, "mig", "-lgi"] = (0, LGI, "")
            outputs[SMI, "mig", "-lci"] = (0, LCI, "")
        return answer

    monkeypatch.setattr(mig_layout.AnsibleModule, "run_command", after_apply)
    exited = run_module(mig_layout.main, {"layout": SEVEN})
    assert not exited.failed and exited.result["changed"] is True
    assert exited.result["gpus"][0] == {"gpu": 0, "mig": "enabled", "instances": {"1g.10gb": 7}}
    assert [c[0] for c in node.calls] == [SMI, "systemctl", SMI, SMI, SMI]


def test_a_failed_apply_names_the_command_and_the_journal(monkeypatch):
    Node(monkeypatch, {"nvidia-smi": SMI}, {(SMI, "-q", "-x"): (0, XML, ""), APPLY: (1, "", "Job failed.\n")})
    exited = run_module(mig_layout.main, {"layout": SEVEN})
    assert exited.failed and "systemctl start nvidia-mig-manager.service` failed (rc 1)" in exited.result["msg"]
    assert "journalctl -u nvidia-mig-manager" in exited.result["msg"]


def test_an_apply_that_leaves_a_gpu_out_of_its_layout_fails(monkeypatch):
    Node(monkeypatch, {"nvidia-smi": SMI}, {(SMI, "-q", "-x"): (0, XML, ""), APPLY: (0, "", "")})
    exited = run_module(mig_layout.main, {"layout": SEVEN})
    assert exited.failed and "GPU 0 is still out of the layout h100-inference" in exited.result["msg"]


def test_without_the_driver(monkeypatch):
    Node(monkeypatch, {}, {})
    exited = run_module(mig_layout.main, {"layout": SEVEN})
    assert exited.failed and "nvidia-smi was not found" in exited.result["msg"]
