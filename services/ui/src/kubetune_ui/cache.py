"""Experiments and Trials kept in memory by list + watch, and who to tell when one changes.

The UI never polls the API server: one watch per kind (all namespaces, or the one given),
relisted when the watch expires (410 Gone) or breaks. Each change is published to topics the
browser's event streams subscribe to: `experiments`, `experiment/<ns>/<name>` and
`trial/<ns>/<name>`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kubetune import naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube, Resource

Obj = dict[str, Any]
Key = tuple[str, str]
log = logging.getLogger("kubetune.ui")


class Subscriber:
    """One event stream: a flag raised when any of its topics changes (changes coalesce)."""

    def __init__(self, topics: frozenset[str]) -> None:
        self.topics = topics
        self.loop = asyncio.get_running_loop()
        self.changed = asyncio.Event()


class Hub:
    """Topic -> the streams subscribed to it; `publish` may be called from any thread.

    Every stream is fed from the same two watches: a change costs one dictionary look-up per
    topic and one wake-up per event loop, however many streams listen; a stream holds one
    flag, whatever its number of topics.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, set[Subscriber]] = defaultdict(set)

    def subscribe(self, topics: frozenset[str]) -> Subscriber:
        subscriber = Subscriber(topics)
        with self._lock:
            for topic in topics:
                self._subscribers[topic].add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            for topic in subscriber.topics:
                listeners = self._subscribers.get(topic)
                if listeners is not None:
                    listeners.discard(subscriber)
                    if not listeners:
                        del self._subscribers[topic]

    def count(self) -> int:
        """Topics with at least one subscriber (a gauge for tests and the bench)."""
        with self._lock:
            return len(self._subscribers)

    def publish(self, *topics: str) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, set[Subscriber]] = defaultdict(set)
        with self._lock:
            for topic in topics:
                for subscriber in self._subscribers.get(topic, ()):
                    by_loop[subscriber.loop].add(subscriber)
        for loop, subscribers in by_loop.items():
            loop.call_soon_threadsafe(_wake, subscribers)


def _wake(subscribers: set[Subscriber]) -> None:
    for subscriber in subscribers:
        subscriber.changed.set()


class Store:
    """One kind's objects by (namespace, name), fed by a list + watch thread."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        namespace: str | None,
        on_change: Callable[[str, Obj], None],
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.on_change = on_change
        self.objects: dict[Key, Obj] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self._stop = threading.Event()

    def get(self, namespace: str, name: str) -> Obj | None:
        with self.lock:
            return self.objects.get((namespace, name))

    def values(self) -> list[Obj]:
        with self.lock:
            return list(self.objects.values())

    def _put(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        meta.pop("managedFields", None)
        key = (meta.get("namespace", ""), meta.get("name", ""))
        with self.lock:
            if kind == "DELETED":
                self.objects.pop(key, None)
            else:
                self.objects[key] = obj
        self.on_change(kind, obj)

    def _relist(self) -> str:
        page = self.kube.list(self.resource, self.namespace)
        items = page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        while token:
            more = self.kube.list(self.resource, self.namespace, continue_token=token)
            items += more.get("items") or []
            token = (more.get("metadata") or {}).get("continue")
        fresh: dict[Key, Obj] = {}
        for item in items:
            meta = item.setdefault("metadata", {})
            meta.pop("managedFields", None)
            fresh[(meta.get("namespace", ""), meta.get("name", ""))] = item
        with self.lock:
            gone = [o for k, o in self.objects.items() if k not in fresh]
            self.objects = fresh
        for obj in gone:
            self.on_change("DELETED", obj)
        for obj in fresh.values():
            self.on_change("MODIFIED", obj)
        self.synced.set()
        return str((page.get("metadata") or {}).get("resourceVersion") or "")

    def run(self) -> None:
        """List, then watch from the list's resourceVersion; relist on 410 or any failure."""
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist()
                for event in self.kube.watch(
                    self.resource, self.namespace, resource_version=version, timeout_seconds=240
                ):
                    kind, obj = event.get("type", ""), event.get("object") or {}
                    if kind == "ERROR":
                        version = ""  # 410 Gone or another: start again from a list
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind != "BOOKMARK":
                        self._put(kind, obj)
                    if self._stop.is_set():
                        return
            except Exception as e:  # noqa: BLE001 - any failure (API error, broken connection,
                # bad JSON) must not end the thread: the UI would freeze on stale data.
                log.warning("watch of %s broke, listing again: %r", self.resource.plural, e)
                version = ""
                self._stop.wait(1.0)

    def start(self) -> None:
        threading.Thread(target=self.run, name=f"watch-{self.resource.plural}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


class Cluster:
    """The Experiments and Trials the UI shows, with trials indexed by their experiment."""

    def __init__(self, kube: Kube, namespace: str | None = None) -> None:
        self.hub = Hub()
        self._by_experiment: dict[Key, set[str]] = defaultdict(set)
        self._generation: dict[Key, int] = defaultdict(int)
        """(namespace, experiment label) -> bumped on every change of one of its trials."""
        self._index_lock = threading.Lock()
        self.experiments = Store(kube, EXPERIMENTS, namespace, self._experiment_changed)
        self.trials = Store(kube, TRIALS, namespace, self._trial_changed)

    def start(self) -> None:
        self.experiments.start()
        self.trials.start()

    def stop(self) -> None:
        self.experiments.stop()
        self.trials.stop()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for store in (self.experiments, self.trials):
            if not store.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def _experiment_changed(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        self.hub.publish("experiments", f"experiment/{meta.get('namespace')}/{meta.get('name')}")

    def _trial_changed(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        label = (meta.get("labels") or {}).get(naming.LABEL_EXPERIMENT)
        topics = [f"trial/{namespace}/{name}"]
        if label:
            with self._index_lock:
                if kind == "DELETED":
                    self._by_experiment[(namespace, label)].discard(name)
                else:
                    self._by_experiment[(namespace, label)].add(name)
                self._generation[(namespace, label)] += 1
            topics.append(f"experiment-label/{namespace}/{label}")
        self.hub.publish(*topics)

    def trials_version(self, namespace: str, experiment: str) -> int:
        """Changes whenever one of the experiment's trials changes (a cache key)."""
        with self._index_lock:
            return self._generation.get((namespace, naming.label_value(experiment)), 0)

    def trials_of(self, namespace: str, experiment: str) -> list[Obj]:
        """The experiment's trials (by the experiment label the controller puts on them)."""
        label = naming.label_value(experiment)
        with self._index_lock:
            names = list(self._by_experiment.get((namespace, label), ()))
        found = (self.trials.get(namespace, n) for n in names)
        return [t for t in found if t is not None]
