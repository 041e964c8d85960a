# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's input rules (tasks/inputs.yml), evaluated the way input_rules evaluates them, and
site.yml running all of them in preflight, before the play that changes the nodes."""

from __future__ import annotations

import os
import sys

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.gpuops.cluster.plugins.action.input_rules import evaluate
from conftest import ROOT, ansible_playbook, trusted

ROLES = ROOT / "roles"
PREFLIGHT_DEFAULTS = yaml.safe_load((ROLES / "preflight" / "defaults" / "main.yml").read_text())


def facts(family="Debian", distribution="Debian", gpu=True):
    return {
        "os_family": family,
        "distribution": distribution,
        "distribution_major_version": "12" if distribution == "Debian" else "9",
        "distribution_version": "12" if distribution == "Debian" else "9.4",
        "architecture": "x86_64",
        "nvidia_gpu": {"present": gpu},
        "infiniband": {"adapters": []},
    }


def check(role, registered=None, family="Debian", distribution="Debian", **overrides):
    """Template a role's input_rules task with its defaults, its vars and ``overrides``; run the rules."""
    folder = ROLES / role
    variables = dict(PREFLIGHT_DEFAULTS)
    for part in ("defaults", "vars"):
        path = folder / part / "main.yml"
        if path.exists():
            variables.update(yaml.safe_load(path.read_text()) or {})
    variables.update(
        ansible_facts=facts(family, distribution),
        inventory_hostname="node1",
        groups={"all": ["node1", "ctl"], "slurm_controller": ["ctl"], "slurm_compute": ["node1"], "gpu": ["node1"]},
        ansible_play_hosts_all=["node1", "ctl"],
        hostvars={"node1": {}, "ctl": {}},
        gpuops_stack={"gpu_present": True, "ofed": {"flavour": "doca"}, "cuda": {"default": "12.8"}},
    )
    variables.update(registered or {})
    variables.update(overrides)
    tasks = yaml.safe_load((folder / "tasks" / "inputs.yml").read_text())
    task = next(t for t in tasks if "gpuops.cluster.input_rules" in t)
    variables.update(task.get("vars", {}))
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    args = templar.template(trusted(task["gpuops.cluster.input_rules"]))
    errors, warnings, _message = evaluate(
        args["role"], args.get("rules", []), args.get("warnings", []), args.get("downloads")
    )
    return errors, warnings


def roles_with_inputs():
    return sorted(p.parent.parent.name for p in ROLES.glob("*/tasks/inputs.yml"))


def test_preflight_knows_every_role_with_inputs():
    listed = yaml.safe_load((ROLES / "preflight" / "vars" / "main.yml").read_text())["__preflight_roles_with_inputs"]
    assert sorted(listed) == roles_with_inputs()


def test_every_role_with_inputs_includes_them_unless_preflight_did():
    assert set(roles_with_inputs()) >= {"container_toolkit", "dcgm", "nccl", "ofed", "os_tuning", "sharp", "slurm"}
    for role in roles_with_inputs():
        main = yaml.safe_load((ROLES / role / "tasks" / "main.yml").read_text())
        includes = [t for t in main if t.get("ansible.builtin.include_tasks") == "inputs.yml"]
        assert len(includes) == 1, role
        assert includes[0]["when"] == f"'{role}' not in gpuops_inputs_checked | default([])"


@pytest.mark.parametrize("role", ["container_toolkit", "dcgm", "nccl", "sharp", "slurm"])
def test_apt_only_roles_refuse_a_rhel_node(role):
    registered = {"__container_toolkit_containerd_bin": {"skipped": True}} if role == "container_toolkit" else {}
    given = {"sharp_enabled": True, "sharp_hpcx_checksum": "sha256:" + "0" * 64, "nccl_tests_build": False}
    errors, _warnings = check(role, registered, family="RedHat", distribution="Rocky", **given)
    assert any(f"The {role} role needs apt; this node is RedHat" in e for e in errors), errors
    assert check(role, registered, **given) == ([], [])


def test_ofed_refuses_rhel_unless_left_alone():
    errors, _warnings = check("ofed", family="RedHat", distribution="Rocky", ofed_doca_key_fingerprint=["AB" * 20])
    assert any("Debian and Ubuntu only; this host is Rocky" in e for e in errors)
    stack = {"gpu_present": True, "ofed": {"flavour": "none"}}
    assert check("ofed", family="RedHat", distribution="Rocky", gpuops_stack=stack) == ([], [])


