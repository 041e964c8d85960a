# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm role's fleet decisions, templated as Ansible templates them from the role's own files:
which nodes would keep a stale slurm.conf in a limited run, which nodes leave slurm.conf, which
join and which changed hardware. The operator's cases: all in the run, --limit on a new node, a
config-less cluster, a backup controller out of the run."""

from __future__ import annotations

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import ROOT, trusted

ROLE = ROOT / "roles" / "slurm"
VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def task(path, name):
    return next(t for t in yaml.safe_load((ROLE / "tasks" / path).read_text()) if t.get("name") == name)


STALE = task(
    "plan.yml",
    "Refuse to change the node lines while compute nodes that keep their own slurm.conf are out of this run",
)
COLLECT = task("plan.yml", "Collect every compute node's description")
CONTROLLER_FACTS = task(
    "plan.yml", "Read the facts of the Slurm controllers and the slurmdbd host that are out of this batch"
)
CONTROLLER_FILES = task(
    "config.yml",
    "Write slurm.conf, gres.conf, cgroup.conf (and topology.conf) on the controller when it is out of this batch",
)
DESCRIBE = task("node.yml", "Describe the node for slurm.conf and gres.conf")
UNREGISTERED = task("node.yml", "Refuse a node whose GPUs are not all registered in its NVLink domain")
LEAVING = task("leave.yml", "Work out which nodes leave slurm.conf")


def templar(play, hostvars=None, controllers=("ctl",), compute=("gpu01", "gpu02", "gpu03"), batch=None, **extra):
    variables = dict(DEFAULTS)
    variables.update(VARS)
    groups = {"all": [*controllers, *compute], "slurm_controller": list(controllers), "slurm_compute": list(compute)}
    variables.update(
        groups=groups,
        ansible_play_hosts_all=list(play),
        ansible_play_hosts=list(play),
        ansible_play_batch=list(play if batch is None else batch),
        hostvars={host: dict((hostvars or {}).get(host, {}), inventory_hostname=host) for host in groups["all"]},
        **extra,
    )
    return Templar(loader=DataLoader(), variables=trusted(variables))


def stale(play, plan_=None, **kwargs):
    t = templar(play, __slurm_plan=plan_ or {"kept": {}, "nodes": {}}, **kwargs)
    t.available_variables = dict(t.available_variables, __sliced_out=trusted(STALE["vars"]["__sliced_out"]))
    return t.template(trusted(STALE["vars"]["__stale"]))


def test_a_run_over_every_host_leaves_no_copy_stale():
    assert stale(["ctl", "gpu01", "gpu02", "gpu03"]) == []


def test_a_limited_run_names_the_compute_nodes_that_keep_their_own_copy():
    assert stale(["gpu03"]) == ["gpu01", "gpu02"]


def test_config_less_nodes_take_slurm_conf_from_slurmctld():
    configless = {"gpu01": {"slurm_configless": True}, "gpu02": {"slurm_configless": True}}
    assert stale(["gpu03"], hostvars=configless) == []


def test_a_backup_controller_out_of_the_run_keeps_its_own_copy():
    configless = {h: {"slurm_configless": True} for h in ("gpu01", "gpu02", "gpu03")}
    assert stale(["gpu03"], hostvars=configless, controllers=("ctl1", "ctl2")) == ["ctl2"]


def test_in_an_awx_slice_the_other_slices_nodes_are_named_unless_recorded_config_less():
    """A slice's inventory holds its own hosts (gpu03, the pinned controller): gpu07 and gpu08, of
    other slices, are in the fleet state only. gpu08's record says it takes slurm.conf from
    slurmctld; gpu07's (or an older record without the mark) keeps its own copy, and goes stale."""
    kept = {"gpu07": "2026-12-05", "gpu08": "2026-12-05"}
    nodes = {"gpu07": node("gpu07"), "gpu08": dict(node("gpu08"), configless=True), "gpu03": node("gpu03")}
    sliced = stale(["ctl", "gpu03"], plan_={"kept": kept, "nodes": nodes}, compute=("gpu03",))
    assert sliced == ["gpu07"]
    nodes["gpu07"]["configless"] = True
    assert stale(["ctl", "gpu03"], plan_={"kept": kept, "nodes": nodes}, compute=("gpu03",)) == []
    # A --limit run keeps judging the inventory's nodes by their variables, not by their records.
    limited = {"gpu01": {**node("gpu01"), "configless": True}}
    assert stale(["gpu03"], plan_={"kept": {"gpu01": "2026-12-05"}, "nodes": limited}) == ["gpu01", "gpu02"]


