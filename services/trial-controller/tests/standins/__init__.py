"""Stand-ins for third-party job operators (TFJob's training operator, Argo Workflows), for tests.

They model only what the real operators show to pods and to the job's status (each module's
docstring says what), run in the test process on kubetune's own runtime, and are named as
stand-ins so nobody mistakes them for the real thing. The real CRDs come from the operators'
Go modules (`localcluster.thirdparty`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubetune.kube import Kube
from kubetune.runtime import Controller


@contextmanager
def running(controller: Controller, kube: Kube) -> Iterator[Controller]:
    """Run a stand-in's informers and workers until the block ends."""
    stop = threading.Event()
    controller.start_informers(kube, stop)
    threads = controller.start_workers(stop)
    try:
        yield controller
    finally:
        stop.set()
        controller.queue.shutdown()
        for thread in threads:
            thread.join(10)


def now() -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pod_phase_counts(pods: list[dict[str, Any]]) -> dict[str, int]:
    counts = {"active": 0, "succeeded": 0, "failed": 0}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Succeeded":
            counts["succeeded"] += 1
        elif phase == "Failed":
            counts["failed"] += 1
        else:
            counts["active"] += 1
    return counts
