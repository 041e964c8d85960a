# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the facts modules share to run a command and read its output."""

from __future__ import annotations

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.module_utils.nvidia_smi import (
    MIG_NOTHING,
    parse_mig_compute_instances,
    parse_mig_instances,
    parse_mig_profiles,
)


def first_line(*texts):
    """The first non-blank line of the first text that has one."""
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return None


def run(module, argv):
    """Run ``argv`` in the C locale: the parsers read English output."""
    return module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})


def parse_or_fail(module, parser, text, argv):
    """``parser(text)``, or fail_json naming the command, the line number and the line."""
    try:
        return parser(text)
    except ParseError as exc:
        module.fail_json(
            msg="Could not read the output of `{}`: {}".format(" ".join(argv), exc),
            cmd=argv,
            line_number=exc.line_number,
            line=exc.line,
        )


def read_mig(module, nvidia_smi, gpus, profiles=True):
    """``nvidia-smi mig -lgip`` where a GPU can do MIG (``profiles``), ``-lgi`` and ``-lci`` where one
    has it on; ``{"profiles", "instances", "compute"}`` with what was read (``gpus``: the parsed
    ``-q -x`` GPUs). "No ... found" comes with a non-zero exit code and reads as none; another
    failure is a warning, and that key is left out."""
    if not any(gpu["mig_mode"] for gpu in gpus):
        return {}
    calls = [("profiles", "-lgip", parse_mig_profiles)] if profiles else []
    if any(gpu["mig_mode"] == "enabled" for gpu in gpus):
        calls += [("instances", "-lgi", parse_mig_instances), ("compute", "-lci", parse_mig_compute_instances)]
    out = {}
    for key, flag, parser in calls:
        argv = [nvidia_smi, "mig", flag]
        rc, stdout, stderr = run(module, argv)
        if rc == 0 or MIG_NOTHING.fullmatch((first_line(stdout, stderr) or "").strip()):
            out[key] = parse_or_fail(module, parser, stdout if rc == 0 else "", argv)
        else:
            module.warn("`{}` failed (rc {}): {}".format(" ".join(argv), rc, first_line(stderr, stdout)))
    return out
