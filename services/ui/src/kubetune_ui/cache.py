"""Experiments and Trials kept in memory by the runtime's informers, and who to tell when one
changes.

The UI never polls the API server: one informer per kind (all namespaces, or the one given)
lists in pages sized by bytes, then watches with bookmarks; a broken watch resumes from its
last resourceVersion, and only a 410 Gone lists again. Each change is published to topics the
browser's event streams subscribe to: `experiments`, `experiment/<ns>/<name>` and
`trial/<ns>/<name>`.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import defaultdict
from typing import Any

from kubetune import naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube
from kubetune.runtime.watching import RESYNC, Event, Informer

Obj = dict[str, Any]
Key = tuple[str, str]


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


class Cluster:
    """The Experiments and Trials the UI shows; `experiments` and `trials` are the informers
    (`get`, `objects`, `select`, `synced`)."""

    def __init__(self, kube: Kube, namespace: str | None = None) -> None:
        self.hub = Hub()
        self._generation: dict[Key, int] = defaultdict(int)
        """(namespace, experiment label) -> bumped on every change of one of its trials."""
        self._generation_lock = threading.Lock()
        self._stop = threading.Event()
        # No resync: the UI derives nothing it would have to heal, and a resync would wake
        # every open stream for nothing.
        self.experiments = Informer(
            kube,
            EXPERIMENTS,
            self._experiment_changed,
            namespace=namespace,
            resync_period=math.inf,
        )
        self.trials = Informer(
            kube,
            TRIALS,
            self._trial_changed,
            namespace=namespace,
            resync_period=math.inf,
        )

    def start(self) -> None:
        self.experiments.start(self._stop)
        self.trials.start(self._stop)

    def stop(self) -> None:
        self._stop.set()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for informer in (self.experiments, self.trials):
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def _experiment_changed(self, event: Event) -> None:
        if event.type == RESYNC:
            return
        meta = event.object.get("metadata") or {}
        self.hub.publish("experiments", f"experiment/{meta.get('namespace')}/{meta.get('name')}")

    def _trial_changed(self, event: Event) -> None:
        if event.type == RESYNC:
            return
        meta = event.object.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        label = (meta.get("labels") or {}).get(naming.LABEL_EXPERIMENT)
        topics = [f"trial/{namespace}/{name}"]
        if label:
            with self._generation_lock:
                self._generation[(namespace, label)] += 1
            topics.append(f"experiment-label/{namespace}/{label}")
        self.hub.publish(*topics)

    def trials_version(self, namespace: str, experiment: str) -> int:
        """Changes whenever one of the experiment's trials changes (a cache key)."""
        with self._generation_lock:
            return self._generation.get((namespace, naming.label_value(experiment)), 0)

    def trials_of(self, namespace: str, experiment: str) -> list[Obj]:
        """The experiment's trials (by the experiment label the controller puts on them), from
        the informer's label index."""
        label = naming.label_value(experiment)
        return self.trials.select(namespace, {naming.LABEL_EXPERIMENT: label})
