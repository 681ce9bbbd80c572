"""List+watch of one resource, keeping a local cache and telling a handler about every change.

The informer lists (in pages), then watches from the list's resourceVersion with bookmarks so a
quiet watch still advances its resourceVersion. When the server answers 410 Gone (the version was
compacted away) it relists and reports the differences as events, so nothing is missed. Other
errors restart the watch after a short, growing pause. A periodic resync (every 10 hours by
default) hands every cached object to the handler again, which is how level-based controllers
heal missed side effects.

Cached objects are frozen (`kubetune.runtime.frozen`) as they arrive: the handler, `get`,
`select` and `objects` hand out the shared objects themselves, and a write into one raises
instead of silently changing what every other reader sees. They are cached without
`metadata.managedFields` (`cached_form`), as controller-runtime's managed-fields transform
does: no controller here reads them, they are often half of an object, and freezing them was
a fifth of the trial-controller's CPU. A write of a thawed copy without them keeps the server's
(an update that omits managedFields leaves them as they are).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import Counter

from kubetune import errors
from kubetune.kube import Kube, Obj, ObjectHook, Resource
from kubetune.runtime.frozen import freeze_object

log = logging.getLogger(__name__)

WATCH_RESTARTS = Counter(
    "kubetune_watch_restarts_total", "Watch restarts by resource and cause", ["resource", "cause"]
)

ADDED, MODIFIED, DELETED, RESYNC = "ADDED", "MODIFIED", "DELETED", "RESYNC"


@dataclass(frozen=True)
class Event:
    """A change of one object. `old` is the cached object it replaces (None for ADDED and
    for a watch's DELETED, the object itself for RESYNC): what an update filter compares."""

    type: str
    object: Obj
    old: Obj | None = None


Handler = Callable[[Event], None]

RESYNC_PERIOD = 10 * 60 * 60.0
"""Seconds between resyncs: a safety net for missed side effects, not a way to poll."""

PAGE_BYTES = 4 * 1024 * 1024
"""The JSON a list page should hold: small objects still come 500 a page."""
FIRST_PAGE = 50
"""The first page's limit, before the objects' size is known."""


def without_managed_fields(obj: Obj) -> Obj:
    """`obj` without `metadata.managedFields` (a shallow copy; `obj` itself when it has none)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def next_limit(count: int, page_bytes: int, most: int, budget: int) -> int:
    """The next page's limit: as many objects as fit `budget` at the average size of the
    last page's `count` objects, between 1 and `most`."""
    if page_bytes <= 0:
        return most
    return max(1, min(most, count * budget // page_bytes))


def object_key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Informer:
    """Runs list+watch for one resource in a thread; `cache` holds the latest objects."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        handler: Handler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float = RESYNC_PERIOD,
        watch_timeout: int = 300,
        resume_from: str | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        object_hook: ObjectHook | None = None,
        page_size: int = 500,
        page_bytes: int = PAGE_BYTES,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        # e.g. `reason=FailedCreate`: the server filters, so a busy cluster's Events cost nothing.
        self.field_selector = field_selector
        self.resync_period = resync_period
        self.watch_timeout = watch_timeout
        # Applied to every object before it is cached and handed on: a controller that needs a
        # few fields of many objects (10,000 Trials) keeps only those in memory.
        self.transform = transform
        # Applied while each list page and watch event is parsed (see kube.ObjectHook): a field
        # no reader needs (a Trial's 64 KiB metric history) is dropped before the next object
        # is parsed, so a page never exists whole in memory with it.
        self.object_hook = object_hook
        # List pages hold at most `page_size` objects and, once the objects' size is known,
        # about `page_bytes` of JSON: 500 Trials with full histories are 35 MiB of text.
        self.page_size = page_size
        self.page_bytes = page_bytes
        self.cache: dict[tuple[str, str], Obj] = {}
        # The cache again by namespace and by (namespace, label, value): `select` then costs
        # the objects asked for, not all of them (one Experiment's Trials among 100,000).
        self._by_namespace: dict[str, dict[tuple[str, str], Obj]] = {}
        self._by_label: dict[tuple[str, str, str], dict[tuple[str, str], Obj]] = {}
        self.synced = threading.Event()
        # A known resourceVersion lets a restarted informer watch on without a first list.
        self.resource_version: str | None = resume_from
        self._lock = threading.Lock()

    def _emit(self, event: Event) -> None:
        try:
            self.handler(event)
        except Exception:
            log.exception("event handler failed for %s", self.resource.plural)

    def relist(self) -> None:
        """Replace the cache with a fresh list and emit what changed against the old cache."""
        items: list[Obj] = []
        token: str | None = None
        limit = max(1, min(self.page_size, FIRST_PAGE))
        while True:
            sizes: list[int] = []
            page = self.kube.list(
                self.resource,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=limit,
                continue_token=token,
                object_hook=self.object_hook,
                sizes=sizes,
            )
            page_items = page.get("items") or []
            count = len(page_items)
            items.extend(self._cached_form(item) for item in page_items)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
            if count and sizes:
                limit = next_limit(count, sizes[0], self.page_size, self.page_bytes)
        fresh = {object_key(item): item for item in items}
        with self._lock:
            old = self.cache
            self.cache = fresh
            self._by_namespace, self._by_label = {}, {}
            for key, item in fresh.items():
                self._index(key, item)
            self.resource_version = (page.get("metadata") or {}).get("resourceVersion")
        for key, item in fresh.items():
            before = old.get(key)
            if before is None:
                self._emit(Event(ADDED, item))
            elif _rv(before) != _rv(item):
                self._emit(Event(MODIFIED, item, before))
        for key, item in old.items():
            if key not in fresh:
                self._emit(Event(DELETED, item))
        self.synced.set()

    def _apply(self, event: Obj) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code", 0)
            raise errors.from_status(int(code), obj.get("reason", ""), obj.get("message", ""))
        rv = _rv(obj)
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        obj = self._cached_form(obj)
        key = object_key(obj)
        with self._lock:
            before = self.cache.pop(key, None)
            if before is not None:
                self._unindex(key, before)
            if kind != DELETED:
                self.cache[key] = obj
                self._index(key, obj)
            self.resource_version = rv or self.resource_version
        self._emit(Event(str(kind), obj, before if kind == MODIFIED else None))

    def _cached_form(self, obj: Obj) -> Obj:
        """The object as the cache keeps it: without managedFields, transformed, frozen."""
        obj = without_managed_fields(obj)
        if self.transform is not None:
            obj = self.transform(obj)
        return freeze_object(obj)

    def _index(self, key: tuple[str, str], obj: Obj) -> None:
        namespace = key[0]
        self._by_namespace.setdefault(namespace, {})[key] = obj
        for label, value in ((obj.get("metadata") or {}).get("labels") or {}).items():
            self._by_label.setdefault((namespace, label, str(value)), {})[key] = obj

    def _unindex(self, key: tuple[str, str], obj: Obj) -> None:
        namespace = key[0]
        bucket = self._by_namespace.get(namespace)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del self._by_namespace[namespace]
        for label, value in ((obj.get("metadata") or {}).get("labels") or {}).items():
            index_key = (namespace, label, str(value))
            bucket = self._by_label.get(index_key)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._by_label[index_key]

    def select(self, namespace: str | None, labels: Mapping[str, str]) -> list[Obj]:
        """The cached objects in `namespace` (None = all) carrying every label of `labels`;
        in a namespace, from the smallest matching index bucket."""
        with self._lock:
            if namespace is None:
                candidates: Iterable[Obj] = list(self.cache.values())
            else:
                buckets = [self._by_namespace.get(namespace) or {}]
                buckets += [self._by_label.get((namespace, k, v)) or {} for k, v in labels.items()]
                candidates = list(min(buckets, key=len).values())
        return [obj for obj in candidates if _matches(obj, namespace, labels)]

    def get(self, namespace: str, name: str) -> Obj | None:
        """The cached object, None when absent (or not listed yet: check `synced`)."""
        with self._lock:
            return self.cache.get((namespace, name))

    def objects(self) -> list[Obj]:
        """A consistent copy of the cached objects (safe while the watch thread updates it)."""
        with self._lock:
            return list(self.cache.values())

    def resync(self) -> None:
        with self._lock:
            objects = list(self.cache.values())
        for obj in objects:
            self._emit(Event(RESYNC, obj, obj))

    def run(self, stop: threading.Event) -> None:
        """Loop until `stop` is set: relist when needed, watch, resync on schedule."""
        pause = 0.2
        need_list = self.resource_version is None
        next_resync = time.monotonic() + self.resync_period
        while not stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                for event in self.kube.watch(
                    self.resource,
                    self.namespace,
                    resource_version=self.resource_version,
                    timeout_seconds=self.watch_timeout,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    object_hook=self.object_hook,
                ):
                    self._apply(event)
                    if stop.is_set():
                        return
                    if time.monotonic() >= next_resync:
                        self.resync()
                        next_resync = time.monotonic() + self.resync_period
                pause = 0.2
            except errors.Gone:
                WATCH_RESTARTS.labels(self.resource.plural, "gone").inc()
                log.info("watch of %s expired (410 Gone); relisting", self.resource.plural)
                need_list = True
            except Exception as e:  # noqa: BLE001 - any failure restarts the watch
                WATCH_RESTARTS.labels(self.resource.plural, "error").inc()
                log.warning(
                    "watch of %s failed: %s; retrying in %.1fs", self.resource.plural, e, pause
                )
                stop.wait(pause)
                pause = min(pause * 2, 10.0)
            if time.monotonic() >= next_resync:
                self.resync()
                next_resync = time.monotonic() + self.resync_period

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(
            target=self.run, args=(stop,), name=f"watch-{self.resource.plural}", daemon=True
        )
        thread.start()
        return thread


def _rv(obj: Obj) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv is not None else None


def _matches(obj: Obj, namespace: str | None, labels: Mapping[str, str]) -> bool:
    meta = obj.get("metadata") or {}
    if namespace is not None and (meta.get("namespace") or "") != namespace:
        return False
    have = meta.get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())
