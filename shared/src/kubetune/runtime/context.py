"""What one reconcile gets from the runtime: the edges of a pass, owned in one place.

Why: every controller needs the same few things around its decisions: a client, reads that
cost nothing when a cache can answer, Events that show once per cause, a logger that says
which pass and which object a line belongs to, a clock, and a status write that is skipped
when nothing changed and never overwrites someone else's newer write. Each reconciler used to
wire these itself (and reach back into its controller for the caches); here the runtime hands
them over with each key, so a reconciler is just `reconcile(ctx, key) -> Result`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubetune import errors, events
from kubetune.clock import Clock
from kubetune.kube import Kube, Obj, Resource

if TYPE_CHECKING:
    from kubetune.runtime.controlling import Controller

UNSYNCED_RETRY = 0.2
"""Seconds before a pass that needed an unsynced cache's full list runs again."""


@dataclass(frozen=True, order=True)
class Key:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Result:
    """What a reconcile wants next: nothing, another pass now (`requeue`), or one after
    `requeue_after` seconds."""

    requeue: bool = False
    requeue_after: float | None = None

    @staticmethod
    def done() -> Result:
        return Result()

    @staticmethod
    def again() -> Result:
        return Result(requeue=True)

    @staticmethod
    def after(seconds: float) -> Result:
        return Result(requeue_after=seconds)


Mapper = Callable[[Obj], Iterable[Key]]


class NotStarted(RuntimeError):
    """The controller has no client yet: its informers were not started."""


@dataclass(frozen=True)
class OnDemand:
    """How to watch a resource the first time a reconcile reads it (see `Context.read`)."""

    mapper: Mapper
    label_selector: str | None = None


class ReconcileLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Prefixes every line with the object and the reconcile id and adds both as fields (the
    JSON log format shows them as `reconcile_id`, `namespace`, `object_name`)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        extra = dict(self.extra or {})
        kwargs["extra"] = {**extra, **(kwargs.get("extra") or {})}
        return f"{extra['key']} [{extra['reconcile_id']}]: {msg}", kwargs


def reconcile_log(logger: logging.Logger, key: Key, reconcile_id: str) -> ReconcileLog:
    fields = {
        "key": str(key),
        "reconcile_id": reconcile_id,
        "namespace": key.namespace,
        "object_name": key.name,
    }
    return ReconcileLog(logger, fields)


def status_changes(stored: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `new` whose value differs from `stored` (None = remove; absent = keep)."""
    return {k: v for k, v in new.items() if stored.get(k) != v}


@dataclass
class Context:
    """The edges of one reconcile of `key`; made by the runtime for each pass."""

    controller: Controller
    key: Key
    reconcile_id: str
    log: ReconcileLog

    @property
    def kube(self) -> Kube:
        kube = self.controller.kube
        if kube is None:
            raise NotStarted(f"controller {self.controller.name} has not been started")
        return kube

    @property
    def clock(self) -> Clock:
        return self.controller.clock

    # --- reading ------------------------------------------------------------------------------

    def read(
        self,
        resource: Resource,
        key: Key,
        *,
        watch: OnDemand | None = None,
        fresh: bool = False,
        trust_absent: bool = False,
    ) -> Obj | None:
        """The object, None when it does not exist; read-only when it comes from a cache
        (`kubetune.runtime.thaw` gives a copy to change), the caller's own when fetched.

        Served from the cache of a watched resource (`watch` starts one the first time); a GET
        answers when no synced cache has it, since a cache may lag behind this controller's own
        create. `fresh` always asks the API server (for an object about to be status-written:
        a stale copy would only conflict); `trust_absent` takes a synced cache's miss as
        absent (for reads where acting on a stale "absent" is harmless and idempotent).
        """
        if not fresh:
            informers = self.controller.informers_of(resource)
            if watch is not None and not informers:
                informers = [self.controller.ensure_watch(resource, watch)]
            synced = [i for i in informers if i.synced.is_set()]
            for informer in synced:
                obj = informer.get(key.namespace, key.name)
                if obj is not None:
                    return obj
            if synced and trust_absent:
                return None
        return self.kube.get_or_none(resource, key.name, key.namespace or None)

    def list(
        self, resource: Resource, namespace: str | None = None, labels: Mapping[str, str] = {}
    ) -> list[Obj]:
        """The cached objects of a watched resource in `namespace` (None = all) carrying
        `labels`: the caches, never a list request (10,000 Trials each pass would be costly).
        The objects are the cache's own, read-only.

        Raises:
            LookupError: the controller does not watch `resource` (a wiring bug).
            errors.TemporaryError: a cache has not synced yet (the pass runs again shortly).
        """
        informers = self.controller.informers_of(resource)
        if not informers:
            raise LookupError(f"controller {self.controller.name} does not watch {resource}")
        if not all(i.synced.is_set() for i in informers):
            raise errors.TemporaryError(f"cache of {resource.plural} not synced", UNSYNCED_RETRY)
        return [obj for informer in informers for obj in informer.select(namespace, labels)]

    # --- writing ------------------------------------------------------------------------------

    def write_status(
        self,
        resource: Resource,
        obj: Obj,
        new: Mapping[str, Any],
        *,
        stored: Mapping[str, Any] | None = None,
    ) -> bool:
        """Patch the status fields of `new` that differ from the stored ones (`stored`, else
        `obj`'s status) on the status subresource, guarded by `obj`'s resourceVersion; a field
        set to None is removed, one not in `new` is left alone (another writer may own it).
        True when it wrote.

        Raises:
            errors.Conflict: `obj` is stale (someone wrote meanwhile); the runtime requeues
                the key, and the next pass reads again and decides again.
        """
        return self.patch_status(resource, obj, new, stored=stored) is not None

    def patch_status(
        self,
        resource: Resource,
        obj: Obj,
        new: Mapping[str, Any],
        *,
        stored: Mapping[str, Any] | None = None,
    ) -> Obj | None:
        """`write_status`, answering with the object as written (None: nothing changed), for
        a caller that keeps it (`kubetune.runtime.ownwrites`)."""
        changes = status_changes(stored if stored is not None else obj.get("status") or {}, new)
        if not changes:
            return None
        meta = obj["metadata"]
        written: Obj = self.kube.patch(
            resource,
            meta["name"],
            {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": changes},
            meta.get("namespace"),
            subresource="status",
        )
        return written

    def record(
        self,
        resource: Resource,
        involved: Obj,
        *,
        type_: str,
        reason: str,
        message: str,
        cause: str | None = None,
    ) -> bool:
        """A core/v1 Event on `involved`, once per cause (`kubetune.events.record`)."""
        return events.record(
            self.kube,
            resource,
            involved,
            type_=type_,
            reason=reason,
            message=message,
            component=self.controller.component or self.controller.name,
            cause=cause,
            clock=self.clock,
        )


Reconcile = Callable[[Context, Key], Result | None]
"""A reconcile of one key: None means done (for one that never asks for another pass)."""
