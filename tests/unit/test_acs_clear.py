# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""os_tuning's gpuops-acs-clear on a sysfs tree laid out as the kernel lays it out (each device's
path runs through the bridges above it) and a setpci stand-in keeping each bridge's ACS control."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "os_tuning" / "files" / "gpuops-acs-clear"
# A setpci that knows each bridge's ACS control register (ECAP_ACS+0x6.w) from a JSON file; a bridge
# not in the file has no ACS capability (setpci exits 1 as the real one does).
SETPCI = """#!/usr/bin/env python3
import json, sys
path = sys.argv[0] + ".json"
state = json.load(open(path))
slot, register = sys.argv[2], sys.argv[3]
if slot not in state:
    sys.exit(1)
if "=" in register:
    state[slot] = state[slot] if "stuck" in state else register.split("=")[1]
    json.dump(state, open(path, "w"))
else:
    print(state[slot])
"""


def device(sysfs: Path, chain: list[str], vendor: str, klass: str) -> None:
    path = sysfs / "devices" / "pci0000:00"
    for address in chain:
        path = path / address
        path.mkdir(parents=True, exist_ok=True)
    (path / "vendor").write_text(vendor + "\n")
    (path / "class").write_text(klass + "\n")
    link = sysfs / "bus" / "pci" / "devices" / chain[-1]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(path, link.parent))


@pytest.fixture
def node(tmp_path):
    sysfs = tmp_path / "sys"
    switch = ["0000:00:01.0", "0000:4d:00.0"]  # root port, switch upstream port (no ACS)
    for bridge in (switch[:1], switch, [*switch, "0000:4e:00.0"], [*switch, "0000:4e:01.0"], ["0000:00:02.0"]):
        device(sysfs, bridge, "0x8086", "0x060400")
    device(sysfs, [*switch, "0000:4e:00.0", "0000:4f:00.0"], "0x15b3", "0x020700")  # ConnectX-7, InfiniBand
    device(sysfs, [*switch, "0000:4e:01.0", "0000:53:00.0"], "0x10de", "0x030200")  # H100
    device(sysfs, ["0000:00:02.0", "0000:02:00.0"], "0x1af4", "0x010000")  # a virtio disk: not ours
    setpci = tmp_path / "setpci"
    setpci.write_text(SETPCI)
    setpci.chmod(0o755)
    state = {"0000:00:01.0": "0000", "0000:4e:00.0": "001d", "0000:4e:01.0": "001d", "0000:00:02.0": "001d"}
    Path(f"{setpci}.json").write_text(json.dumps(state))
    return sysfs, setpci


def clear(sysfs, setpci):
    env = dict(os.environ, GPUOPS_SYSFS=str(sysfs), GPUOPS_SETPCI=str(setpci))
    return subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, check=False)


def test_the_bridges_above_the_gpu_and_nic_are_cleared_and_no_other(node):
    sysfs, setpci = node
    done = clear(sysfs, setpci)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gpuops-acs-clear: 0000:00:01.0 ACS control already 0000",
        "gpuops-acs-clear: 0000:4d:00.0 has no ACS capability",
        "gpuops-acs-clear: 0000:4e:00.0 ACS control 001d -> 0000",
        "gpuops-acs-clear: 0000:4e:01.0 ACS control 001d -> 0000",
    ]
    state = json.loads(Path(f"{setpci}.json").read_text())
    assert state == {"0000:00:01.0": "0000", "0000:4e:00.0": "0000", "0000:4e:01.0": "0000", "0000:00:02.0": "001d"}
    # At the next boot (here: run again) there is nothing left to change.
    assert "->" not in clear(sysfs, setpci).stdout


def test_a_register_that_keeps_its_value_fails_the_unit(node):
    sysfs, setpci = node
    state = json.loads(Path(f"{setpci}.json").read_text())
    Path(f"{setpci}.json").write_text(json.dumps({**state, "stuck": "1"}))
    done = clear(sysfs, setpci)
    assert done.returncode == 1
    assert "0000:4e:00.0 ACS control is still 001d after writing 0000" in done.stderr


def test_a_node_without_gpus_or_nics_changes_nothing(tmp_path):
    sysfs = tmp_path / "sys"
    device(sysfs, ["0000:00:02.0", "0000:02:00.0"], "0x1af4", "0x010000")
    done = clear(sysfs, tmp_path / "no-setpci")
    assert done.returncode == 0
    assert done.stdout == "gpuops-acs-clear: no bridge above a GPU or NIC (0 such devices on PCI): nothing to clear\n"
