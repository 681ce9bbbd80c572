"""The reconcile loop: informers feed keys into the work queue, workers call `reconcile(key)`.

A reconcile receives only a key and reads what it needs (level-based). Its outcome is turned into
a queue action in one place (`_handle`): a `Result` with `requeue_after` comes back after that
delay, `TemporaryError` after its delay, `TerminalError` is logged and dropped until the object
changes, any other exception retries with per-key exponential backoff, and a plain success
forgets the key's backoff. Panics never kill a worker.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram

from kubetune import errors
from kubetune.kube import Kube, Obj, Resource
from kubetune.runtime.queue import WorkQueue
from kubetune.runtime.watching import Event, Informer, object_key

log = logging.getLogger(__name__)

RECONCILES = Counter(
    "kubetune_reconcile_total", "Reconciles by controller and outcome", ["controller", "outcome"]
)
RECONCILE_SECONDS = Histogram(
    "kubetune_reconcile_duration_seconds", "Time spent in one reconcile", ["controller"]
)
QUEUE_DEPTH = Gauge("kubetune_workqueue_depth", "Keys waiting in the work queue", ["controller"])


@dataclass(frozen=True, order=True)
class Key:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Result:
    """What a reconcile wants next: nothing (None) or another pass after `requeue_after` s."""

    requeue_after: float | None = None

    @staticmethod
    def done() -> Result:
        return Result()

    @staticmethod
    def after(seconds: float) -> Result:
        return Result(seconds)


Reconcile = Callable[[Key], Result | None]
Mapper = Callable[[Obj], Iterable[Key]]


def own_key(obj: Obj) -> list[Key]:
    namespace, name = object_key(obj)
    return [Key(namespace, name)]


def owner_keys(kind: str, api_version: str) -> Mapper:
    """Map an object to its owners of one kind (e.g. a Job to its Trial)."""

    def keys(obj: Obj) -> list[Key]:
        meta = obj.get("metadata") or {}
        return [
            Key(meta.get("namespace") or "", ref["name"])
            for ref in meta.get("ownerReferences") or []
            if ref.get("kind") == kind and ref.get("apiVersion") == api_version
        ]

    return keys


@dataclass
class Watch:
    resource: Resource
    mapper: Mapper
    namespace: str | None = None
    label_selector: str | None = None
    transform: Callable[[Obj], Obj] | None = None


@dataclass
class Controller:
    """One reconciler, the resources it watches and the workers that drive it."""

    name: str
    reconcile: Reconcile
    workers: int = 2
    resync_period: float = 300.0
    watches: list[Watch] = field(default_factory=list)
    queue: WorkQueue = field(default_factory=WorkQueue)
    informers: list[Informer] = field(default_factory=list)

    def watch(
        self,
        resource: Resource,
        mapper: Mapper = own_key,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        """Watch `resource`; `transform` slims objects before they are cached (see Informer)."""
        self.watches.append(Watch(resource, mapper, namespace, label_selector, transform))

    def _enqueue(self, mapper: Mapper) -> Callable[[Event], None]:
        def handler(event: Event) -> None:
            for key in mapper(event.object):
                self.queue.add(key)
            QUEUE_DEPTH.labels(self.name).set(len(self.queue))

        return handler

    def start_informers(self, kube: Kube, stop: threading.Event) -> None:
        for w in self.watches:
            informer = Informer(
                kube,
                w.resource,
                self._enqueue(w.mapper),
                namespace=w.namespace,
                label_selector=w.label_selector,
                resync_period=self.resync_period,
                transform=w.transform,
            )
            self.informers.append(informer)
            informer.start(stop)

    def informer_for(self, resource: Resource) -> Informer | None:
        """The running informer of a watched resource (None before `start_informers`)."""
        for informer in self.informers:
            if informer.resource == resource:
                return informer
        return None

    def synced(self) -> bool:
        return bool(self.informers) and all(i.synced.is_set() for i in self.informers)

    def _handle(self, key: Key) -> None:
        reconcile_id = uuid.uuid4().hex[:8]
        started = time.monotonic()
        outcome = "success"
        try:
            result = self.reconcile(key)
        except errors.TemporaryError as e:
            outcome = "requeue"
            log.info("reconcile %s [%s]: %s; again in %.1fs", key, reconcile_id, e, e.delay)
            self.queue.add_after(key, e.delay)
        except errors.TerminalError as e:
            outcome = "terminal"
            log.error("reconcile %s [%s] gave up: %s", key, reconcile_id, e)
            self.queue.forget(key)
        except errors.Conflict as e:
            outcome = "conflict"
            log.info("reconcile %s [%s]: conflict (%s); re-reading", key, reconcile_id, e.reason)
            self.queue.add_rate_limited(key)
        except Exception:
            outcome = "error"
            delay = self.queue.add_rate_limited(key)
            log.exception("reconcile %s [%s] failed; retry in %.2fs", key, reconcile_id, delay)
        else:
            self.queue.forget(key)
            if result is not None and result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
        finally:
            RECONCILES.labels(self.name, outcome).inc()
            RECONCILE_SECONDS.labels(self.name).observe(time.monotonic() - started)

    def work(self, stop: threading.Event) -> None:
        """One worker: take keys until the queue shuts down."""
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                assert isinstance(key, Key)
                self._handle(key)
            finally:
                self.queue.done(key)
                QUEUE_DEPTH.labels(self.name).set(len(self.queue))

    def start_workers(self, stop: threading.Event) -> list[threading.Thread]:
        threads = []
        for index in range(self.workers):
            thread = threading.Thread(
                target=self.work, args=(stop,), name=f"{self.name}-worker-{index}", daemon=True
            )
            thread.start()
            threads.append(thread)
        return threads
