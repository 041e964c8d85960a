# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a module's main() in-process against a fake node: its binaries and what each exact argv prints."""

from __future__ import annotations

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class Exited(Exception):
    def __init__(self, failed, result):
        super().__init__(result.get("msg"))
        self.failed = failed
        self.result = result


class Node:
    """A fake node: the binaries it has and what each exact argv prints."""

    def __init__(self, monkeypatch, binaries, outputs):
        self.binaries = binaries
        self.outputs = outputs
        self.calls = []
        self.warnings = []
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", self.get_bin_path)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", self.run_command)
        monkeypatch.setattr(basic.AnsibleModule, "exit_json", self.exit_json)
        monkeypatch.setattr(basic.AnsibleModule, "fail_json", self.fail_json)
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, text: self.warnings.append(text))

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.binaries.get(name)

    def run_command(self, argv, **kwargs):
        assert kwargs.get("environ_update", {}).get("LC_ALL") == "C"
        self.calls.append(list(argv))
        assert tuple(argv) in self.outputs, f"unexpected command {argv}"
        return self.outputs[tuple(argv)]

    @staticmethod
    def exit_json(module, **result):
        raise Exited(False, result)

    @staticmethod
    def fail_json(module, **result):
        raise Exited(True, result)


def run_module(main, args=None, check_mode=False, diff=False):
    args = dict(args or {})
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises(Exited) as exited:
        main()
    return exited.value
