# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers every scenario's tests share."""

from __future__ import annotations

import contextlib
import json
import shlex


def name(host):
    """The platform's name, as molecule.yml gives it (the container's hostname)."""
    return host.backend.get_hostname()


def management_address(host):
    """The source address of the node's default route (what ansible_facts.default_ipv4.address is)."""
    return host.check_output(
        'python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); '
        "s.connect(('192.0.2.1', 9)); print(s.getsockname()[0])\""
    )


FAULTS = "/etc/gpusim/faults.json"


@contextlib.contextmanager
def injected_faults(host, faults):
    """gpusim faults added to the node's /etc/gpusim/faults.json for the block, and the file as it was
    afterwards (removed if there was none)."""
    existed = host.file(FAULTS).exists
    before = host.file(FAULTS).content_string if existed else ""
    host.run_test("mkdir -p /etc/gpusim" + (f" && cp -p {FAULTS} {FAULTS}.before" if existed else ""))
    try:
        merged = {**json.loads(before.strip() or "{}"), **faults}
        host.run_test(f"printf '%s\\n' {shlex.quote(json.dumps(merged))} > {FAULTS}")
        yield
    finally:
        host.run_test(f"mv {FAULTS}.before {FAULTS}" if existed else f"rm -f {FAULTS}")
