# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops-health, the node health check between runs: its checks against the gpusim stand-in tools
of a profile (healthy, and each fault), the Xids it keeps, what it does in Slurm (drain, re-reason,
resume only its own drains), node-problem-detector's exit codes, and bad configuration."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuops.cluster.plugins.module_utils import health as h
from ansible_collections.gpuops.cluster.plugins.module_utils import node_state as ns
from ansible_collections.gpuops.cluster.plugins.module_utils.dcgm import parse_dcgmi_health
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from conftest import GPUSIM, ROOT, load_script, profile_facts

# The command the validate role installs beside the collection's code (roles/validate/files).
cli = load_script(ROOT / "roles/validate/files/gpuops_health.py", "gpuops_health")

DRIVER = "580.95.05"


def stand_in(path):
    """A stand-in's source, run by this Python (its shebang finds no python on the stand-ins' PATH)."""
    return f"#!{sys.executable}\n" + path.read_text().split("\n", 1)[1]


# The tail of a drain reason that names its evidence bundle (node_state.reason).
EVIDENCE = r" \(evidence \d{8}T\d{6}Z\)"


class FakeNode(cli.Node):
    """The gpusim stand-ins of a profile run for real; sinfo and scontrol answered from a model of the
    node's Slurm state, which records each update."""

    def __init__(self, tmp_path, profile, faults=None, drained=False, reason=""):
        super().__init__()
        self.bin = tmp_path / "bin"
        self.bin.mkdir(exist_ok=True)
        smi = stand_in(GPUSIM / "repo" / "nvidia-smi.py")
        (self.bin / "nvidia-smi").write_text(smi.replace("@DRIVER_VERSION@", DRIVER).replace("@CUDA_VERSION@", "12.8"))
        for tool in ("ibstat", "dmesg"):
            (self.bin / tool).write_text(stand_in(GPUSIM / "bin" / tool))
        self.hostengine = None
        for tool in self.bin.iterdir():
            tool.chmod(0o755)
        self.faults = tmp_path / "faults.json"
        self.profile = profile
        self.set_faults(faults or {})
        self.drained, self.reason, self.updates, self.jobs = drained, reason, [], False
        # Slurm's reboot: asked (scontrol reboot), under way (sinfo's boot), then down with the reason.
        self.reboots, self.rebooting, self.down = [], False, False
        # The rest of the fleet as sinfo prints it (the budget's count), and this node's boot.
        self.fleet, self.boot, self.clock = [f"gpu-{n}|idle|none" for n in range(2, 21)], "boot-1", 1_800_000_000.0
        # Each node's Slurm Comment (the budget's memory and latch), as sinfo -O prints it.
        self.comments = {}
        self.spawned = []
        self.config = tmp_path / "health.json"
        self.state = tmp_path / "state.json"
        facts = profile_facts(profile)
        infiniband = [
            line.split("'")[1]
            for line in (GPUSIM / "profiles" / profile / "ibstat.txt").read_text().splitlines()
            if line.startswith("CA '")
        ]
        self.config.write_text(
            json.dumps(
                {
                    "node": "gpu-1",
                    "pci_gpus": facts["pci_gpu_count"],
                    "nvswitch_count": facts["nvswitch_count"],
                    "hcas": infiniband,
                    "hca_pci": facts.get("hca_pci") or [],
                    "fabric": "auto",
                }
            )
        )

    def booted_at(self, _config):
        """This boot's start: an hour ago, until a test says otherwise."""
        return getattr(self, "boot_time", time.time() - 3600)

    @property
    def owes(self):
        """The drain reason without its evidence bundle's stamp (test_a_drain_names_its_evidence_in_its_reason)."""
        return re.sub(EVIDENCE + r"\Z", "", self.reason)

    def set_faults(self, faults):
        self.faults.write_text(json.dumps(faults))

    def run(self, argv, timeout=None):  # noqa: PLR0911 - one answer per command
        if argv[0] == "sinfo" and "-O" in argv:
            names = ["gpu-1", *(line.split("|")[0] for line in self.fleet)]
            return "".join(f"{n}|{self.comments.get(n) or '(null)'}\n" for n in names), None
        if argv[0] == "sinfo":
            state = ("drng" if self.drained else "mix") if self.jobs else ("drain" if self.drained else "idle")
            if self.rebooting:
                state = "drng@" if self.jobs else "boot"
            elif self.down and not self.drained:
                state = "down"
            out = self.drained or self.down or self.rebooting
            line = f"gpu-1|{state}|{self.reason if out else 'none'}\n"
            return (line if "-n" in argv else line + "".join(f"{other}\n" for other in self.fleet)), None
        if argv[0] == "scontrol" and argv[1] == "reboot":
            self.reboots.append(argv[2:])
            if self.refuse_reboot:
                return None, "scontrol: error: RebootProgram isn't defined"
            self.rebooting = True
            self.reason = dict(word.partition("=")[::2] for word in argv[2:]).get("reason", self.reason)
            return "", None
        if argv[0] == "scontrol":
            self.updates.append(argv[2:])
            fields = dict(word.partition("=")[::2] for word in argv[2:])
            if "Comment" in fields:
                self.comments[fields["NodeName"]] = fields["Comment"]
            if "State" not in fields:
                return "", None
            self.drained = fields["State"] == "DRAIN"
            self.down = self.down and self.drained
            self.reason = fields.get("Reason", "") if self.drained else ""
            return "", None
        env = self.env()
        path = self.bin / argv[0]
        if not path.exists():
            return None, f"{argv[0]} is not installed"
        done = subprocess.run([str(path), *argv[1:]], capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0 and not done.stdout.strip():
            return None, f"`{' '.join(argv)}` exited {done.returncode}"
        return done.stdout, None

    def env(self):
        return {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "GPUSIM_FAULTS": str(self.faults),
            "GPUSIM_PROFILE_DIR": str(GPUSIM / "profiles" / self.profile),
            "GPUSIM_DCGM_WATCHES": str(self.faults.parent / "dcgm-watches"),
            "GPUSIM_HOSTENGINE": f"127.0.0.1:{self.hostengine or 1}",
            "GPUSIM_NVIDIA_SMI": str(self.bin / "nvidia-smi"),
            "GPUSIM_MIG_STATE": str(self.faults.parent / "mig.json"),
            "LC_ALL": "C",
        }

    def file(self, path):
        return f"{self.boot}\n" if path == "/proc/sys/kernel/random/boot_id" else super().file(path)

    def now(self):
        self.clock += 60
        return self.clock

    def follow(self):
        """The stand-in dmesg -w, with this node's faults: it prints Xids injected later as they come."""
        env = dict(self.env(), PYTHONUNBUFFERED="1")
        self.follower = subprocess.Popen([str(self.bin / "dmesg"), "-w"], stdout=subprocess.PIPE, bufsize=0, env=env)
        return self.follower

    refuse_reboot = False

    def rebooted(self, boot="boot-2"):
        """What Slurm and the node do with a reboot asked (nextstate=DOWN): RebootProgram, a new boot id,
        the kernel log empty (the injected faults gone), slurmd registering: down, ': reboot complete'."""
        assert self.rebooting, "no reboot was asked"
        self.rebooting, self.down, self.drained, self.boot = False, True, False, boot
        self.reason += " : reboot complete"
        self.set_faults({})

    def no_repair(self):
        """The check without its repair steps (validate_health_reset and _reboot: false): the state machine alone."""
        config = json.loads(self.config.read_text())
        self.config.write_text(json.dumps(dict(config, repair_reset=False, repair_reboot=False)))
        return self

    def with_dcgm(self, listening):
        """DCGM installed (the stand-in dcgmi), its host engine a socket on a free port (closed: not running),
        and the check configured as the role writes it for this profile."""
        (self.bin / "dcgmi").write_text(stand_in(GPUSIM / "repo" / "dcgmi.py"))
        (self.bin / "dcgmi").chmod(0o755)
        self.hostengine = listening.getsockname()[1]
        config = json.loads(self.config.read_text())
        config["dcgm_watches"] = "pmitdn" if profile_facts(self.profile)["nvswitch_count"] else "pmitd"
        self.config.write_text(json.dumps(config))
        return self

    def spawn(self, argv, unit):
        """What the drain starts apart from the check (the evidence mode): recorded, not run."""
        self.spawned.append((argv, unit))
        return True, f"unit {unit}"

    def check(self, mode="slurm", *extra):
        return cli.main(["--mode", mode, "--config", str(self.config), "--state", str(self.state), *extra], node=self)


def records(node):
    config = h.load_config(node.config.read_text())
    found, _faults, _recovery, _seen = h.node_checks(config, node.read, {}, "boot-1")
    return {(r["check"], r["subject"]): r["verdict"] for r in found}


def test_a_healthy_dgx_h100_passes_every_quick_check(tmp_path):
    found = records(FakeNode(tmp_path, "dgx-h100"))
    assert found == {
        ("gpu_count", "node"): "pass",
        ("persistence_mode", "all GPUs"): "pass",
        ("ecc", "all GPUs"): "pass",
        ("fabric", "all GPUs"): "pass",
        ("xid", "all GPUs"): "pass",
        ("ib_ports", "8 InfiniBand port(s)"): "pass",
    }


def test_each_fault_fails_its_check(tmp_path):
    node = FakeNode(
        tmp_path,
        "dgx-h100",
        {
            "lost_gpus": {"count": 1},
            "fabric": [{"gpu": 2, "state": "In Progress", "status": "N/A"}],
            "xid": [{"gpu": 1, "xid": 48}],
            "ib_rate": {"mlx5_4": 200},
        },
    )
    failed = {key for key, verdict in records(node).items() if verdict == "fail"}
    assert failed == {("gpu_count", "node"), ("fabric", "GPU2"), ("xid", "GPU1"), ("ib_ports", "mlx5_4:1")}


def test_a_pcie_node_without_nvswitch_skips_the_fabric_with_the_reason(tmp_path):
    found = records(FakeNode(tmp_path, "pcie-l40s"))
    assert found[("fabric", "all GPUs")] == "skip"
    assert "fail" not in found.values()


def xid(number, line_number, gpu="0000:53:00"):
    return {"xid": number, "pci": gpu, "line": f"[{line_number}.0] NVRM: Xid (PCI:{gpu}): {number}, pid=1"}


def test_xid_lines_are_counted_once_per_boot_and_the_memory_of_them_stays_bounded():
    state, new = h.xid_seen({}, "boot-1", [xid(13, 1), xid(79, 2)])
    assert [x["xid"] for x in new] == [13, 79]
    # The next check reads the same kernel log: nothing new.
    state, new = h.xid_seen(state, "boot-1", [xid(13, 1), xid(79, 2)])
    assert new == []
    # A reboot starts over.
    _state, new = h.xid_seen(state, "boot-2", [xid(13, 1)])
    assert [x["xid"] for x in new] == [13]
    flood, _new = h.xid_seen({}, "boot-1", [xid(13, n) for n in range(2000)])
    assert len(flood["seen"]) == h._SEEN_LIMIT and len(json.dumps(flood)) < 20000


@pytest.mark.parametrize(
    ("failed", "drained", "reason", "action"),
    [
        (False, False, "", "none"),
        (True, False, "", "drain"),
        (True, True, "gpuops-health: fabric GPU2", "drain"),  # another finding: the reason changes
        (True, True, "gpuops-health: gpu_count node", "keep"),  # the same finding: nothing to do
        (True, True, "cable check", "keep"),  # a person's drain
        (True, True, "gpuops-validate: nvlink GPU3", "keep"),  # validation's drain
        (True, True, "gpuops mig layout all-1g.10gb", "keep"),  # a rollout's drain
        (False, True, "gpuops-health: gpu_count node", "resume"),
        (False, True, "cable check", "none"),
        (False, True, "gpuops-validate: nvlink GPU3", "none"),
    ],
)
def test_it_drains_and_resumes_only_what_it_drained(failed, drained, reason, action):
    verdict = "fail" if failed else "pass"
    checks = [{"check": "gpu_count", "subject": "node", "verdict": verdict, "expected": 8, "measured": 7}]
    before = ns.new_state("boot-1")
    if drained and reason == "gpuops-health: gpu_count node":
        before = ns.advance(before, [dict(checks[0], verdict="fail")], [], boot_id="boot-1", now=1)
    state = ns.advance(before, checks, [], boot_id="boot-1", now=2)
    assert ns.decide(state, drained, reason, h.PREFIX)[0] == action


def test_slurm_mode_drains_then_re_reasons_then_resumes_its_own_drain(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100", {"lost_gpus": {"count": 1}})
    assert node.check() == 0
    assert (node.drained, node.owes) == (True, "gpuops-health: gpu_count node")
    node.set_faults({"fabric": [{"gpu": 2, "state": "Not Started", "status": "N/A"}]})
    assert node.check() == 0 and node.owes == "gpuops-health: fabric GPU2"
    node.set_faults({})
    assert node.check() == 0 and not node.drained
    assert node.updates[-1] == ["NodeName=gpu-1", "State=RESUME"]
    assert "resume: every check it was drained for passed again, nothing owed" in capsys.readouterr().out


def test_the_textfile_tells_prometheus_what_failed_and_whether_it_drained(tmp_path):
    """Where the node exporter's textfile folder exists, each run leaves its result there, whole (the
    collector never reads half a file): the failed checks, and in Slurm mode its own drain."""
    node = FakeNode(tmp_path, "dgx-h100", {"lost_gpus": {"count": 1}})
    folder = tmp_path / "node-exporter"
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps(dict(config, textfile_dir=str(folder))))
    assert node.check() == 0 and not (folder / h.TEXTFILE).exists()  # no folder: no node exporter there
    folder.mkdir()
    assert node.check() == 0
    text = (folder / h.TEXTFILE).read_text()
    assert 'gpuops_health_failed{check="gpu_count",subject="node"} 1' in text
    drained = r'^gpuops_health_drained[{]reason="gpuops-health: gpu_count node' + EVIDENCE + '"[}] 1$'
    assert re.search(drained, text, re.M)
    assert re.search(r"^gpuops_health_last_check_timestamp_seconds \d{10}$", text, re.M)
    node.set_faults({})
    assert node.check() == 0
    text = (folder / h.TEXTFILE).read_text()
    assert "gpuops_health_failed{" not in text and 'gpuops_health_drained{reason=""} 0' in text
    # A person's drain is not ours.
    node.drained, node.reason = True, "cable check"
    node.set_faults({"lost_gpus": {"count": 1}})
    assert node.check() == 0 and 'gpuops_health_drained{reason=""} 0' in (folder / h.TEXTFILE).read_text()
    # The report mode prints what failed and leaves the textfile as the node's own check wrote it: a
    # person's look must not take the drain away from Prometheus (it once did: GpuopsNodeDrainedByHealthCheck
    # resolved while the node stayed drained).
    node.reason = "gpuops-health: gpu_count node"
    assert node.check() == 0
    before = (folder / h.TEXTFILE).read_text()
    assert 'gpuops_health_drained{reason="gpuops-health: gpu_count node"} 1' in before
    assert node.check("report") == 1
    assert (folder / h.TEXTFILE).read_text() == before
    assert [p.name for p in folder.iterdir()] == [h.TEXTFILE]


def test_the_textfile_passes_promtools_metrics_check_with_any_label_text():
    promtool = subprocess.run(
        [str(ROOT / "tests" / "scripts" / "promtool.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    checks = [
        {"check": "ib_ports", "subject": 'mlx5_0:1 "odd"\\name\nline', "verdict": "fail", "expected": 1, "measured": 0},
        {"check": "ecc", "subject": "all GPUs", "verdict": "pass", "expected": 1, "measured": 1},
    ]
    timing = {"fault_since": 1764299000.5, "drained_since": 1764299100.0, "last_repair_s": 640.2}
    text = h.textfile(checks, 1764300000, "gpuops-health: ib_ports mlx5_0:1", True, timing)
    out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert text.count("gpuops_health_failed{") == 1


def test_slurm_mode_leaves_a_person_s_drain_as_it_is(tmp_path):
    node = FakeNode(tmp_path, "dgx-h100", {"lost_gpus": {"count": 1}}, drained=True, reason="cable check")
    assert node.check() == 0
    node.set_faults({})
    assert node.check() == 0
    assert node.updates == [] and (node.drained, node.owes) == (True, "cable check")


def test_a_fatal_xid_keeps_the_node_drained_until_cleared(tmp_path):
    node = FakeNode(tmp_path, "dgx-h100", {"xid": [{"gpu": 3, "xid": 79}]}).no_repair()
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU3, xid GPU3"
    node.set_faults({})  # the line leaves the kernel log (say, the ring buffer wrapped): still owed
    assert node.check() == 0 and node.drained and node.owes == "gpuops-health: reboot GPU3"
    assert node.check("slurm", "--clear-xids") == 0 and not node.drained
    history = json.loads(node.state.read_text())["node"]["history"]
    assert any("cleared by a person" in event["detail"] for event in history)


def test_npd_mode_answers_with_node_problem_detector_s_exit_codes(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100")
    assert node.check("npd") == h.NPD_OK
    node.set_faults({"fabric": [{"gpu": 0, "state": "In Progress", "status": "N/A"}]})
    assert node.check("npd") == h.NPD_NONOK
    assert capsys.readouterr().out.splitlines()[-1] == "gpuops-health: fabric GPU0"
    node.config.write_text("{")
    assert node.check("npd") == h.NPD_UNKNOWN
    assert node.updates == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "is not JSON"),
        ("[]", "not an object"),
        ('{"pci_gpus": "8"}', "pci_gpus must be int"),
        ('{"pci_gpus": true}', "pci_gpus must be int"),
        ('{"hcas": "mlx5_0"}', "hcas must be list"),
        ('{"fabric": "Omni-Path"}', "fabric must be auto"),
        ('{"repair_reset": "yes"}', "repair_reset must be bool"),
        ('{"budget_nodes": 0}', "budget_nodes (validate_health_budget_nodes) is 0"),
        ('{"quarantine_faults": -1}', "quarantine_faults (validate_health_quarantine_faults) is -1"),
        ('{"quarantine_days": 0}', "quarantine_days (validate_health_quarantine_days) is 0"),
        ('{"budget_percent": 150}', "budget_percent (validate_health_budget_percent) is 150"),
        ('{"budget_percent": 0}', "budget_percent (validate_health_budget_percent) is 0"),
    ],
)
def test_bad_configuration_is_named_with_the_fix_and_drains_the_node_it_cannot_check(tmp_path, capsys, text, words):
    node = FakeNode(tmp_path, "pcie-l40s")
    node.config.write_text(text)
    # Slurm: exit 0 all the same (slurmd would not register), the reason on stderr; the node is drained
    # with it (fail closed: a node that cannot be checked takes no job).
    assert node.check() == 0
    err = capsys.readouterr().err
    assert words in err and "health_check" in err
    assert node.updates[-1][1] == "State=DRAIN"
    assert node.updates[-1][2].startswith("Reason=gpuops-health: cannot check: ") and words in node.updates[-1][2]


def test_a_missing_configuration_names_the_entry_point_that_writes_it(tmp_path, capsys):
    node = FakeNode(tmp_path, "pcie-l40s")
    node.config.unlink()
    assert node.check("report") == 2
    assert "run the validate role's health_check entry point" in capsys.readouterr().err


def test_the_role_copies_every_module_the_health_check_imports():
    """The validate role copies a list of module_utils to the node (no Ansible there); it must be the
    import closure of health.py, or the check fails on the node with an ImportError."""
    folder = ROOT / "plugins" / "module_utils"
    needed, todo = set(), ["health"]
    while todo:
        name = todo.pop()
        needed.add(name)
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "ansible_collections.gpuops.cluster"
            ):
                parts = node.module.split(".")
                names = [parts[-1]] if parts[-1] != "module_utils" else [alias.name for alias in node.names]
                todo += [n for n in names if n not in needed and (folder / f"{n}.py").exists()]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible"):
                pytest.fail(f"{name}.py imports {node.module}, which a node without Ansible lacks")
    listed = yaml.safe_load((ROOT / "roles/validate/vars/main.yml").read_text())["__validate_health_modules"]
    assert sorted(listed) == sorted(needed - {"../../roles/validate/files/gpuops_health"})


