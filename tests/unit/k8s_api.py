# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes manifests against the API types of the official Python client (``kubernetes``,
pinned in requirements.txt, whose models are strict pydantic models that forbid unknown fields):
a field the type does not have, or a value of the wrong type, is refused here as the API server
would refuse it. The client does not model which fields are required: the tests check those."""

from __future__ import annotations

import kubernetes.client as k8s
import pydantic


def model(manifest):
    """The client's model class of a manifest, from its apiVersion and kind (V1PriorityClass)."""
    version = manifest["apiVersion"].rsplit("/", 1)[-1]
    return getattr(k8s, version[0].upper() + version[1:] + manifest["kind"])


def problems(manifest):
    """What the API would refuse in the manifest, one line each; empty when it is valid."""
    try:
        model(manifest).model_validate(manifest)
    except pydantic.ValidationError as exc:
        return ["{}: {}".format(".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors()]
    return []
