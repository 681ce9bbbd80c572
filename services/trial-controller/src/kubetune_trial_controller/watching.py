"""A `kubetune.runtime.Controller` that can start informers after it started: one per job kind,
the first time a Trial needs that kind.

Why: which kinds Trials use is known only from the Trials (any custom resource on the
allow-list), and upstream's "watch every listed kind at start, skip missing CRDs, restart to
pick up new ones" makes a CRD installed later invisible. Here a kind is watched from the first
Trial that uses it, so installing a CRD later needs no restart. Job informers are limited to the
objects this controller labelled (`katib.kubeflow.org/trial`), so a cluster full of unrelated
batch Jobs costs nothing. Neighbours: `reconciling` calls `ensure_watch` and reads the caches.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kubetune.kube import EVENTS, Kube, Obj, Resource
from kubetune.runtime import Controller
from kubetune.runtime.controlling import Mapper
from kubetune.runtime.watching import Informer


class NotStarted(RuntimeError):
    """The controller's informers have not been started yet (no client, no stop event)."""


@dataclass
class DynamicController(Controller):
    """A Controller whose extra informers are started on demand by `ensure_watch`."""

    started_with: tuple[Kube, threading.Event] | None = None
    dynamic: dict[Resource, Informer] = field(default_factory=dict)
    watch_namespace: str | None = None
    # Events of refused pods (`refusals`): one informer per reason, filtered by the server.
    event_reasons: tuple[str, ...] = ()
    event_mapper: Mapper | None = None
    event_informers: list[Informer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start_informers(self, kube: Kube, stop: threading.Event) -> None:
        self.started_with = (kube, stop)
        super().start_informers(kube, stop)
        if self.event_mapper is None:
            return
        for reason in self.event_reasons:
            informer = Informer(
                kube,
                EVENTS,
                self._enqueue(self.event_mapper),
                namespace=self.watch_namespace,
                field_selector=f"reason={reason}",
                resync_period=self.resync_period,
            )
            self.event_informers.append(informer)
            informer.start(stop)

    def events(self) -> list[Obj]:
        """The cached refusal Events (empty until the informers synced)."""
        return [e for informer in self.event_informers for e in informer.objects()]

    @property
    def kube(self) -> Kube:
        if self.started_with is None:
            raise NotStarted("controller not started")
        return self.started_with[0]

    def ensure_watch(
        self, resource: Resource, mapper: Mapper, *, label_selector: str | None = None
    ) -> Informer:
        """The informer of `resource`, started now if this is the first call for it."""
        with self._lock:
            informer = self.dynamic.get(resource)
            if informer is not None:
                return informer
            if self.started_with is None:
                raise NotStarted("controller not started")
            kube, stop = self.started_with
            informer = Informer(
                kube,
                resource,
                self._enqueue(mapper),
                namespace=self.watch_namespace,
                label_selector=label_selector,
                resync_period=self.resync_period,
            )
            self.dynamic[resource] = informer
            informer.start(stop)
            return informer

    def primary_cache(self) -> Informer | None:
        """The informer of the first `watch()`ed resource (the Trials), once started."""
        return self.informers[0] if self.informers else None


def cached(informer: Informer | None, namespace: str, name: str) -> tuple[bool, Obj | None]:
    """(known, object): `known` is False while the informer has not synced, so the caller
    must ask the API server; an absent object in a synced cache may still be lag, too."""
    if informer is None or not informer.synced.is_set():
        return False, None
    return True, informer.cache.get((namespace, name))