def test_a_node_down_is_in_the_run_and_not_named():
    """A node that is down was targeted (ansible_play_hosts_all): it is not refused, and gets its
    copy when a run reaches it again."""
    t = templar(["ctl", "gpu01", "gpu02", "gpu03"])
    t.available_variables = dict(
        t.available_variables,
        __slurm_plan={"kept": {}, "nodes": {}},
        __sliced_out=trusted(STALE["vars"]["__sliced_out"]),
    )
    t.available_variables = dict(t.available_variables, ansible_play_hosts=["ctl", "gpu01", "gpu02"])
    assert t.template(trusted(STALE["vars"]["__stale"])) == []


def plan(**fields):
    result = {"nodes": {}, "kept": {}, "missing": [], "absent": {}, "new": [], "changed_keys": {}, "written": []}
    result.update(fields)
    return result


def collected(fleet_result):
    t = templar(["ctl", "gpu01"], fleet_result=fleet_result, __slurm_configless_node=False, __slurm_controller="ctl")
    return {
        key: t.template(trusted(COLLECT["ansible.builtin.set_fact"][key]))
        for key in ("__slurm_nodes", "__slurm_joining", "__slurm_rehardwared", "__slurm_lines_change")
    }


def node(host, gpus=4):
    return {"hostname": host, "spec": {"gres": f"gpu:l40s:{gpus}"}, "hardware": {"gpus": gpus, "product": "L40S"}}


def test_the_first_build_drains_nothing_for_burn_in():
    out = collected(
        plan(nodes={"gpu01": node("gpu01"), "gpu02": node("gpu02")}, new=["gpu01", "gpu02"], written=["gpu01", "gpu02"])
    )
    assert out["__slurm_joining"] == [] and out["__slurm_lines_change"] is True
    assert out["__slurm_nodes"] == {"gpu01": {"gres": "gpu:l40s:4"}, "gpu02": {"gres": "gpu:l40s:4"}}


def test_a_node_joining_a_running_cluster_is_drained_for_burn_in():
    out = collected(
        plan(
            nodes={"gpu01": node("gpu01"), "gpu03": node("gpu03")},
            kept={"gpu01": "d"},
            new=["gpu03"],
            written=["gpu03"],
        )
    )
    assert out["__slurm_joining"] == ["gpu03"]


def test_a_node_whose_gpus_changed_is_drained_and_one_whose_memory_changed_is_not():
    out = collected(
        plan(
            nodes={"gpu01": node("gpu01", 3), "gpu02": node("gpu02")},
            written=["gpu01", "gpu02"],
            changed_keys={"gpu01": ["hardware", "spec"], "gpu02": ["spec"]},
        )
    )
    assert out["__slurm_rehardwared"] == ["gpu01"] and out["__slurm_joining"] == []


def test_a_no_op_run_changes_no_line():
    out = collected(plan(nodes={"gpu01": node("gpu01")}, kept={}))
    assert out["__slurm_lines_change"] is False


@pytest.mark.parametrize(
    ("known", "expected"),
    [
        # old09 left the compute group, gpu05 was never recorded and not reached: both known to slurmctld.
        ("old09-ib\ngpu05\ngpu01\n", {"old09-ib": "old09", "gpu05": "gpu05"}),
        # slurmctld does not know them: nothing to drain or wait for.
        ("gpu01\n", {}),
        # slurmctld does not answer: nothing is taken as known (the run refuses unless forced).
        ("unanswered: slurm_load_partitions: Unable to contact slurm controller", {}),
    ],
)
def test_the_nodes_that_leave_are_those_slurmctld_knows(known, expected):
    t = templar(
        ["ctl", "gpu01"],
        __slurm_plan=plan(absent={"old09": node("old09-ib")}, missing=["gpu05"]),
        __slurm_known={"stdout": known},
        **LEAVING["vars"],
    )
    assert t.template(trusted(LEAVING["ansible.builtin.set_fact"]["__slurm_leaving"])) == expected