def installed(tmp_path):
    """The role's layout on a node: the launcher (files/gpuops-health) and the one file of code its
    health_check task writes (the command and its module list, each source by name), in TMP_PATH."""
    role_vars = yaml.safe_load((ROOT / "roles/validate/vars/main.yml").read_text())
    code = {"gpuops_health": (ROOT / "roles/validate/files/gpuops_health.py").read_text()}
    for module in role_vars["__validate_health_modules"]:
        code[module] = (ROOT / "plugins/module_utils" / f"{module}.py").read_text()
    (tmp_path / "gpuops-health.json").write_text(json.dumps(code))
    launcher = tmp_path / "gpuops-health"
    shutil.copy(ROOT / "roles/validate/files/gpuops-health", launcher)
    return launcher


def run_installed(tmp_path, *args):
    return subprocess.run(
        [str(tmp_path / "gpuops-health"), *args],
        capture_output=True,
        text=True,
        # slurmd's environment: a short PATH, no user site; the code's path as the role writes it.
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONNOUSERSITE": "1",
            "GPUOPS_HEALTH_CODE": str(tmp_path / "gpuops-health.json"),
        },
        check=False,
    )


def test_the_installed_launcher_runs_with_the_node_s_python_and_no_ansible(tmp_path):
    """The role's layout on a node (the launcher and its one file of code) runs gpuops-health with
    /usr/bin/python3 alone: nothing imports Ansible."""
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3")
    installed(tmp_path)
    (tmp_path / "health.json").write_text(json.dumps({"pci_gpus": 0, "fabric": "none"}))
    done = run_installed(
        tmp_path, "--json", "--config", str(tmp_path / "health.json"), "--state", str(tmp_path / "state.json")
    )
    assert "Traceback" not in done.stderr, done.stderr
    result = json.loads(done.stdout)
    # No nvidia-smi here: the GPU check fails naming it, and the run still ends with its records.
    assert result["verdict"] == "fail"
    assert result["checks"][0]["reason"] == "nvidia-smi is not installed"
    # A person's look (report mode) changes nothing, not even the state file; the node's own check keeps it.
    assert not (tmp_path / "state.json").exists()
    done = run_installed(
        tmp_path, "--mode", "npd", "--config", str(tmp_path / "health.json"), "--state", str(tmp_path / "state.json")
    )
    assert done.returncode == h.NPD_NONOK and "Traceback" not in done.stderr, done.stderr
    assert list(json.loads((tmp_path / "state.json").read_text())["node"]["failed"]) == ["gpu_count node"]