@pytest.mark.parametrize(
    ("role", "variable", "overrides"),
    [
        ("sharp", "sharp_hpcx_checksum", {"sharp_enabled": True}),
        ("nccl", "nccl_tests_checksum", {"nccl_tests_build": True}),
        (
            "dcgm",
            "dcgm_exporter_checksum",
            {"dcgm_exporter_source": "url", "dcgm_exporter_url": "http://m/dcgm-exporter"},
        ),
    ],
)
def test_a_download_needs_a_checksum_or_an_explicit_opt_out(role, variable, overrides):
    errors, warnings = check(role, **overrides, **{variable: ""})
    assert len(errors) == 1 and errors[0].startswith(f"{variable} must be the checksum of") and '(got "")' in errors[0]
    errors, _warnings = check(role, **overrides, **{variable: "md5:0123"})  # not SHA-2
    assert len(errors) == 1
    assert check(role, **overrides, **{variable: "sha256:" + "a" * 64}) == ([], [])
    errors, warnings = check(role, **overrides, **{variable: "unverified"})
    assert errors == []
    assert len(warnings) == 1 and warnings[0].startswith(f"{variable} is unverified: http")


def test_a_download_the_host_does_not_make_needs_no_checksum():
    assert check("sharp", sharp_enabled=False, sharp_hpcx_checksum="") == ([], [])
    assert check("nccl", nccl_tests_build=False, nccl_tests_checksum="") == ([], [])
    stack = {"gpu_present": False, "ofed": {"flavour": "doca"}, "cuda": {"default": "12.8"}}
    assert check("nccl", nccl_tests_build=True, nccl_tests_checksum="", gpuops_stack=stack) == ([], [])


def test_slurm_lists_every_broken_rule_at_once():
    errors, _warnings = check(
        "slurm",
        slurm_partitions=[{"name": "gpu", "group": "no_such_group"}],
        slurm_gres_autodetect="nvml",
        slurm_munge_key="short",
    )
    assert len(errors) == 3, errors
    assert any("names groups the inventory does not have, no_such_group" in e for e in errors)
    assert any("built without NVML" in e for e in errors)
    assert any(e.startswith("slurm_munge_key must be empty") for e in errors)


def test_slurm_workload_tiers_need_accounting_and_a_good_shape():
    tiers = [{"name": "training", "priority": 1000, "preempt": True}, {"name": "inference", "priority": 100}]
    errors, _warnings = check("slurm", workload_tiers=tiers)
    assert errors == [
        "workload_tiers needs accounting: the tiers are QOS, which slurmdbd keeps. Put a host in "
        "slurm_dbd (slurmdbd and its database), or leave workload_tiers empty."
    ]
    with_dbd = {"all": ["node1", "ctl"], "slurm_controller": ["ctl"], "slurm_compute": ["node1"], "slurm_dbd": ["ctl"]}
    assert check("slurm", workload_tiers=tiers, groups=with_dbd)[0] == []
    errors, _warnings = check("slurm", workload_tiers=[{"name": "normal", "priority": 1}], groups=with_dbd)
    assert errors == [
        "workload_tiers[0].name normal is Slurm's default QOS; name the tier otherwise, such as inference"
    ]


def test_slurm_health_check_interval_must_outlast_the_check():
    """gpuops-health stops itself at 45 s and slurmd kills its HealthCheckProgram at 60 s: a shorter
    interval is refused naming the variable; 0 (only when slurmd starts) and 60 or more pass."""
    errors, _warnings = check("slurm", slurm_health_check=True, slurm_health_check_interval=30)
    assert len(errors) == 1 and errors[0].startswith("slurm_health_check_interval is 30 s, shorter than")
    for interval in (0, 60, 300):
        assert check("slurm", slurm_health_check=True, slurm_health_check_interval=interval) == ([], [])
    assert check("slurm", slurm_health_check=False, slurm_health_check_interval=30) == ([], [])


