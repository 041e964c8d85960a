# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: workload_tiers
short_description: The Slurm QOS and the Kubernetes PriorityClasses of the workload tiers
version_added: 1.0.0
description:
  - Reads C(workload_tiers), one definition of which work goes first (for example training above
    inference), and returns what each scheduler needs from it, so that Slurm and Kubernetes agree.
  - A tier with C(preempt=true) preempts every tier of a lower priority and the work of no tier
    (Slurm's C(normal) QOS, a pod without a PriorityClass); Kubernetes preempts by value alone,
    and Slurm is given the same rule.
  - In Slurm the preempted job gets C(grace_time) seconds between SIGTERM and its requeue.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The tiers, each a dict with C(name), C(priority), C(preempt) and C(grace_time).
    type: raw
    required: true
  variable:
    description: The variable's name, for the messages.
    type: str
    default: workload_tiers
"""

EXAMPLES = r"""
- name: Write the PriorityClasses of the workload tiers
  ansible.builtin.copy:
    content: "{{ (workload_tiers | gpuops.cluster.workload_tiers).priority_classes | to_nice_yaml }}"
    dest: /srv/manifests/priority-classes.yaml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: What the tiers become.
  type: dict
  contains:
    problems:
      description: Every reason the tiers cannot be used, one sentence each naming the variable; the rest is empty then.
      type: list
      elements: str
    slurm_qos:
      description:
        - One QOS per tier, highest first, with C(name), C(priority), C(preempt) (names),
          C(preempt_mode) and C(grace_time) (seconds).
      type: list
      elements: dict
    slurm_conf:
      description: The slurm.conf settings the tiers need, each C([value, reason]).
      type: dict
    priority_classes:
      description: One C(scheduling.k8s.io/v1) PriorityClass manifest per tier, highest first.
      type: list
      elements: dict
"""

from ansible_collections.gpuops.cluster.plugins.module_utils import priority


def workload_tiers(tiers, variable="workload_tiers"):
    found = priority.problems(tiers, variable)
    if found:
        return {"problems": found, "slurm_qos": [], "slurm_conf": {}, "priority_classes": []}
    return {
        "problems": [],
        "slurm_qos": priority.slurm_qos(tiers),
        "slurm_conf": {name: list(pair) for name, pair in priority.slurm_conf(tiers).items()},
        "priority_classes": priority.priority_classes(tiers),
    }


class FilterModule:
    def filters(self):
        return {"workload_tiers": workload_tiers}
