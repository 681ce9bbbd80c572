"""Stand-ins: what other services and third-party operators would write, played by the test.

Named stand-ins so nobody mistakes them for the real thing. The operators' stand-ins
(`argo`, `tfjob`) model only what the real operators show to pods and to the job's status
(each module's docstring says what) and run in the test process on kubetune's own runtime;
`kubetune` stands in for kubetune's own services (the algorithm, the trial-controller and the
collector, the experiment-controller) so a test of one service decides exactly what the others
have written. The real CRDs come from the operators' Go modules (`localcluster.thirdparty`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubetune import errors
from kubetune.kube import PODS, Kube, Resource
from kubetune.runtime import Context, Controller, Key, owner_keys
from kubetune_testkit.builders import owner_reference


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
    """The wall clock as an RFC 3339 timestamp, as operators write their times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pod_phase_counts(pods: list[dict[str, Any]]) -> dict[str, int]:
    """active/succeeded/failed counts of pods, as in a job's replica status."""
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


class OperatorStandIn:
    """The frame of an operator's stand-in: a controller of its kind in one namespace, woken by
    the kind and by the pods it owns (those matching `pod_selector`)."""

    def __init__(
        self, name: str, kube: Kube, namespace: str, kind: Resource, pod_selector: str
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.controller = Controller(name, self.reconcile)
        self.controller.watch(kind, namespace=namespace)
        self.controller.watch(
            PODS, owner_keys(kind.kind, kind.api_version), namespace=namespace,
            label_selector=pod_selector,
        )  # fmt: skip

    def reconcile(self, ctx: Context, key: Key) -> None:
        raise NotImplementedError

    def live(self, resource: Resource, key: Key) -> dict[str, Any] | None:
        """The object of `key`, None when it is gone or being deleted (nothing to do)."""
        obj = self.kube.get_or_none(resource, key.name, key.namespace)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return None
        return obj

    @staticmethod
    def owned_pod(
        owner: dict[str, Any],
        name: str,
        labels: dict[str, str],
        annotations: dict[str, str],
        spec: dict[str, Any],
    ) -> dict[str, Any]:
        """A pod of `owner`'s namespace that `owner` controls."""
        metadata = {
            "name": name,
            "namespace": owner["metadata"]["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(owner)],
        }
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}

    def write_status(
        self, resource: Resource, obj: dict[str, Any], status: dict[str, Any], subresource: str
    ) -> None:
        """Patch `status` when it changed, guarded by the resourceVersion read."""
        if status == (obj.get("status") or {}):
            return
        meta = obj["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status}
        self.kube.patch(resource, meta["name"], patch, meta["namespace"], subresource=subresource)

    def create_pod(self, pod: dict[str, Any], namespace: str) -> dict[str, Any]:
        """Create the pod; the stored one when it exists already (a repeated reconcile)."""
        try:
            return self.kube.create(PODS, pod, namespace)
        except errors.AlreadyExists:
            return self.kube.get(PODS, pod["metadata"]["name"], namespace)
