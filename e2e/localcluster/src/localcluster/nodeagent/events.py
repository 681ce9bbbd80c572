"""Core/v1 Events like the kubelet's (Created, Started, Killing, BackOff, Failed, ...).

Only for people and tools reading ``kubectl describe pod``/``get events``: nothing depends
on them, so they are posted from one background thread and failures are dropped.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import uuid
from typing import Any

from .kube import Kube
from .status import now_iso

log = logging.getLogger(__name__)
JSON = dict[str, Any]


class EventRecorder:
    """Queues events and posts them in the background."""

    def __init__(self, kube: Kube, node_name: str) -> None:
        self.kube = kube
        self.node_name = node_name
        self._q: queue.Queue[JSON | None] = queue.Queue(maxsize=1000)
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def pod_event(
        self,
        pod: JSON,
        etype: str,
        reason: str,
        message: str,
        container: str = "",
        init: bool = False,
    ) -> None:
        """Record an event about a pod (or one of its containers)."""
        meta = pod.get("metadata") or {}
        ref: JSON = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        }
        if container:
            kind = "initContainers" if init else "containers"
            ref["fieldPath"] = f"spec.{kind}{{{container}}}"
        now = now_iso()
        ev = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}",
                "namespace": meta.get("namespace"),
            },
            "involvedObject": ref,
            "type": etype,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": "kubelet", "host": self.node_name},
            "reportingComponent": "kubelet",
            "reportingInstance": self.node_name,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": None,
            "count": 1,
        }
        with contextlib.suppress(queue.Full):
            self._q.put_nowait(ev)

    def close(self) -> None:
        """Stop the poster thread (pending events are dropped after 2 s)."""
        self._q.put(None)
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while True:
            ev = self._q.get()
            if ev is None:
                return
            try:
                self.kube.post(f"/api/v1/namespaces/{ev['metadata']['namespace']}/events", ev)
            except Exception as exc:  # noqa: BLE001 - events are best effort
                log.debug("event dropped: %s", exc)