@pytest.mark.parametrize("damage", ["missing", "not json", "no command"])
def test_a_launcher_without_its_code_says_so_and_cannot_check(tmp_path, damage):
    """Code gone or damaged: "cannot check" and the fix, exit 2; under slurmd exit 0, as the check's own
    "cannot check" (slurmd would not register a node whose HealthCheckProgram fails at start)."""
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3")
    installed(tmp_path)
    code = tmp_path / "gpuops-health.json"
    if damage == "missing":
        code.unlink()
    else:
        code.write_text("{" if damage == "not json" else json.dumps({"health": ""}))
    done = run_installed(tmp_path, "--json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "gpuops-health: cannot check this node: cannot read its code from" in done.stderr
    assert "run the validate role's health_check entry point again" in done.stderr
    assert run_installed(tmp_path, "--mode", "slurm").returncode == 0


def test_slurmd_s_short_path_still_finds_root_s_tools():
    """slurmd gives its HealthCheckProgram PATH=/usr/bin:/bin: ibstat (/usr/sbin) must still be found,
    or every node with HCAs fails ib_ports (seen in molecule/slurm_cluster before this)."""
    assert cli.search_path("/usr/bin:/bin").split(":") == list(cli.STANDARD_PATH)
    assert cli.search_path("/opt/site/bin:/usr/bin").split(":") == [*cli.STANDARD_PATH, "/opt/site/bin"]


def test_sysfs_counts_nvidia_display_and_3d_controllers_only(tmp_path):
    """The PCI count without lspci (node_health's and gpuops-health's): NVIDIA 0300/0302 functions,
    not NVSwitches (0680), not other vendors; a missing folder counts none."""
    devices = {
        "0000:18:00.0": ("0x10de", "0x030200"),  # H100 (3D controller)
        "0000:2a:00.0": ("0x10de", "0x030000"),  # L40S (VGA)
        "0000:c5:00.0": ("0x10de", "0x068000"),  # NVSwitch (bridge)
        "0000:4f:00.0": ("0x15b3", "0x020700"),  # ConnectX-7
    }
    for name, (vendor, klass) in devices.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "vendor").write_text(vendor + "\n")
        (tmp_path / name / "class").write_text(klass + "\n")
    assert h.sysfs_gpus(str(tmp_path)) == 2
    assert h.sysfs_gpus(str(tmp_path / "missing")) == 0


