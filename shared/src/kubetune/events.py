"""core/v1 Events on kubetune's objects, recorded once per cause.

Why: a cause that repeats every pass (an object too large, a template that cannot render) must
show once on the object, not as a new Event each reconcile. The Event's name is derived from
the object and a digest of the cause, so a second create is AlreadyExists and nothing more.
A failed create is logged and never fails the caller: an Event is a hint, not state.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from typing import Any

from kubetune import errors, naming
from kubetune.clock import SYSTEM, Clock, rfc3339
from kubetune.kube import EVENTS, Kube, Resource

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 1024


def event_name(involved: dict[str, Any], cause: str) -> str:
    """`<object name>.<digest of the cause>`, shortened to a valid object name."""
    digest = hashlib.sha256(cause.encode()).hexdigest()[:12]
    return naming.shorten(f"{involved['metadata']['name']}.{digest}", naming.NAME_LIMIT)


def record(
    kube: Kube,
    resource: Resource,
    involved: dict[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
    cause: str | None = None,
    clock: Clock = SYSTEM,
) -> bool:
    """Create the Event on `involved` (an object of `resource`) unless one for the same cause
    (default: reason and message) exists. True when it exists now."""
    meta = involved["metadata"]
    now = rfc3339(clock.now())
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(involved, cause or f"{reason}/{message}"),
            "namespace": meta["namespace"],
        },
        "involvedObject": {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "type": type_,
        "source": {"component": component},
        "reportingComponent": f"kubetune-{component}",
        "reportingInstance": socket.gethostname(),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        kube.create(EVENTS, body, meta["namespace"])
    except errors.AlreadyExists:
        pass
    except errors.ApiError as e:
        log.warning("event %s not recorded: %s", reason, e)
        return False
    return True