@pytest.mark.parametrize("path", sorted((ROOT / "roles" / "fleet" / "tasks").glob("*.yml")), ids=lambda p: p.name)
def test_the_fleet_role_runs_whenever_a_tagged_role_includes_it(path):
    """include_role does not pass its tags on: a task of the fleet role without the always tag would
    be skipped under --tags slurm or --tags dcgm, and the role that included it would read no state."""
    for task in yaml.safe_load(path.read_text()):
        assert "always" in task.get("tags", []), task["name"]


def test_the_leave_checks_are_imported_so_that_they_take_the_role_s_tags():
    tasks = yaml.safe_load((ROLE / "tasks" / "plan.yml").read_text())
    (leave,) = [t for t in tasks if "leave.yml" in str(t.get("ansible.builtin.import_tasks", ""))]
    assert leave["ansible.builtin.import_tasks"] == "leave.yml"


@pytest.mark.parametrize(
    ("play", "batch", "outside"),
    [
        (["ctl", "gpu01", "gpu02", "gpu03"], None, False),  # one run over everything
        (["gpu03"], None, True),  # --limit gpu03
        # SITE_SERIAL: a batch without the controller, which the play holds in a later batch. Its
        # facts are not gathered yet, and slurmctld must know the batch's new nodes before their
        # slurmd starts.
        (["ctl", "gpu01", "gpu02", "gpu03"], ["gpu01", "gpu02"], True),
        (["ctl", "gpu01", "gpu02", "gpu03"], ["gpu03", "ctl"], False),
    ],
)
def test_the_controller_is_reached_from_every_batch_it_is_not_in(play, batch, outside):
    t = templar(play, batch=batch, slurm_dbd_group="slurm_dbd", __slurm_controller="ctl")
    assert t.template(trusted(CONTROLLER_FACTS["loop"])) == (["ctl"] if outside else [])
    assert t.template(trusted("{{ " + CONTROLLER_FILES["when"] + " }}")) is outside


MIG_RESUME = task("services.yml", "Resume the nodes a MIG layout change drained")


def test_only_nodes_still_drained_for_their_mig_layout_are_resumed():
    """Slurm 23.02 to 24.11 without slurmdbd keep a resumed node's reason (until a job lands): an
    idle node with the old MIG reason is not resumed again in every run."""
    sinfo = [
        "gpu01|drained|gpu:a100_1g.10gb:7|gpuops mig layout all-1g.10gb",
        "gpu02|idle|gpu:a100_1g.10gb:7|gpuops mig layout all-1g.10gb",
        "gpu03|draining|gpu:a100_3g.40gb:2|gpuops mig layout all-3g.40gb",
        "gpu04|drained|gpu:a100:8|bad fan",
    ]
    assert mig_resumed(sinfo, {}) == ["gpu01", "gpu03"]


def mig_resumed(sinfo, reasons):
    t = templar(["ctl"], __slurm_sinfo={"stdout_lines": sinfo}, __slurm_burn_in_reasons=reasons)
    assert MIG_RESUME["loop"] == "{{ __resume }}"
    return t.template(trusted(MIG_RESUME["vars"]["__resume"]))


REDRAIN = task("services.yml", "Give the nodes this run drained their reason again where a registration replaced it")


def redrained(t, reasons, sinfo):
    again = []
    for key, value in reasons.items():
        names = dict(t.available_variables, __slurm_sinfo={"stdout_lines": sinfo}, item={"key": key, "value": value})
        names["__reasons_now"] = REDRAIN["vars"]["__reasons_now"]
        t2 = Templar(loader=DataLoader(), variables=trusted(names))
        if all(t2.template(trusted("{{ " + c + " }}")) for c in REDRAIN["when"] if c != "not ansible_check_mode"):
            again.append(key)
    return again