@pytest.fixture
def hostengine():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)
        yield listening


def dcgm_records(node):
    config = h.load_config(node.config.read_text())
    found, _faults, _recovery, _seen = h.node_checks(config, node.read, {}, "boot-1")
    return [r for r in found if r["check"] == "dcgm_health"]


def test_dcgm_health_sets_the_watches_it_finds_off_then_reads_them(tmp_path, hostengine):
    """nv-hostengine keeps no health watch across a restart: the first check sets those of the node's
    systems (NVLink on an NVSwitch node) and is a visible skip; the next one passes on DCGM's answer."""
    node = FakeNode(tmp_path, "dgx-h100").with_dcgm(hostengine)
    (first,) = dcgm_records(node)
    assert (first["verdict"], first["measured"]) == ("skip", "watches off")
    assert "dcgmi health -s pmitdn" in first["reason"]
    assert (tmp_path / "dcgm-watches").read_text() == "pmitdn"
    (second,) = dcgm_records(node)
    assert (second["subject"], second["verdict"], second["measured"]) == ("all GPUs", "pass", "Healthy")


def test_a_dcgm_failure_drains_its_gpu_and_a_warning_does_not(tmp_path, hostengine, capsys):
    node = FakeNode(tmp_path, "pcie-l40s").with_dcgm(hostengine).no_repair()
    (tmp_path / "dcgm-watches").write_text("pmitd")
    message = "Detected 2 volatile double-bit ECC error(s) in GPU 3."
    node.set_faults({"dcgm_health": {"gpu": 3, "system": "Memory system", "health": "Failure", "message": message}})
    (record,) = dcgm_records(node)
    assert (record["subject"], record["verdict"]) == ("GPU3", "fail")
    assert record["measured"] == f"Memory system: Failure: {message}"
    assert node.check() == 0
    assert node.owes == "gpuops-health: reset GPU3, dcgm_health GPU3"
    replays = "Detected more than 8 PCIe replays per minute for GPU 1 : 23"
    node.set_faults({"dcgm_health": {"gpu": 1, "system": "PCIe system", "health": "Warning", "message": replays}})
    (record,) = dcgm_records(node)
    assert (record["subject"], record["verdict"], record["measured"]) == (
        "GPU1",
        "warn",
        f"PCIe system: Warning: {replays}",
    )
    node.check()
    # A warning is no reason to drain, and the Failure's memory fault still owes its GPU a reset.
    assert node.drained and node.owes == "gpuops-health: reset GPU3"
    node.boot = "boot-2"  # the node rebooted: its GPUs were reset
    (tmp_path / "dcgm-watches").write_text("pmitd")
    node.set_faults({})
    node.check()
    assert not node.drained
    capsys.readouterr()


def test_dcgm_health_not_installed_is_a_skip_and_an_engine_that_does_not_answer_a_warning(tmp_path):
    node = FakeNode(tmp_path, "pcie-l40s")
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps({**config, "dcgm_watches": "pmitd"}))
    (record,) = dcgm_records(node)
    assert (record["verdict"], record["reason"]) == ("skip", "DCGM is not installed on this node")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: nothing answers there
        node.with_dcgm(closed)
        (record,) = dcgm_records(node)
    assert record["verdict"] == "warn"
    assert "unable to establish a connection" in record["reason"] and "nv-hostengine running?" in record["reason"]


# ---------------------------------------------------------------------------------------------
# Resumed only on proof, fail closed, within the budget (issue 58): each test below failed on the
# release before the node state machine.


def test_xid_154_node_reboot_required_keeps_the_node_drained_until_it_reboots(tmp_path):
    reboot = "0x2 (Node Reboot Required)"
    node = FakeNode(tmp_path, "dgx-h100", {"xid": [{"gpu": 1, "xid": 154, "action": reboot}]}).no_repair()
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU1, xid GPU1"
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU1"  # same boot: still owed
    node.set_faults({})
    assert node.check() == 0 and node.drained
    node.boot = "boot-2"  # the reboot, observed by a new boot id
    assert node.check() == 0 and not node.drained
    events = [e["event"] for e in json.loads(node.state.read_text())["node"]["history"]]
    assert events == ["fault", "failed", "evidence", "drain", "passed", "drain", "observed", "resume"]


def test_xid_94_with_154_gpu_reset_required_stays_until_the_driver_says_the_gpu_was_reset(tmp_path):
    """Xid 94 (contained ECC, RESTART_APP) alone warns; the 154 line after it asks for a GPU reset, and the
    driver's recovery action says Reset until the GPU is reset (then None again)."""
    reset = "0x1 (GPU Reset Required)"
    faults = {"xid": [{"gpu": 4, "xid": 94}, {"gpu": 4, "xid": 154, "action": reset}],
              "recovery_action": [{"gpu": 4, "action": "Reset"}]}  # fmt: skip
    node = FakeNode(tmp_path, "dgx-h100", faults).no_repair()
    assert node.check() == 0
    assert node.owes == "gpuops-health: reset GPU4, recovery_action GPU4, xid GPU4"
    node.set_faults({"recovery_action": [{"gpu": 4, "action": "Reset"}]})
    assert node.check() == 0 and node.owes == "gpuops-health: reset GPU4, recovery_action GPU4"
    node.set_faults({})  # the driver says nothing now: no proof of a reset, and no recovery_action record
    assert node.check() == 0 and node.owes == "gpuops-health: reset GPU4, recovery_action GPU4"
    node.set_faults({"recovery_action": [{"gpu": 4, "action": "None"}]})  # after nvidia-smi -r, as the driver says
    assert node.check() == 0 and not node.drained


def test_the_stand_in_driver_s_recovery_action_is_none_once_the_gpu_is_reset(tmp_path):
    node = FakeNode(tmp_path, "dgx-h100", {"recovery_action": [{"gpu": 4, "action": "Reset"}]})
    assert records(node)[("recovery_action", "GPU4")] == "fail"
    out, why = node.run(["nvidia-smi", "-i", "4", "-r"])
    assert why is None and "successfully reset" in out, why
    assert json.loads(node.faults.read_text())["recovery_action"] == [{"gpu": 4, "action": "None"}]
    assert records(node)[("recovery_action", "GPU4")] == "pass"


def test_a_dcgm_failure_survives_a_restart_of_the_host_engine(tmp_path, hostengine):
    node = FakeNode(tmp_path, "pcie-l40s").with_dcgm(hostengine).no_repair()
    (tmp_path / "dcgm-watches").write_text("pmitd")
    message = "Detected 2 volatile double-bit ECC error(s) in GPU 3."
    node.set_faults({"dcgm_health": {"gpu": 3, "system": "Memory system", "health": "Failure", "message": message}})
    assert node.check() == 0 and node.owes == "gpuops-health: reset GPU3, dcgm_health GPU3"
    # nv-hostengine restarts: no watch is on, the check sets them and skips; DCGM forgot the incident.
    (tmp_path / "dcgm-watches").unlink()
    node.set_faults({})
    assert node.check() == 0 and node.owes == "gpuops-health: reset GPU3, dcgm_health GPU3"
    # The watches read Healthy now: the check passed, the memory fault still owes its GPU a reset.
    assert node.check() == 0 and node.owes == "gpuops-health: reset GPU3"


def test_report_mode_changes_nothing_so_slurmd_s_check_still_sees_the_xid(tmp_path):
    node = FakeNode(tmp_path, "dgx-h100", {"xid": [{"gpu": 3, "xid": 79}]})
    assert node.check("report") == 1
    assert not node.state.exists()
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU3, xid GPU3"


def test_a_check_that_skips_does_not_resume_the_node_drained_for_it(tmp_path):
    node = FakeNode(tmp_path, "dgx-h100", {"ib_rate": {"mlx5_4": 200}})
    assert node.check() == 0 and node.owes.startswith("gpuops-health: ib_ports")
    (node.bin / "ibstat").unlink()  # ibstat gone: ib_ports cannot measure
    node.set_faults({})
    assert node.check() == 0 and node.drained
    (node.bin / "ibstat").write_text(stand_in(GPUSIM / "bin" / "ibstat"))
    (node.bin / "ibstat").chmod(0o755)
    assert node.check() == 0 and not node.drained


