# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_join_config
short_description: kubeadm's JoinConfiguration (v1beta4) for a GPU worker node
version_added: 1.0.0
description:
  - Reads the line C(kubeadm token create --print-join-command) prints on the control plane (the
    API server's endpoint, the token, the CA's hashes) and writes a JoinConfiguration of
    C(kubeadm.k8s.io/v1beta4) from it, with the node's name, labels and taints, containerd's socket
    and the folder of kubelet patches.
  - A line that is no join command, a token not of the form C([a-z0-9]{6}.[a-z0-9]{16}), or a join
    without a pinned CA hash is an error naming what was printed.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The join command's line.
    type: str
    required: true
  node_name:
    description: The node's name in the cluster.
    type: str
    required: true
  labels:
    description: The labels the kubelet registers the node with.
    type: dict
    required: true
  taints:
    description: The node's taints, each C({key, value, effect}).
    type: list
    elements: dict
    required: true
  patches_dir:
    description: The folder of kubeadm patches (C(kubeletconfiguration+merge.yaml)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Write the join configuration
  ansible.builtin.copy:
    content: >-
      {{ __join.stdout | gpuops.cluster.k8s_join_config(node_name='gpu-01', labels={}, taints=[],
         patches_dir='/etc/kubernetes/gpuops-patches') | to_nice_yaml(indent=2) }}
    dest: /etc/kubernetes/gpuops-join.yaml
    mode: "0600"
  no_log: true
"""

RETURN = r"""
_value:
  description: The JoinConfiguration, to write as YAML.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.module_utils.k8s import join_configuration, parse_join_command


def k8s_join_config(command, node_name, labels, taints, patches_dir):
    try:
        return join_configuration(
            parse_join_command(command), node_name, labels=labels or {}, taints=taints or [], patches_dir=patches_dir
        )
    except ValueError as exc:
        # The message names what was printed; never the token (parse_join_command keeps it out).
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"k8s_join_config": k8s_join_config}
