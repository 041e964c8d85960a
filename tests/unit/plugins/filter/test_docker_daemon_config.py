# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The docker_daemon_config filter: the nvidia runtime merged into users' daemon.json, never clobbering it."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.docker_daemon_config import docker_daemon_config

NVIDIA = {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}


def merged(current, **kw):
    return docker_daemon_config(current, runtime_path="/usr/bin/nvidia-container-runtime", **kw)


@pytest.mark.parametrize("text", ["", "  \n", None])
def test_no_file_gives_the_runtime_alone(text):
    assert merged(text) == {"runtimes": {"nvidia": NVIDIA}}


def test_users_keys_and_runtimes_stay():
    current = json.dumps(
        {
            "data-root": "/srv/docker",
            "log-opts": {"max-size": "10m"},
            "runtimes": {"crun": {"path": "/usr/bin/crun"}},
            "default-ulimits": {"nofile": {"Name": "nofile", "Soft": 1024, "Hard": 4096}},
        }
    )
    out = merged(current, shm_size="1G", ulimits={"memlock": {"soft": -1, "hard": -1}})
    assert out == {
        "data-root": "/srv/docker",
        "log-opts": {"max-size": "10m"},
        "runtimes": {"crun": {"path": "/usr/bin/crun"}, "nvidia": NVIDIA},
        "default-shm-size": "1G",
        "default-ulimits": {
            "nofile": {"Name": "nofile", "Soft": 1024, "Hard": 4096},
            "memlock": {"Name": "memlock", "Soft": -1, "Hard": -1},
        },
    }


def test_merging_twice_changes_nothing():
    once = merged('{"log-driver": "journald"}', default_runtime=True, shm_size="2G")
    assert merged(json.dumps(once), default_runtime=True, shm_size="2G") == once


def test_default_runtime_only_when_asked_and_a_users_default_stays():
    assert "default-runtime" not in merged("{}")
    assert merged('{"default-runtime": "crun"}')["default-runtime"] == "crun"
    assert merged('{"default-runtime": "crun"}', default_runtime=True)["default-runtime"] == "nvidia"


def test_an_old_nvidia_docker2_entry_is_brought_up_to_date():
    out = merged('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": ["--debug"]}}}')
    assert out["runtimes"]["nvidia"] == NVIDIA


def test_settings_are_merged_last():
    out = merged('{"log-opts": {"max-size": "10m"}}', settings={"log-opts": {"max-file": "3"}, "live-restore": True})
    assert out["log-opts"] == {"max-size": "10m", "max-file": "3"}
    assert out["live-restore"] is True


@pytest.mark.parametrize(
    ("text", "kw", "message"),
    [
        ('{"runtimes": ', {}, "/etc/docker/daemon.json is not valid JSON"),
        ("[1, 2]", {}, "holds a JSON list, not an object"),
        ("{}", {"shm_size": "lots"}, "container_toolkit_docker_shm_size is 'lots'"),
        ("{}", {"ulimits": {"memlock": -1}}, "container_toolkit_docker_ulimits.memlock"),
    ],
)
def test_bad_input_is_refused_with_the_variable_or_file(text, kw, message):
    with pytest.raises(AnsibleFilterError, match=message):
        merged(text, **kw)
