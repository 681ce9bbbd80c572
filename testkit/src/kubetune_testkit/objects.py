"""Creating cluster-wide objects a session may share with another package's session."""

from __future__ import annotations

import contextlib
from typing import Any

from kubetune import errors
from kubetune.kube import Kube, Resource


def create_if_absent(kube: Kube, resource: Resource, body: dict[str, Any]) -> bool:
    """Create `body` unless an object of its name exists; whether this call created it (so the
    caller removes only what it made)."""
    if kube.get_or_none(resource, body["metadata"]["name"]) is not None:
        return False
    with contextlib.suppress(errors.AlreadyExists):
        kube.create(resource, body)
        return True
    return False