def test_a_mig_drain_that_a_registration_of_the_old_layout_replaced_is_set_again_and_resumed():
    """slurmctld restarts before slurmd: the slurmd still running with the old MIG layout answers its
    first ping with the old device count, and 23.11 replaces the drain reason with its refusal. The
    node gets this run's reason back and is resumed; a node a person drained is left alone."""
    plan = {"nodes": {"gpu01": {"hostname": "gpu01"}, "gpu02": {"hostname": "gpu02"}, "gpu03": {"hostname": "gpu03"}}}
    hostvars = {"gpu01": {"slurm_drained_by_us": True, "slurm_drained_reason": "gpuops mig layout a100-small"}}
    t = templar(
        ["ctl", "gpu01", "gpu02"], hostvars=hostvars, __slurm_plan=plan, __slurm_joining=[], __slurm_rehardwared=[]
    )
    reasons = t.template(trusted(VARS["__slurm_burn_in_reasons"]))
    assert reasons == {"gpu01": "gpuops mig layout a100-small"}
    sinfo = [
        "gpu01|drained|gpu:a100_1g.10gb:56|gres/gpu count reported lower than configured (32 < 56)",
        "gpu02|drained|gpu:a100:8|bad fan",
        "gpu03|idle|gpu:a100:8|none",
    ]
    assert redrained(t, reasons, sinfo) == ["gpu01"]
    assert mig_resumed(sinfo, reasons) == ["gpu01"]
    # Without this run's record, the refusal is not taken for a MIG drain.
    assert mig_resumed(sinfo, {}) == []


def test_a_burn_in_reason_that_a_refused_registration_replaced_is_set_again():
    """slurmctld 23.11 replaces a drained node's reason with that of a registration it refuses
    (a config-less slurmd with its old description); 22.05 keeps it. Only the replaced one is set again."""
    plan = {"nodes": {"gpu01": {"hostname": "gpu01"}, "gpu02": {"hostname": "gpu02"}, "gpu03": {"hostname": "gpu03"}}}
    t = templar(["ctl", "gpu01", "gpu02"], __slurm_plan=plan, __slurm_joining=["gpu03"], __slurm_rehardwared=["gpu02"])
    reasons = t.template(trusted(VARS["__slurm_burn_in_reasons"]))
    assert reasons == {
        "gpu03": DEFAULTS["slurm_burn_in_reason"],
        "gpu02": DEFAULTS["slurm_burn_in_reason_changed"],
    }
    sinfo = [
        "gpu01|idle|gpu:l40s:4|none",
        "gpu02|drained|gpu:l40s:4|gres/gpu count reported lower than configured (3 < 4)",
        f"gpu03|drained|gpu:l40s:4|{DEFAULTS['slurm_burn_in_reason']}",
    ]
    assert redrained(t, reasons, sinfo) == ["gpu02"]
    off = templar(["ctl"], __slurm_plan=plan, __slurm_joining=["gpu03"], __slurm_rehardwared=[], slurm_burn_in=False)
    assert off.template(trusted(VARS["__slurm_burn_in_reasons"])) == {}


LEAVE_BUDGET = task(
    "leave.yml",
    "Refuse to remove more nodes than slurm_leave_max, or nodes an empty or stale fleet state cannot describe",
)