def test_dcgm_alert_durations_must_be_prometheus_durations():
    """promtool would refuse the rule file only when the role writes it, on the Prometheus host, after
    the GPU nodes changed: a bad duration is refused first, naming the variable."""
    assert check("dcgm", dcgm_alert_temperature_for="90s", dcgm_alert_xid_window="1h30m") == ([], [])
    errors, _warnings = check("dcgm", dcgm_alert_temperature_for="1 minute")
    assert len(errors) == 1 and errors[0].startswith("dcgm_alert_temperature_for must be a Prometheus duration")
    errors, _warnings = check("dcgm", dcgm_alert_xid_window="0m", dcgm_alert_missing_for=5)
    assert [e.split(" ")[0] for e in errors] == ["dcgm_alert_missing_for", "dcgm_alert_xid_window"]


def test_dcgm_alertmanager_receiver_without_an_address_is_refused():
    errors, _warnings = check("dcgm", dcgm_alertmanager_receiver={"webhook_configs": [{"send_resolved": True}]})
    assert len(errors) == 1 and errors[0].startswith(
        "dcgm_alertmanager_receiver has a webhook_configs entry without url"
    )
    errors, _warnings = check("dcgm", dcgm_alertmanager_receiver={"email_configs": [{"smarthost": "m:587"}]})
    assert len(errors) == 1 and "email_configs entry without to" in errors[0]
    assert check("dcgm", dcgm_alertmanager_receiver={"webhook_configs": [{"url_file": "/etc/hook"}]}) == ([], [])


def test_dcgm_alertmanager_receiver_is_named_by_the_role():
    hook = {"webhook_configs": [{"url": "https://hooks.example/gpu"}]}
    assert check("dcgm", dcgm_alertmanager_receiver=hook) == ([], [])
    errors, _warnings = check("dcgm", dcgm_alertmanager_receiver=dict(hook, name="pager"))
    assert len(errors) == 1 and "Take the name key out of dcgm_alertmanager_receiver" in errors[0]


def test_container_toolkit_refuses_containerd_that_is_not_there():
    missing = {"__container_toolkit_containerd_bin": {"changed": False, "stat": {"exists": False}}}
    errors, _warnings = check("container_toolkit", missing, container_toolkit_runtimes=["containerd"])
    assert len(errors) == 1 and "/usr/bin/containerd is not on node1" in errors[0]


def test_chrony_needs_a_source():
    errors, _warnings = check(
        "os_tuning", os_tuning_chrony=True, os_tuning_chrony_pools=[], os_tuning_chrony_servers=[]
    )
    assert len(errors) == 1 and "list your NTP servers" in errors[0]


def test_acs_clearing_is_refused_on_a_virtual_machine_only():
    vm = dict(facts(), virtualization_role="guest", virtualization_type="kvm")
    errors, _warnings = check("os_tuning", ansible_facts=vm, os_tuning_pcie_acs_clear=True)
    assert len(errors) == 1 and errors[0].startswith("os_tuning_pcie_acs_clear is true, but node1 is a kvm virtual")
    assert check("os_tuning", ansible_facts=vm) == ([], [])
    container = dict(vm, virtualization_type="docker")
    bare_metal = dict(facts(), virtualization_role="host", virtualization_type="kvm")
    for node in (container, bare_metal, facts()):
        assert check("os_tuning", ansible_facts=node, os_tuning_pcie_acs_clear=True) == ([], [])


def test_mig_refuses_a_layout_the_driver_the_run_installs_cannot_run():
    """The rule reads the driver preflight resolved: the exact version where one is declared, else the branch."""
    gpus = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "pci_device_id": "0x2330", "mig_mode": None}]
    node = dict(facts(), nvidia_gpu={"present": True, "gpus": gpus})
    layout = {"name": "inference", "gpus": [{"devices": "all", "profiles": {"1g.10gb": 7}}]}
    base = {"gpu_present": True, "ofed": {"flavour": "doca"}, "cuda": {"default": "12.8"}}
    overrides = {"ansible_facts": node, "mig_layout": layout, "mig_manager_checksum": "sha256:" + "a" * 64}

    stack = dict(base, driver={"branch": "470", "version": None})
    errors, _warnings = check("mig", gpuops_stack=stack, **overrides)
    assert len(errors) == 1 and "but nvidia_driver_branch is 470; MIG on H100 needs driver 525.85.12" in errors[0]

    stack = dict(base, driver={"branch": "525", "version": "525.60.13"})
    errors, _warnings = check("mig", gpuops_stack=stack, **overrides)
    assert len(errors) == 1 and "Set nvidia_driver_version to a driver that has it" in errors[0]

    stack = dict(base, driver={"branch": "580", "version": "580.95.05"})
    assert check("mig", gpuops_stack=stack, **overrides) == ([], [])
    # A stack preflight could not resolve (it reports why): the layout is still checked against the GPU.
    assert check("mig", gpuops_stack=None, **overrides) == ([], [])


