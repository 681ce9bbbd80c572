"""The reconcile loop: informers feed keys into the work queue, workers call
`reconcile(ctx, key)`.

A reconcile receives a key and the pass's `Context` (client, cached reads, events, logger,
clock, status write) and reads what it needs (level-based). Its outcome is turned into a queue
action in one place (`_handle`): a `Result` with `requeue_after` comes back after that delay,
`requeue` at once, `TemporaryError` after its delay, `TerminalError` is logged and dropped until
the object changes, a `Conflict` (a stale write) and any other exception retry with per-key
exponential backoff, a create refused because the namespace is being deleted ends the key
quietly, and a plain success forgets the key's backoff. Panics never kill a worker.
Informers are started with the process, or on demand by a reconcile (`Context.read`).
A watch may carry a `Predicate` on (old, new): an update or resync it rejects enqueues
nothing, so a change no reconcile would act on (a Trial's interim metric report, seen by its
Experiment) costs no pass. Creations and deletions always enqueue.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import Counter, Histogram

from kubetune import errors
from kubetune.clock import SYSTEM, Clock
from kubetune.kube import Kube, Obj, ObjectHook, Resource
from kubetune.runtime.context import (
    Context,
    Key,
    Mapper,
    NotStarted,
    OnDemand,
    Reconcile,
    reconcile_log,
)
from kubetune.runtime.queue import WorkQueue
from kubetune.runtime.watching import DELETED, RESYNC_PERIOD, Event, Informer, object_key

RECONCILES = Counter(
    "kubetune_reconcile_total", "Reconciles by controller and outcome", ["controller", "outcome"]
)
RECONCILE_SECONDS = Histogram(
    "kubetune_reconcile_duration_seconds", "Time spent in one reconcile", ["controller"]
)
EVENTS_FILTERED = Counter(
    "kubetune_watch_events_filtered_total",
    "Updates and resyncs a watch's predicate kept out of the work queue",
    ["controller", "resource"],
)

Predicate = Callable[[Obj, Obj], bool]
"""Whether an update of a watched object from `old` to `new` (both as cached, so after the
watch's `transform`) matters to the reconciles: False enqueues nothing. A resync passes the
object as both."""


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
    field_selector: str | None = None
    transform: Callable[[Obj], Obj] | None = None
    object_hook: ObjectHook | None = None
    predicate: Predicate | None = None


@dataclass
class Controller:
    """One reconciler, the resources it watches and the workers that drive it.

    `namespace` is where on-demand watches look (None = all); `component` names the Events
    the reconciles record (default: `name`); `clock` is the passes' clock.
    """

    name: str
    reconcile: Reconcile
    workers: int = 2
    resync_period: float = RESYNC_PERIOD
    namespace: str | None = None
    component: str = ""
    clock: Clock = SYSTEM
    watches: list[Watch] = field(default_factory=list)
    queue: WorkQueue = field(default_factory=WorkQueue)
    informers: list[Informer] = field(default_factory=list)
    kube: Kube | None = None
    on_demand: dict[Resource, Informer] = field(default_factory=dict)
    _stop: threading.Event | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.queue.name:
            self.queue.name = self.name  # the queue's metrics carry the controller's name

    def watch(
        self,
        resource: Resource,
        mapper: Mapper = own_key,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        object_hook: ObjectHook | None = None,
        predicate: Predicate | None = None,
    ) -> None:
        """Watch `resource` from the start; `transform` slims objects before they are cached,
        `object_hook` while they are parsed (see Informer); `predicate` filters updates and
        resyncs (creations and deletions always pass). One resource may be watched several
        times (other selectors)."""
        self.watches.append(
            Watch(
                resource,
                mapper,
                namespace,
                label_selector,
                field_selector,
                transform,
                object_hook,
                predicate,
            )
        )

    def _enqueue(
        self, mapper: Mapper, predicate: Predicate | None = None, resource: str = ""
    ) -> Callable[[Event], None]:
        def handler(event: Event) -> None:
            if (
                predicate is not None
                and event.old is not None
                and event.type != DELETED
                and not predicate(event.old, event.object)
            ):
                EVENTS_FILTERED.labels(self.name, resource).inc()
                return
            for key in mapper(event.object):
                self.queue.add(key)

        return handler

    def start_informers(self, kube: Kube, stop: threading.Event) -> None:
        """Start the watches; `kube` is also the client of every reconcile's context."""
        self.kube, self._stop = kube, stop
        for w in self.watches:
            informer = Informer(
                kube,
                w.resource,
                self._enqueue(w.mapper, w.predicate, w.resource.plural),
                namespace=w.namespace,
                label_selector=w.label_selector,
                field_selector=w.field_selector,
                resync_period=self.resync_period,
                transform=w.transform,
                object_hook=w.object_hook,
            )
            self.informers.append(informer)
            informer.start(stop)

    def ensure_watch(self, resource: Resource, how: OnDemand) -> Informer:
        """The on-demand informer of `resource`, started now if this is the first call.

        Why: some resources are known only from the objects (a Trial's job may be any allowed
        kind); watching one from its first use means a CRD installed later needs no restart.
        """
        with self._lock:
            informer = self.on_demand.get(resource)
            if informer is not None:
                return informer
            if self.kube is None or self._stop is None:
                raise NotStarted(f"controller {self.name} has not been started")
            informer = Informer(
                self.kube,
                resource,
                self._enqueue(how.mapper),
                namespace=self.namespace,
                label_selector=how.label_selector,
                resync_period=self.resync_period,
            )
            self.on_demand[resource] = informer
            informer.start(self._stop)
            return informer

    def informers_of(self, resource: Resource) -> list[Informer]:
        """The running informers of `resource` (none before `start_informers`)."""
        with self._lock:
            extra = self.on_demand.get(resource)
        found = [i for i in self.informers if i.resource == resource]
        return [*found, extra] if extra is not None else found

    def synced(self) -> bool:
        return bool(self.informers) and all(i.synced.is_set() for i in self.informers)

    def context(self, key: Key) -> Context:
        """A new pass's context: its own reconcile id, and a logger that carries it."""
        reconcile_id = uuid.uuid4().hex[:8]
        return Context(self, key, reconcile_id, reconcile_log(self.log, key, reconcile_id))

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"kubetune.{self.name}")

    def _retry_failed(self, ctx: Context, key: Key) -> str:
        """An unexpected failure (called while handling it): log it and retry with backoff."""
        delay = self.queue.add_rate_limited(key)
        ctx.log.exception("failed; retry in %.2fs", delay)
        return "error"

    def _handle(self, key: Key) -> None:
        ctx = self.context(key)
        started = time.monotonic()
        outcome = "success"
        try:
            result = self.reconcile(ctx, key)
        except errors.TemporaryError as e:
            outcome = "requeue"
            ctx.log.info("%s; again in %.1fs", e, e.delay)
            self.queue.add_after(key, e.delay)
        except errors.TerminalError as e:
            outcome = "terminal"
            ctx.log.error("gave up: %s", e)
            self.queue.forget(key)
        except errors.Conflict as e:
            outcome = "conflict"
            ctx.log.info("conflict (%s); re-reading", e.reason)
            self.queue.add_rate_limited(key)
        except errors.Forbidden as e:
            if errors.is_namespace_terminating(e):
                # A namespace being deleted takes this object with it: stop, quietly.
                outcome = "namespace-terminating"
                ctx.log.info("namespace %s is being deleted; nothing to do", key.namespace)
                self.queue.forget(key)
            else:
                outcome = self._retry_failed(ctx, key)
        except Exception:  # noqa: BLE001 - logged with its traceback by _retry_failed
            outcome = self._retry_failed(ctx, key)
        else:
            self.queue.forget(key)
            if result is None:
                pass
            elif result.requeue:
                self.queue.add(key)
            elif result.requeue_after is not None:
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

    def start_workers(self, stop: threading.Event) -> list[threading.Thread]:
        threads = []
        for index in range(self.workers):
            thread = threading.Thread(
                target=self.work, args=(stop,), name=f"{self.name}-worker-{index}", daemon=True
            )
            thread.start()
            threads.append(thread)
        return threads