def test_checks_cut_from_the_drain_reason_must_pass_before_the_node_resumes(tmp_path):
    every_port = {f"mlx5_{n}": 200 for n in range(12) if n != 4}  # seven compute ports under their rate
    fabric = [{"gpu": g, "state": "In Progress", "status": "N/A"} for g in range(8)]
    node = FakeNode(tmp_path, "dgx-h100", {"ib_rate": every_port, "fabric": fabric})
    assert node.check() == 0 and len(node.reason) <= 200 and node.owes.endswith(" more")
    assert "mlx5_11" not in node.reason
    node.set_faults({"ib_rate": {"mlx5_11": 200}})  # only a check the reason had no room for still fails
    assert node.check() == 0 and node.drained and node.owes == "gpuops-health: ib_ports mlx5_11:1"
    node.set_faults({})
    assert node.check() == 0 and not node.drained


def test_a_check_past_its_deadline_drains_the_node_saying_so(tmp_path, monkeypatch, capsys):
    node = FakeNode(tmp_path, "dgx-h100")
    monkeypatch.setattr(h, "DEADLINE_S", 1)
    slow = node.read

    def hung(check, argv):
        if argv[0] == "ibstat":
            time.sleep(3)
        return slow(check, argv)

    monkeypatch.setattr(node, "read", hung)
    assert node.check() == 0
    assert node.owes == "gpuops-health: cannot check: the checks took more than 1 s"
    assert "cannot check this node" in capsys.readouterr().err
    monkeypatch.setattr(node, "read", slow)
    assert node.check() == 0 and not node.drained  # a whole check that passes proves it again


@pytest.mark.parametrize(
    "answer",
    [
        '{"body": {"Overall Health": {"value": "Failure"}, "GPU": {"children": {"0": {"value": "Failure", '
        '"children": ["Errors"]}}}}}',
        '{"body": {"Overall Health": {"value": "Failure"}, "GPU": {"children": {"0": {"value": "Failure", '
        '"children": {"Errors": ["x"]}}}}}}',
        '{"body": {"Overall Health": {"value": "Healthy"}, "GPU": {"children": {"0": "Healthy"}}}}',
    ],
)
def test_a_dcgmi_answer_of_another_shape_is_a_parse_error_not_a_traceback(answer):
    with pytest.raises(ParseError, match="dcgmi health -c -j"):
        parse_dcgmi_health(answer)


@pytest.mark.parametrize("text", ["[1, 2]", '{"seen": 5, "outstanding": 7}', '{"node": [], "xids": 3}', "{", "7"])
def test_a_state_file_of_another_shape_keeps_a_node_it_drained_drained(tmp_path, text):
    node = FakeNode(tmp_path, "dgx-h100", drained=True, reason="gpuops-health: xid GPU3").no_repair()
    node.state.write_text(text)
    assert node.check() == 0
    assert node.drained and node.owes == "gpuops-health: reboot node", node.reason
    assert node.check("slurm", "--clear-xids") == 0 and not node.drained


def test_a_state_file_of_the_release_before_keeps_its_outstanding_xids(tmp_path):
    node = FakeNode(tmp_path, "dgx-h100", drained=True, reason="gpuops-health: xid GPU3").no_repair()
    line = "[3600.0] NVRM: Xid (PCI:0000:9c:00): 79, pid=1, GPU has fallen off the bus."
    node.state.write_text(json.dumps({"boot_id": "boot-1", "seen": ["ab"], "outstanding": [
        {"xid": 79, "pci": "0000:9c:00", "line": line}]}))  # fmt: skip
    assert node.check() == 0 and node.owes == "gpuops-health: reboot 0000:9c:00"
    node.boot = "boot-2"
    assert node.check() == 0 and not node.drained


def test_the_budget_keeps_a_failing_node_in_service_when_the_fleet_has_enough_out(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100", {"lost_gpus": {"count": 1}})
    folder = tmp_path / "node-exporter"
    folder.mkdir()
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps(dict(config, textfile_dir=str(folder), budget_nodes=8, budget_percent=10)))
    # 20 nodes: 10 % is 2, both out already by automation (a person's drain does not count).
    node.fleet[:3] = ["gpu-2|drain|gpuops-health: xid GPU1", "gpu-3|down*|gpuops-validate: nvlink GPU0",
                      "gpu-4|drain|cable check"]  # fmt: skip
    assert node.check() == 0 and not node.drained and node.updates[0][1:] == ["Comment=" + node.comments["gpu-1"]]
    assert not (tmp_path / "evidence").exists()  # a refused drain takes no evidence
    out = capsys.readouterr().out
    assert "refused: not drained: the blast-radius budget is spent: 2 nodes of 20" in out and "gpu-2, gpu-3" in out
    assert "gpuops_health_budget_refused 1" in (folder / h.TEXTFILE).read_text()
    # The refusal latched the budget (a Comment on this node): one of them back in service is no room.
    assert (
        node.comments["gpu-1"].startswith("gpuops: budget spent ")
        and "gpu-1 refused, 2 of 2 out" in node.comments["gpu-1"]
    )
    node.fleet[1] = "gpu-3|idle|none"
    assert node.check() == 0 and not node.drained
    assert "the blast-radius budget is latched (gpu-1: gpuops: budget spent" in capsys.readouterr().out
    # A person reopens it (remediate.yml -e remediate_reopen_budget=true clears the Comments).
    node.comments.clear()
    assert node.check() == 0 and node.owes == "gpuops-health: gpu_count node"
    assert node.comments["gpu-1"].startswith("gpuops: taken out ") and node.updates[-1][-1].startswith(
        "Comment=gpuops:"
    )
    assert "gpuops_health_budget_refused 0" in (folder / h.TEXTFILE).read_text()
    # Drained already: a narrower or wider reason costs nothing more.
    node.fleet[1] = "gpu-3|drain|gpuops-health: ecc GPU0"
    node.set_faults({"lost_gpus": {"count": 1}, "fabric": [{"gpu": 0, "state": "In Progress", "status": "N/A"}]})
    assert node.check() == 0 and node.owes == "gpuops-health: fabric GPU0, gpu_count node"


def test_a_take_out_counts_against_the_budget_for_its_window_and_a_person_s_comment_stays(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100", {"lost_gpus": {"count": 1}})
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps(dict(config, budget_nodes=1, budget_window=3600)))
    # gpu-2 was taken out by automation ten minutes ago and is back: it still counts, for the hour.
    node.comments["gpu-2"] = ns.budget_comment("taken", node.clock - 600)
    node.comments["gpu-1"] = "RMA 4711 open"  # a person's comment: never overwritten
    assert node.check() == 0 and not node.drained and node.comments["gpu-1"] == "RMA 4711 open"
    assert "were taken out within the last 3600 s (gpu-2)" in capsys.readouterr().out
    node.comments["gpu-2"] = ns.budget_comment("taken", node.clock - 3 * 3600)
    assert node.check() == 0 and node.drained and node.comments["gpu-1"] == "RMA 4711 open"


def test_the_budget_refuses_when_slurm_cannot_say_what_it_holds(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100", {"lost_gpus": {"count": 1}})
    answer = node.run

    def no_comments(argv, timeout=None):
        return (None, "sinfo: error: Unable to contact slurm controller") if "-O" in argv else answer(argv, timeout)

    node.run = no_comments
    assert node.check() == 0 and not node.drained
    assert "cannot read the nodes' comments (the budget's memory) from Slurm" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# The repair ladder's first rung: the node resets the GPUs it owes a reset, once drained and idle.


def test_a_reset_curable_xid_is_reset_on_the_node_and_the_node_resumes_at_the_next_check(tmp_path, capsys):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 48}]})
    assert node.check() == 0
    out = capsys.readouterr().out
    assert "reset: GPU [1]: done" in out
    # Drained for the Xid, the reset done at once (the node ran no job), the reason narrowed to the check;
    # the drain stamps the take-out in the node's Comment (the budget's memory).
    assert node.comments["gpu-1"].startswith("gpuops: taken out ")
    updates = [[w for w in u[1:] if not w.startswith("Comment=")] for u in node.updates]
    assert [state for state, _reason in updates] == ["State=DRAIN", "State=DRAIN"]
    assert [re.fullmatch("Reason=(.*)" + EVIDENCE, r).group(1) for _state, r in updates] == [
        "gpuops-health: reset GPU1, xid GPU1",
        "gpuops-health: xid GPU1",
    ]
    node.set_faults({})
    assert node.check() == 0 and not node.drained
    events = [(e["event"], e["detail"][:22]) for e in json.loads(node.state.read_text())["node"]["history"]]
    assert ("observed", "reset GPU1: reset by g") in events