def test_site_stops_on_a_bad_input_in_preflight_before_the_setup_play(tmp_path):
    """A run that would fail in the slurm role (its last) fails in preflight instead, on every host."""
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {
                        "preflight_min_free_gib": {},
                        "site_ofed": False,
                        "preflight_today": "2026-11-21",
                        "slurm_partitions": [{"name": "gpu", "group": "no_such_group"}],
                    },
                    "children": {
                        "slurm_controller": {"hosts": {"ctl": local}},
                        "slurm_compute": {"hosts": {"cpu1": local, "gpu1": local}},
                        # Every role of site.yml runs here, those without input rules too.
                        "gpu_nodes": {"hosts": {"gpu1": local}},
                    },
                }
            }
        )
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    # Check mode, and a tag no role task has: only the always-tagged plays (facts, preflight) run.
    result = ansible_playbook(
        ROOT / "playbooks" / "site.yml", "-i", inventory, "--check", "--tags", "gpuops_none", env=env
    )
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "The slurm role cannot run with these inputs" in out
    assert "names groups the inventory does not have, no_such_group" in out
    assert "PLAY [Set up the nodes]" not in out


def test_k8s_node_refuses_a_kubernetes_minor_past_its_end_of_life_and_warns_about_an_unvalidated_one():
    errors, warnings = check(
        "k8s_node", k8s_node_kubernetes_version="1.34.9", k8s_node_today="2026-11-25", k8s_node_join=False
    )
    assert errors == [
        "Kubernetes 1.34 reached its end of life on 2026-10-27 (kubernetes.io/releases): move to a supported "
        "minor: 1.35, 1.36, 1.37."
    ]
    errors, warnings = check(
        "k8s_node", k8s_node_kubernetes_version="1.37.2", k8s_node_today="2026-11-25", k8s_node_join=False
    )
    assert errors == [] and len(warnings) == 1 and "not yet on the GPU Operator's list" in warnings[0]
    assert check("k8s_node", k8s_node_today="2026-11-25", k8s_node_control_plane="ctl") == ([], [])


def test_k8s_node_refuses_labels_taints_and_settings_a_kubelet_refuses_and_a_join_without_a_control_plane():
    errors, _warnings = check(
        "k8s_node",
        k8s_node_today="2026-11-25",
        k8s_node_labels={"node-role.kubernetes.io/gpu": ""},
        k8s_node_taints=[{"key": "nvidia.com/gpu", "effect": "NoRun"}],
        k8s_node_cpu_manager_policy="static",
    )
    assert len(errors) == 2
    assert 'k8s_node_join is true and k8s_node_control_plane is "", which is no host of the inventory' in errors[1]
    assert [e for e in errors[0].split(". ") if e.startswith("k8s_node")] == [
        "k8s_node_labels has node-role.kubernetes.io/gpu, a label in the kubernetes.io or k8s.io namespace that a "
        "kubelet may not set on itself (NodeRestriction; kubelet stops at start with it in --node-labels): set it "
        "from the control plane (kubectl label node), or use a prefix of kubelet.kubernetes.io or node.kubernetes.io "
        "or a prefix of your own",
        "k8s_node_taints[0] has the effect 'NoRun': use one of NoSchedule, PreferNoSchedule, NoExecute",
        "k8s_node_cpu_manager_policy is static with no CPUs reserved for the system: kubelet refuses to start (the "
        "static policy needs reserved CPUs): set k8s_node_reserved_system_cpus to the CPUs the system keeps, such "
        'as "0-1".',
    ]
    assert check("k8s_node", k8s_node_today="2026-11-25", k8s_node_join=False) == ([], [])