@pytest.mark.parametrize(
    ("kept", "absent", "missing", "leaving", "allowed"),
    [
        # An empty fleet state and slurm_configless: --limit gpu06 would drain gpu01-gpu05 as "leaving".
        ({}, {}, ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"], ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"], False),
        # Even one unknown node, while the fleet state knows no other: refused.
        ({}, {}, ["gpu05"], ["gpu05"], False),
        # A populated fleet state that does not record a node slurmctld knows is stale: refused too.
        ({"gpu01": "d"}, {}, ["gpu05"], ["gpu05"], False),
        # A node never recorded that slurmctld does not know leaves nothing.
        ({"gpu01": "d"}, {}, ["gpu05"], [], True),
        # Nodes slurmctld knows that a populated fleet state lacks: refused as stale, whatever slurm_leave_max.
        (
            {"gpu01": "d"},
            {"old09": {}},
            ["gpu05", "gpu06", "gpu07", "gpu08"],
            ["old09-ib", "gpu05", "gpu06", "gpu07", "gpu08"],
            False,
        ),
        ({"gpu01": "d"}, {"old09": {}}, [], ["old09-ib"], True),
        # Five out of the inventory: more than slurm_leave_max (4).
        ({"gpu01": "d"}, {f"old{n}": {} for n in range(5)}, [], [f"old{n}-ib" for n in range(5)], False),
    ],
)
def test_the_leave_path_counts_every_leaving_node_and_refuses_what_an_empty_or_stale_fleet_state_cannot_describe(
    kept, absent, missing, leaving, allowed
):
    t = templar(
        ["ctl", "gpu06"],
        __slurm_plan={"kept": kept, "absent": absent, "missing": missing},
        __slurm_leaving={name: name.removesuffix("-ib") for name in leaving},
        **LEAVE_BUDGET["vars"],
    )
    results = [
        t.template(trusted("{{ " + str(that) + " }}")) for that in LEAVE_BUDGET["ansible.builtin.assert"]["that"]
    ]
    assert all(results) is allowed
    if not allowed:
        message = " ".join(t.template(trusted(LEAVE_BUDGET["ansible.builtin.assert"]["fail_msg"])).split())
        assert "slurm_leave_force: true" in message
        if not kept:
            assert "which is empty (it holds no record of any node out of this run" in message
            assert "add gpu01,gpu02,gpu03,gpu04,gpu05 to --limit" in message or "add gpu05 to --limit" in message
        elif missing and set(missing) <= set(leaving):
            assert "which is stale (it records 1 other nodes out of this run" in message, message
        else:
            assert "more than slurm_leave_max (4)" in message
    forced = templar(
        ["ctl", "gpu06"],
        __slurm_plan={"kept": kept, "absent": absent, "missing": missing},
        __slurm_leaving={name: name for name in leaving},
        slurm_leave_force=True,
        **LEAVE_BUDGET["vars"],
    )
    assert all(
        forced.template(trusted("{{ " + str(that) + " }}")) for that in LEAVE_BUDGET["ansible.builtin.assert"]["that"]
    )


PAST_BUDGET = task("leave.yml", "Refuse to remove nodes past the blast-radius budget")


def test_the_leaving_nodes_count_against_the_fleet_s_blast_radius_budget():
    """Forty nodes (the budget: the smaller of 8 and 10 %, four), two out by the health check already:
    two may leave, three may not; a latched budget lets none leave; slurm_leave_force skips the check."""
    fleet = "".join(f"gpu{n:02}|idle|none\n" for n in range(1, 41))
    fleet = fleet.replace("gpu01|idle|none", "gpu01|drain|gpuops-health: xid GPU1")
    fleet = fleet.replace("gpu02|idle|none", "gpu02|down|gpuops-health: reboot GPU0, xid GPU0")
    comments = "".join(f"gpu{n:02}|(null)\n" for n in range(1, 41))

    def verdict(leaving, comments=comments, **extra):
        t = templar(
            ["ctl", "gpu06"],
            __slurm_leaving={name: name for name in leaving},
            __slurm_leave_budget_read={"results": [{"stdout": fleet}, {"stdout": comments}]},
            **{**PAST_BUDGET["vars"], **extra},
        )
        if not t.template(trusted("{{ " + PAST_BUDGET["when"] + " }}")):
            return True, ""
        allowed = t.template(trusted("{{ " + PAST_BUDGET["ansible.builtin.assert"]["that"] + " }}"))
        return allowed, " ".join(t.template(trusted(PAST_BUDGET["ansible.builtin.assert"]["fail_msg"])).split())

    assert verdict(["gpu39", "gpu40"])[0]
    allowed, message = verdict(["gpu38", "gpu39", "gpu40"])
    assert not allowed
    assert "gpu38, gpu39, gpu40 would leave slurm.conf and be drained, but nothing was drained" in message
    assert "budget is spent: 4 nodes of 40" in message and "validate_health_budget_percent" in message
    assert "slurm_leave_force: true" in message
    assert verdict(["gpu38", "gpu39", "gpu40"], validate_health_budget_percent=20)[0]
    latched = comments.replace("gpu03|(null)", "gpu03|gpuops: budget spent 2026-12-05T01:00:00Z (gpu03 refused)")
    allowed, message = verdict(["gpu40"], comments=latched)
    assert not allowed and "budget is latched (gpu03: gpuops: budget spent" in message
    assert verdict(["gpu38", "gpu39", "gpu40"], slurm_leave_force=True)[0]