def test_a_reset_waits_for_the_jobs_and_a_refused_one_escalates_to_a_reboot_once(tmp_path, capsys):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 48}]})
    node.jobs = True
    assert node.check() == 0 and node.owes == "gpuops-health: reset GPU1, xid GPU1"
    assert "the GPU reset waits until they end" in capsys.readouterr().out
    # The jobs ended, but a process still holds GPU 1: nvidia-smi -r refuses; a reboot is owed instead.
    node.jobs = False
    node.set_faults({"gpu_processes": [{"pid": 4242, "gpu": 1, "name": "python3", "used_memory": 100}]})
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU1"
    assert "reset: GPU [1]: failed: GPU 00000000" in capsys.readouterr().out
    updates = len(node.updates)
    assert node.check() == 0 and len(node.updates) == updates  # nothing loops: no second reset
    assert "reset:" not in capsys.readouterr().out
    assert len(node.reboots) == 1  # the next rung: the reboot, asked of Slurm
    node.rebooted()
    assert node.check() == 0 and not node.drained and not node.down


def test_on_an_nvswitch_system_a_gpu_reset_becomes_a_reboot(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100", {"xid": [{"gpu": 2, "xid": 48}]})
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU2, xid GPU2"
    assert "escalated to a reboot: an NVSwitch system" in capsys.readouterr().out


def test_the_reset_rung_can_be_turned_off(tmp_path):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 48}]}).no_repair()
    assert node.check() == 0 and node.owes == "gpuops-health: reset GPU1, xid GPU1"
    assert len(node.updates) == 1


# ---------------------------------------------------------------------------------------------
# The next rungs: a reboot through Slurm (asked once per boot), a power cycle, then a person.


def test_a_reboot_class_xid_reboots_the_node_through_slurm_and_the_check_after_it_resumes_it(tmp_path, capsys):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 79}]})
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU1, xid GPU1"
    # Drained first (no new job), then the reboot asked of Slurm: ASAP (once idle), down after it.
    assert [[*r[:2], r[3]] for r in node.reboots] == [["ASAP", "nextstate=DOWN", "gpu-1"]]
    assert re.fullmatch("reason=gpuops-health: reboot GPU1, xid GPU1" + EVIDENCE, node.reboots[0][2])
    assert "reboot: asked of Slurm" in capsys.readouterr().out
    # Slurm has it in hand: the checks meanwhile (slurmd's, the one at its start before it registers)
    # change nothing and ask nothing more.
    updates = len(node.updates)
    assert node.check() == 0 and node.check() == 0
    assert len(node.updates) == updates and len(node.reboots) == 1
    node.rebooted()  # RebootProgram, a new boot id, slurmd registers: down, "...: reboot complete"
    assert node.check() == 0 and not node.drained and not node.down
    assert node.updates[-1] == ["NodeName=gpu-1", "State=RESUME"]
    details = [e["detail"] for e in json.loads(node.state.read_text())["node"]["history"]]
    assert any(d.startswith("reboot GPU1: reboot observed (a new boot id)") for d in details)


def test_a_reboot_is_asked_once_per_boot_while_the_jobs_run(tmp_path):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 79}]})
    node.jobs = True
    assert node.check() == 0 and len(node.reboots) == 1
    node.rebooting = False  # say, a person cancelled it (scontrol cancel_reboot): not asked again on this boot
    assert node.check() == 0 and len(node.reboots) == 1 and node.drained


def test_a_reboot_slurm_refuses_leaves_the_node_drained_and_is_not_asked_again_on_that_boot(tmp_path, capsys):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 79}]})
    node.refuse_reboot = True
    assert node.check() == 0 and node.drained and len(node.reboots) == 1
    assert "Slurm refused it: scontrol: error: RebootProgram isn't defined" in capsys.readouterr().out
    assert node.check() == 0 and node.drained and len(node.reboots) == 1
    assert "refused on this boot" in capsys.readouterr().out


def test_a_fault_back_after_the_ladder_s_reboot_owes_a_power_cycle_then_a_person(tmp_path, capsys):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 79}]})
    folder = tmp_path / "node-exporter"
    folder.mkdir()
    node.config.write_text(json.dumps(dict(json.loads(node.config.read_text()), textfile_dir=str(folder))))
    assert node.check() == 0
    assert 'gpuops_health_owed{action="reboot",subject="GPU1"} 1' in (folder / h.TEXTFILE).read_text()
    node.rebooted()
    node.set_faults({"xid": [{"gpu": 1, "xid": 79}]})  # the GPU falls off the bus again on the new boot
    assert node.check() == 0 and node.owes == "gpuops-health: power node, xid GPU1"
    assert len(node.reboots) == 1 and "escalated to a power cycle" in capsys.readouterr().out
    # What Alertmanager's GpuopsNodePowerCycleOwed reads, and the rulebook acts on (remediate.yml).
    owed = [line for line in (folder / h.TEXTFILE).read_text().splitlines() if line.startswith("gpuops_health_owed")]
    assert owed == ['gpuops_health_owed{action="power",subject="node"} 1']
    assert node.check() == 0 and len(node.reboots) == 1  # a power cycle is remediate.yml's, not the node's
    # remediate.yml power-cycles it through the BMC: a new boot; the fault comes back once more.
    node.boot = "boot-3"
    node.set_faults({"xid": [{"gpu": 1, "xid": 79}]})
    assert node.check() == 0 and node.owes.startswith("gpuops-health: inspect node")
    assert len(node.reboots) == 1


def test_the_reboot_rung_can_be_turned_off_and_the_boot_id_read_where_the_config_says(tmp_path):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 79}]})
    boot = tmp_path / "boot_id"
    boot.write_text("sim-boot-1\n")
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps(dict(config, repair_reboot=False, boot_id_file=str(boot))))
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU1, xid GPU1" and node.reboots == []
    node.set_faults({})
    node.boot = "boot-2"  # the kernel's boot id: not the one this node is configured to read
    assert node.check() == 0 and node.owes == "gpuops-health: reboot GPU1"
    boot.write_text("sim-boot-2\n")
    assert node.check() == 0 and not node.drained


def test_the_third_fault_in_a_week_quarantines_the_node_until_a_person_clears_it(tmp_path):
    node = FakeNode(tmp_path, "pcie-l40s")
    for _fault in range(2):  # twice: drained, reset on the node, resumed at the next check
        node.set_faults({"xid": [{"gpu": 1, "xid": 48}]})
        assert node.check() == 0 and node.owes == "gpuops-health: xid GPU1"
        node.set_faults({})
        assert node.check() == 0 and not node.drained
        node.boot = node.boot + "+"  # the Xid line leaves the kernel log with the next boot
    node.set_faults({"xid": [{"gpu": 1, "xid": 48}]})
    # Quarantined: no reset on the node (a person's inspection is owed first).
    assert node.check() == 0 and node.owes == "gpuops-health: inspect node, reset GPU1, xid GPU1"
    node.set_faults({})
    assert node.check() == 0 and node.owes == "gpuops-health: inspect node, reset GPU1"
    node.boot = "boot-9"  # a reboot resets the GPU, and does not end a quarantine
    assert node.check() == 0 and node.owes == "gpuops-health: inspect node"
    assert node.check("slurm", "--clear-xids") == 0 and not node.drained
    # A person cleared it: the count starts again.
    node.set_faults({"xid": [{"gpu": 1, "xid": 48}]})
    assert node.check() == 0 and node.owes == "gpuops-health: xid GPU1"


