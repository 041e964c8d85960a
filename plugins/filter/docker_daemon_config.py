# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: docker_daemon_config
short_description: Merge the NVIDIA runtime settings into a Docker daemon.json, keeping every other key
version_added: 1.0.0
description:
  - Reads the text of an existing C(/etc/docker/daemon.json) (empty for none) and returns the whole
    configuration with the C(nvidia) runtime added. Keys the file already has stay as they are, other
    runtimes stay, and C(default-ulimits) is merged limit by limit.
  - C(default-runtime), C(default-shm-size) and C(default-ulimits) are set only when asked for.
  - Fails with the file's path and the parser's message when the text is not a JSON object, so a
    broken file is reported before anything changes.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  _input:
    description: The text of the current daemon.json; empty or whitespace for none.
    type: str
    required: true
  path:
    description: The file's path, for messages.
    type: str
    default: /etc/docker/daemon.json
  runtime_path:
    description: The C(nvidia) runtime's executable.
    type: str
    default: nvidia-container-runtime
  default_runtime:
    description: Make C(nvidia) the default runtime.
    type: bool
    default: false
  shm_size:
    description: C(default-shm-size), such as V(1G); empty leaves the key alone.
    type: str
    default: ""
  ulimits:
    description: C(default-ulimits) to set, name to C({soft, hard}).
    type: dict
    default: {}
  settings:
    description: Further keys to set, merged last (a dict value is merged key by key).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Write the merged daemon.json
  ansible.builtin.copy:
    dest: /etc/docker/daemon.json
    content: "{{ current_text | gpuops.cluster.docker_daemon_config(default_runtime=true) | to_nice_json }}\n"
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The merged configuration.
  type: dict
"""

import json
import re

from ansible.errors import AnsibleFilterError

SHM_SIZE = re.compile(r"^[0-9]+[bkmgBKMG]?$")


def _merge(base, extra):
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def docker_daemon_config(
    text,
    *,
    path="/etc/docker/daemon.json",
    runtime_path="nvidia-container-runtime",
    default_runtime=False,
    shm_size="",
    ulimits=None,
    settings=None,
):
    text = text or ""
    if text.strip():
        try:
            current = json.loads(text)
        except ValueError as err:
            raise AnsibleFilterError(
                f"{path} is not valid JSON ({err}); Docker cannot read it either. Fix or remove it, then run again."
            ) from err
        if not isinstance(current, dict):
            raise AnsibleFilterError(f"{path} holds a JSON {type(current).__name__}, not an object; fix or remove it.")
    else:
        current = {}
    if shm_size and not SHM_SIZE.match(str(shm_size)):
        raise AnsibleFilterError(
            f"container_toolkit_docker_shm_size is {shm_size!r}; use a size Docker reads, such as 1G or 512M."
        )
    ours = {"runtimes": {"nvidia": {"path": runtime_path, "runtimeArgs": []}}}
    if default_runtime:
        ours["default-runtime"] = "nvidia"
    if shm_size:
        ours["default-shm-size"] = str(shm_size)
    limits = {}
    for name, limit in (ulimits or {}).items():
        if not isinstance(limit, dict) or set(limit) != {"soft", "hard"}:
            raise AnsibleFilterError(
                f"container_toolkit_docker_ulimits.{name} is {limit!r}; give it soft and hard, "
                "such as {soft: -1, hard: -1}."
            )
        limits[name] = {"Name": name, "Soft": int(limit["soft"]), "Hard": int(limit["hard"])}
    if limits:
        ours["default-ulimits"] = limits
    return _merge(_merge(current, ours), settings or {})


class FilterModule:
    def filters(self):
        return {"docker_daemon_config": docker_daemon_config}