DOMAIN = {"cluster_uuid": "9c6f5af3-53bf-49b5-a436-b66766c413c3", "clique_id": 4026, "gpus": [0, 1, 2, 3]}


@pytest.mark.parametrize(
    ("nvidia_gpu", "recorded"),
    [
        ({"count": 8, "nvlink_domain": None}, {}),
        ({"count": 0}, {}),
        (
            {"count": 4, "nvlink_domain": dict(DOMAIN, problem=None)},
            {"cluster_uuid": DOMAIN["cluster_uuid"], "clique_id": 4026},
        ),
    ],
)
def test_a_node_records_its_nvlink_domain_only_where_it_has_one(nvidia_gpu, recorded):
    """The record keeps the cluster and clique (the block of topology.conf), nothing else of the
    domain, and no key at all on a node outside any: the records of every existing node stay equal."""
    t = templar(["ctl", "gpu01"], ansible_facts={"nvidia_gpu": nvidia_gpu})
    assert t.template(trusted(DESCRIBE["vars"]["__domain"])) == recorded


def test_a_tray_whose_gpus_are_not_in_one_clique_is_refused_naming_it():
    problem = (
        "not every GPU is registered in cluster 9c6f5af3-53bf-49b5-a436-b66766c413c3 clique 4026: GPU3 is In Progress"
    )
    t = templar(
        ["ctl", "gpu01"],
        inventory_hostname="gpu01",
        __domain=dict(DOMAIN, problem=problem),
    )
    assert t.template(trusted("{{ " + UNREGISTERED["when"][0] + " }}")) is True
    assert t.template(trusted("{{ " + UNREGISTERED["ansible.builtin.assert"]["that"] + " }}")) is False
    message = t.template(trusted(UNREGISTERED["ansible.builtin.assert"]["fail_msg"]))
    assert message.startswith(f"gpu01: {problem}. Slurm's topology places this tray")
    assert "slurm_topology: none" in message
    t = templar(["ctl", "gpu01"], __domain=None)
    assert t.template(trusted("{{ " + UNREGISTERED["when"][0] + " }}")) is False


UNPLACED = task("plan.yml", "Refuse an AWX slice while nodes of other slices have no partitions recorded")


def test_a_slice_takes_the_other_slices_partitions_and_config_less_marks_from_their_records():
    """The slice of gpu01 (compute group gpu01 alone): gpu07 and gpu08 are kept from the fleet state."""
    nodes = {
        "gpu01": node("gpu01"),
        "gpu07": dict(node("gpu07"), partitions=["gpu", "l40s"], configless=True),
        "gpu08": dict(node("gpu08"), partitions=["gpu"]),
    }
    result = plan(nodes=nodes, kept={"gpu07": "2026-12-05", "gpu08": "2026-12-05"})
    t = templar(["ctl", "gpu01"], fleet_result=result, compute=("gpu01",), __slurm_configless_node=False,
                __slurm_controller="ctl", __slurm_configless_hosts=[])  # fmt: skip
    facts = COLLECT["ansible.builtin.set_fact"]
    assert t.template(trusted(facts["__slurm_sliced_partitions"])) == {"gpu": ["gpu07", "gpu08"], "l40s": ["gpu07"]}
    assert t.template(trusted(facts["__slurm_configless_any"])) is True
    # A record from before partitions were recorded cannot be placed: the slice is refused, naming it.
    del nodes["gpu08"]["partitions"]
    t.available_variables = dict(t.available_variables, __slurm_plan=result)
    assert t.template(trusted(UNPLACED["vars"]["__unplaced"])) == ["gpu08"]
    # In a run over the whole inventory nothing is out of the groups: nothing taken from records.
    whole = templar(["ctl", "gpu01", "gpu07", "gpu08"], fleet_result=result, compute=("gpu01", "gpu07", "gpu08"),
                    __slurm_plan=result)  # fmt: skip
    assert whole.template(trusted(facts["__slurm_sliced_partitions"])) == {}
    assert whole.template(trusted(UNPLACED["vars"]["__unplaced"])) == []