def test_the_textfile_times_each_repair_from_the_fault_to_back_in_service(tmp_path):
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 79}]}).no_repair()  # a reboot owed
    folder = tmp_path / "node-exporter"
    folder.mkdir()
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps(dict(config, textfile_dir=str(folder))))

    def series():
        lines = (folder / h.TEXTFILE).read_text().splitlines()
        return {
            ln.split()[0]: float(ln.split()[1]) for ln in lines if ln.startswith("gpuops_health_") and "{" not in ln
        }

    assert node.check() == 0 and node.drained
    first = series()
    assert (
        first["gpuops_health_drained_since_timestamp_seconds"] >= first["gpuops_health_fault_since_timestamp_seconds"]
    )
    assert "gpuops_health_last_repair_seconds" not in first
    node.set_faults({})
    assert (
        node.check() == 0
        and series()["gpuops_health_drained_since_timestamp_seconds"]
        == first["gpuops_health_drained_since_timestamp_seconds"]
    )
    node.boot = "boot-2"
    assert node.check() == 0 and not node.drained
    after = series()
    assert "gpuops_health_drained_since_timestamp_seconds" not in after
    assert "gpuops_health_fault_since_timestamp_seconds" not in after
    # From the first fault to the resume, as the state's history has them.
    history = json.loads(node.state.read_text())["node"]["history"]
    fault = next(e["t"] for e in history if e["event"] == "fault")
    resumed = next(e["t"] for e in history if e["event"] == "resume")
    assert after["gpuops_health_last_repair_seconds"] == round(resumed - fault) > 0


def test_one_check_at_a_time_reads_and_writes_the_state(tmp_path, monkeypatch, capsys):
    """slurmd's check and a person's --clear-xids at once: the second waits for the first (a lock
    beside the state file), and stops where the first holds it too long, naming its pid."""
    node = FakeNode(tmp_path, "pcie-l40s", {"lost_gpus": {"count": 1}})
    monkeypatch.setattr(h, "LOCK_WAIT_S", 0.5)
    with open(f"{node.state}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242\n")
        held.flush()
        assert node.check() == 0 and node.updates == [] and not node.state.exists()
        assert "holds " in (out := capsys.readouterr().out) and "(pid 4242)" in out
        assert node.check("report") == 1  # a person's look needs no lock
    assert node.check() == 0 and node.owes == "gpuops-health: gpu_count node"
    # The holder's pid is in the lock file (this process, here): a stopped check names it.
    with open(f"{node.state}.lock") as lock:
        assert lock.read().strip() == str(os.getpid())


def test_watch_mode_drains_at_the_xid_line_without_waiting_for_slurmd_s_interval(tmp_path, monkeypatch, capsys):
    """gpuops-health --mode watch (gpuops-health-watch.service) follows the kernel log; an Xid injected
    while it runs drains the node at once (here a reset-curable one: reset on the node, then narrowed)."""
    monkeypatch.setattr(h, "WATCH_SETTLE_S", 0.2)
    monkeypatch.setattr(h, "WATCH_GAP_S", 1)
    node = FakeNode(tmp_path, "pcie-l40s")
    injected = {}

    def inject():
        time.sleep(1.5)  # the follower has printed the log as it was: no Xid, no check
        injected["updates"] = list(node.updates)
        node.set_faults({"xid": [{"gpu": 1, "xid": 48}], "_": 1})
        injected["t"] = time.monotonic()
        for _wait in range(100):
            if node.drained:
                break
            time.sleep(0.1)
        injected["drained"] = time.monotonic() - injected["t"]
        node.follower.kill()

    worker = threading.Thread(target=inject)
    worker.start()
    assert node.check("watch") == 1  # returns when its follower ends (systemd starts it again)
    worker.join()
    assert injected["updates"] == []
    assert node.drained and node.owes == "gpuops-health: xid GPU1"
    assert injected["drained"] < 6, injected
    assert "an Xid in the kernel log: checking now" in capsys.readouterr().out


def test_the_watcher_started_on_the_boot_after_the_ladder_s_reboot_resumes_the_node_at_once(tmp_path, monkeypatch):
    """slurmd's own check at its start runs before it registers (Slurm still shows the reboot): the
    watcher, started at boot, checks once WATCH_START_S later and resumes the node, instead of slurmd's
    next HealthCheckInterval. On any other start it waits for an Xid (no check races a rollout)."""
    monkeypatch.setattr(h, "WATCH_START_S", 0.2)
    node = FakeNode(tmp_path, "pcie-l40s", {"xid": [{"gpu": 1, "xid": 79}]})
    assert node.check() == 0 and node.reboots
    node.rebooted()
    seen = {}

    def stop():
        for _wait in range(100):
            if not node.down:
                break
            time.sleep(0.1)
        seen["resumed"] = not node.down and not node.drained
        node.follower.kill()

    worker = threading.Thread(target=stop)
    worker.start()
    assert node.check("watch") == 1
    worker.join()
    assert seen["resumed"] and node.updates[-1] == ["NodeName=gpu-1", "State=RESUME"]
    # Resumed: the next start of the watcher checks nothing until an Xid comes.
    updates = len(node.updates)
    worker = threading.Thread(target=lambda: (time.sleep(1), node.follower.kill()))
    worker.start()
    assert node.check("watch") == 1
    worker.join()
    assert len(node.updates) == updates


def test_the_watcher_s_periodic_check_drains_a_fault_with_no_kernel_log_line_and_is_quiet_otherwise(tmp_path, capsys):
    """A GPU lost from the driver (no Xid line; a DCGM incident and a port down are alike) drains within
    validate_health_watch_interval, whatever slurmd's HealthCheckInterval; healthy ticks print nothing."""
    node = FakeNode(tmp_path, "pcie-l40s")
    node.config.write_text(json.dumps(dict(json.loads(node.config.read_text()), watch_interval=1)))
    seen = {}

    def inject():
        time.sleep(1.6)  # a healthy tick or more first
        seen["quiet"] = capsys.readouterr().out
        node.set_faults({"lost_gpus": {"count": 1}})
        start = time.monotonic()
        for _wait in range(60):
            if node.drained:
                break
            time.sleep(0.1)
        seen["drained"] = time.monotonic() - start
        node.follower.kill()

    worker = threading.Thread(target=inject)
    worker.start()
    assert node.check("watch") == 1
    worker.join()
    assert seen["quiet"] == ""
    assert node.drained and node.owes == "gpuops-health: gpu_count node" and seen["drained"] < 3, seen
    assert "the watcher's periodic check" in capsys.readouterr().out


