"""Katib's finalizers on the objects kubetune takes over, which only Katib's controller removes.

Katib's controller adds `update-prometheus-metrics` to every Experiment and `clean-metrics-in-db`
to every Trial, and removes them when the object is deleted (after updating its gauges, after
deleting the Trial's rows in its database). Once Katib's controller is gone nobody removes them,
and deleting such an Experiment or Trial hangs for ever. kubetune keeps no such gauges and no
database, so after the take-over they guard nothing: `kubetune katib-check --release-finalizers`
removes them (Katib's controller adds them again if it ever comes back).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kubetune import errors
from kubetune.kube import EXPERIMENTS, TRIALS, Kube, Obj, Resource
from kubetune_cli.reading import UserError

KATIB_FINALIZERS = {
    EXPERIMENTS.kind: "update-prometheus-metrics",
    TRIALS.kind: "clean-metrics-in-db",
}


@dataclass(frozen=True)
class Held:
    """An object holding a Katib finalizer."""

    resource: Resource
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.resource.kind} {self.namespace}/{self.name}"


def held(kube: Kube, namespace: str | None) -> Iterator[Held]:
    """Experiments and Trials carrying Katib's finalizer, a page at a time."""
    for res in (EXPERIMENTS, TRIALS):
        finalizer = KATIB_FINALIZERS[res.kind]
        for page in kube.pages(res, namespace):
            for obj in page:
                meta = obj["metadata"]
                if finalizer in (meta.get("finalizers") or []):
                    yield Held(res, meta["namespace"], meta["name"])


def _without(obj: Obj, finalizer: str) -> dict[str, object]:
    """The merge patch that drops `finalizer`, guarded by the resourceVersion read."""
    meta = obj["metadata"]
    kept = [f for f in meta.get("finalizers") or [] if f != finalizer]
    return {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": kept or None}}


def release(kube: Kube, item: Held, attempts: int = 5) -> bool:
    """Remove Katib's finalizer from one object; False when it is gone already. A Conflict
    (someone wrote meanwhile) reads again, so another finalizer is never dropped."""
    finalizer = KATIB_FINALIZERS[item.resource.kind]
    for _ in range(attempts):
        obj = kube.get_or_none(item.resource, item.name, item.namespace)
        if obj is None or finalizer not in (obj["metadata"].get("finalizers") or []):
            return False
        try:
            kube.patch(item.resource, item.name, _without(obj, finalizer), item.namespace)
            return True
        except errors.Conflict:
            continue
        except errors.NotFound:
            return False
    raise UserError(f"{item} kept changing while its finalizer {finalizer} was removed: retry")