def test_k8s_node_health_check_interval_and_command_are_checked():
    """node-problem-detector waits 50 s for gpuops-health, which stops itself at 45 s: an interval under
    60 s is refused naming the variable, and so is a command node-problem-detector cannot run (its rule's
    path must be absolute)."""
    base = {"k8s_node_today": "2026-11-25", "k8s_node_join": False}
    errors, _warnings = check("k8s_node", k8s_node_health_check_interval=30, **base)
    assert len(errors) == 1 and errors[0].startswith("k8s_node_health_check_interval is 30 s, shorter than")
    assert check("k8s_node", k8s_node_health_check_interval=30, k8s_node_health_check=False, **base) == ([], [])
    errors, _warnings = check("k8s_node", k8s_node_npd_command=["gpuops-health", "--mode", "npd"], **base)
    assert len(errors) == 1 and errors[0].startswith('k8s_node_npd_command is ["gpuops-health", "--mode", "npd"]')
    errors, _warnings = check("k8s_node", k8s_node_npd_command=[], **base)
    assert len(errors) == 1 and errors[0].startswith("k8s_node_npd_command is []")
    assert check("k8s_node", **base) == ([], [])


def test_nvidia_driver_refuses_dkms_modules_under_secure_boot_without_signing():
    on = {"preflight_node": {"secure_boot": "enabled"}}
    errors, _warnings = check("nvidia_driver", registered=on)
    assert len(errors) == 1
    assert "Secure Boot is enabled on node1" in errors[0] and "nvidia_driver_secure_boot: sign" in errors[0]
    assert "nvidia_driver_source: ubuntu" not in errors[0]
    ubuntu, _warnings = check("nvidia_driver", registered=on, distribution="Ubuntu")
    assert "take Canonical's signed modules (nvidia_driver_source: ubuntu" in ubuntu[0]
    assert check("nvidia_driver", registered=on, nvidia_driver_secure_boot="sign") == ([], [])
    # Canonical's precompiled modules are signed by Canonical: nothing to sign.
    precompiled = {"gpu_present": True, "driver": {"modules": "precompiled"}}
    assert check("nvidia_driver", registered=on, gpuops_stack=precompiled) == ([], [])
    assert check("nvidia_driver", registered={"preflight_node": {"secure_boot": "disabled"}}) == ([], [])
    assert check("nvidia_driver") == ([], [])


def test_nvidia_driver_signing_needs_the_headers_apt_and_a_good_key_pair():
    keys = ROOT / "tests" / "gpusim" / "keys"
    key, cert = (keys / "mok-fleet.key").read_text(), (keys / "mok-fleet.pem").read_text()
    sign = {"nvidia_driver_secure_boot": "sign", "preflight_today": "2026-11-29"}
    assert check("nvidia_driver", **sign, nvidia_driver_mok_key=key, nvidia_driver_mok_certificate=cert) == ([], [])
    errors, _warnings = check("nvidia_driver", **sign, nvidia_driver_kernel_headers=False)
    assert errors == [
        "nvidia_driver_secure_boot is sign, which builds and signs the modules with DKMS for the kernel's headers, and "
        "nvidia_driver_kernel_headers is false: set it to true."
    ]
    errors, _warnings = check("nvidia_driver", family="RedHat", distribution="RedHat", **sign)
    assert len(errors) == 1 and "built for Debian and Ubuntu" in errors[0]
    errors, _warnings = check("nvidia_driver", **sign, nvidia_driver_mok_key=key)
    assert errors and "nvidia_driver_mok_certificate is empty" in errors[0]
    # A year past the certificate's end.
    later = {**sign, "preflight_today": "2047-01-01"}
    errors, _warnings = check("nvidia_driver", **later, nvidia_driver_mok_key=key, nvidia_driver_mok_certificate=cert)
    assert errors == [
        "nvidia_driver_mok_certificate expired on 2046-01-01: make a new key pair, enrol it "
        "(nvidia_driver_mok_password) and rebuild the modules with it"
    ]
    # The key never shows in a message.
    assert not [e for e in errors if "PRIVATE KEY" in e]
    bad = {
        "nvidia_driver_mok_name": "a/b",
        "nvidia_driver_mok_days": 0,
        "nvidia_driver_mok_password": "x" * 257,
        "nvidia_driver_mok_dir": "relative",
    }
    errors, _warnings = check("nvidia_driver", **sign, **bad)
    assert len(errors) == 4
    assert any("nvidia_driver_mok_name is 'a/b'" in e for e in errors)
    assert any("nvidia_driver_mok_days is 0" in e for e in errors)
    assert any("it has 257 characters" in e for e in errors)
    assert any("nvidia_driver_mok_dir is 'relative'" in e for e in errors)