def test_a_drain_keeps_what_the_check_saw_as_evidence_beside_the_state(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100", {"xid": [{"gpu": 3, "xid": 79}]})
    assert node.check() == 0 and node.drained
    (bundle,) = (tmp_path / "evidence").iterdir()
    assert oct(bundle.stat().st_mode & 0o777) == "0o600" and bundle.name.endswith("-gpu-1.json")
    data = json.loads(bundle.read_text())
    assert data["reason"] == node.owes and "reboot GPU3" in data["owed"]
    commands = [o["command"] for o in data["outputs"]]
    assert commands[:2] == ["nvidia-smi -q -x", "dmesg"] and "ibstat" in commands
    assert any("NVRM: Xid" in o["output"] and ": 79," in o["output"] for o in data["outputs"])
    assert f"evidence: {bundle}" in capsys.readouterr().out
    history = json.loads(node.state.read_text())["node"]["history"]
    assert [e["detail"] for e in history if e["event"] == "evidence"] == [str(bundle)]
    # The drain's reason names the bundle (its stamp: evidence/<stamp>-<node>.json beside the state).
    stamp = bundle.name.split("-", 1)[0]
    assert node.reason == f"gpuops-health: reboot GPU3, xid GPU3 (evidence {stamp})"
    # Drained already: another check is not a new drain, keeps no new bundle, and names the same one.
    node.set_faults({})
    assert node.check() == 0 and len(list((tmp_path / "evidence").iterdir())) == 1
    assert node.reason.startswith("gpuops-health: reboot GPU3") and node.reason.endswith(f" (evidence {stamp})")
    # The rest of the evidence is started apart from the check, once, for that bundle.
    ((argv, unit),) = node.spawned
    assert argv[2:] == ["--mode", "evidence", "--state", str(node.state), "--bundle", str(bundle)]
    assert unit.startswith("gpuops-evidence-")


def test_a_drain_names_its_evidence_in_its_reason_and_the_next_drain_its_own(tmp_path):
    node = FakeNode(tmp_path, "dgx-h100", {"lost_gpus": {"count": 1}})
    assert node.check() == 0 and node.drained
    (first,) = (tmp_path / "evidence").iterdir()
    assert node.reason == f"gpuops-health: gpu_count node (evidence {first.name.split('-', 1)[0]})"
    node.set_faults({})
    assert node.check() == 0 and not node.drained and node.reason == ""
    # The next drain is a new episode: a new bundle, named in its reason; the old one is not.
    node.set_faults({"lost_gpus": {"count": 1}})
    assert node.check() == 0 and node.drained
    second = max((tmp_path / "evidence").iterdir())
    assert second != first and node.reason.endswith(f" (evidence {second.name.split('-', 1)[0]})")


BUG_REPORT = """#!/bin/sh
# nvidia-bug-report.sh's interface: --output-file FILE writes FILE.gz where gzip is there.
[ "$1" = --safe-mode ] || exit 3
[ "$2" = --output-file ] || exit 3
printf 'nvidia-bug-report.sh (stand-in) Start of NVIDIA bug report log file\n' | gzip -c > "$3.gz"
echo "Running nvidia-bug-report.sh... complete."
"""


def test_the_evidence_mode_adds_the_bug_report_diag_counters_and_xid_window(tmp_path, capsys):
    node = FakeNode(tmp_path, "dgx-h100", {"xid": [{"gpu": 3, "xid": 79}]})
    (node.bin / "nvidia-bug-report.sh").write_text(BUG_REPORT)
    (node.bin / "nvidia-bug-report.sh").chmod(0o755)
    assert node.check() == 0 and node.drained
    ((argv, _unit),) = node.spawned
    sysfs = tmp_path / "infiniband"
    (sysfs / "mlx5_0" / "ports" / "1" / "counters").mkdir(parents=True)
    (sysfs / "mlx5_0" / "ports" / "1" / "counters" / "symbol_error").write_text("12\n")
    (sysfs / "mlx5_0" / "ports" / "1" / "counters" / "link_downed").write_text("1\n")
    args = cli._arguments(argv[2:])
    assert cli.collect(args, node, str(sysfs)) == 0
    (bundle,) = (tmp_path / "evidence").glob("*-gpu-1.json")
    extra = json.loads(bundle.with_suffix(".extra.json").read_text())
    assert extra["nvidia_bug_report"]["file"] == bundle.stem + ".nvidia-bug-report.log.gz"
    report = tmp_path / "evidence" / extra["nvidia_bug_report"]["file"]
    assert oct(report.stat().st_mode & 0o777) == "0o600"
    assert oct(bundle.with_suffix(".extra.json").stat().st_mode & 0o777) == "0o600"
    assert extra["port_counters"] == {"mlx5_0/1": {"link_downed": 1, "symbol_error": 12}}
    assert any("NVRM: Xid" in line and ": 79," in line for line in extra["xid_window"])
    assert extra["dcgm_diag"] == {"missing": "dcgmi is not installed"}
    # A bug report past the size bound is dropped, and the bundle says so.
    original = h.EVIDENCE_BUG_REPORT_BYTES
    h.EVIDENCE_BUG_REPORT_BYTES = 10
    try:
        assert cli.collect(args, node, str(sysfs)) == 0
    finally:
        h.EVIDENCE_BUG_REPORT_BYTES = original
    extra = json.loads(bundle.with_suffix(".extra.json").read_text())
    assert extra["nvidia_bug_report"]["dropped"].endswith("over 10") and not report.exists()


@pytest.mark.parametrize(
    "where", ["/etc/passwd", "elsewhere.json", "{evidence}/x.extra.json", "{evidence}/missing.json"]
)
def test_the_evidence_mode_takes_only_a_bundle_of_the_evidence_folder(tmp_path, capsys, where):
    node = FakeNode(tmp_path, "dgx-h100")
    (tmp_path / "evidence").mkdir()
    args = cli._arguments(["--mode", "evidence", "--state", str(node.state), "--bundle",
                           where.format(evidence=tmp_path / "evidence")])  # fmt: skip
    assert cli.collect(args, node) == 2
    assert "evidence bundle" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "evidence").iterdir()] == []


def test_the_per_job_series_of_jobs_from_before_this_boot_are_removed(tmp_path, capsys):
    """Issue 59: a node that crashed never ran its jobs' Epilog; their per-job GPU series (the slurm
    role's Prolog writes them into the textfile folder) stayed on the dashboard for good."""
    node = FakeNode(tmp_path, "pcie-l40s")
    folder = tmp_path / "node-exporter"
    folder.mkdir()
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps(dict(config, textfile_dir=str(folder))))
    node.boot_time = time.time() - 600
    crashed, running = folder / "gpuops-slurm-job-4711.prom", folder / "gpuops-slurm-job-4712.prom"
    for path in (crashed, running, folder / "site-own.prom"):
        path.write_text('gpuops_slurm_job_gpu_info{jobid="1",gpu="0"} 1\n')
    os.utime(crashed, (time.time() - 7200, time.time() - 7200))  # written before this boot
    os.utime(folder / "site-own.prom", (time.time() - 7200, time.time() - 7200))  # not ours: kept
    assert node.check() == 0
    assert sorted(p.name for p in folder.iterdir()) == [h.TEXTFILE, "gpuops-slurm-job-4712.prom", "site-own.prom"]
    assert "removed gpuops-slurm-job-4711.prom: its job ran before this boot" in capsys.readouterr().out
    # The report mode changes nothing; a node whose boot time cannot be read removes nothing.
    os.utime(running, (time.time() - 7200, time.time() - 7200))
    assert node.check("report") == 0 and running.exists()
    node.boot_time = None
    assert node.check() == 0 and running.exists()


def test_the_boot_time_is_the_kernel_s_or_the_stand_in_boot_id_file_s(tmp_path):
    node = cli.Node()
    assert node.booted_at({}) == int(re.search(r"^btime (\d+)$", Path("/proc/stat").read_text(), re.M).group(1))
    boot = tmp_path / "boot_id"
    boot.write_text("b-2\n")
    os.utime(boot, (1_800_000_000, 1_800_000_000))
    assert node.booted_at({"boot_id_file": str(boot)}) == 1_800_000_000
    assert node.booted_at({"boot_id_file": str(tmp_path / "none")}) is None


def test_a_tray_whose_imex_peers_do_not_connect_is_drained_and_resumed_once_they_do(tmp_path, capsys):
    """Between runs too: gpuops-health reads the daemons' word on a tray the imex role set up (its
    health.json's imex), drains the tray when the domain is not UP, and resumes it once it is."""
    node = FakeNode(tmp_path, "gb200-tray")
    nodes = tmp_path / "nodes_config.cfg"
    nodes.write_text("10.0.0.1\n10.0.0.2\n")
    config = json.loads(node.config.read_text())
    node.config.write_text(json.dumps(dict(config, imex=True, imex_nodes_config=str(nodes))))
    status = tmp_path / "imex.json"
    (node.bin / "nvidia-imex-ctl").write_text(f"#!/bin/sh\ncat {status}\n")
    (node.bin / "nvidia-imex-ctl").chmod(0o755)

    def domain(peer):
        hosts = ["10.0.0.1", "10.0.0.2"]
        link = {"0": "CONNECTED", "1": "CONNECTED" if peer == "READY" else "DISCONNECTED"}
        return {
            "nodes": {
                str(i): {
                    "status": "READY" if i == 0 else peer,
                    "host": hosts[i],
                    "connections": {
                        str(j): {"host": hosts[j], "status": link[str(j)], "changed": False} for j in (0, 1)
                    },
                    "changed": False,
                    "version": "580.196.07",
                    "hostName": f"tray{i + 1}",
                }
                for i in (0, 1)
            },
            "timestamp": "12/5/2026 12:44:07.982",
            "status": "UP" if peer == "READY" else "DEGRADED",
        }

    status.write_text(json.dumps(domain("READY")))
    assert records(node)[("imex", "domain")] == "pass"
    assert node.check() == 0 and not node.drained
    status.write_text(json.dumps(domain("UNAVAILABLE")))
    assert node.check() == 0 and node.owes == "gpuops-health: imex domain"
    status.write_text(json.dumps(domain("READY")))
    assert node.check() == 0 and not node.drained
    assert "resume: every check it was drained for passed again" in capsys.readouterr().out
    # The node list gone (the imex role's file): a failure that names it, never a pass.
    nodes.unlink()
    assert node.check() == 0 and node.owes == "gpuops-health: imex domain"
    assert records(node)[("imex", "domain")] == "fail"
