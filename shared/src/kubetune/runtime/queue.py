"""The work queue every controller uses: de-duplicating, delayed adds, rate-limited retries.

A key is handed to at most one worker at a time. A key added again while a worker holds it is
marked dirty and handed out once more after `done`, so no change is lost and no two workers
reconcile one object at once. A key waits for a delay at most once: adding it again with a
later due time keeps the earlier one, so a thousand requeues of one key cost one entry.

Retries (`add_rate_limited`) wait the longer of two delays: the key's own exponential backoff
(`base * 2**failures`, capped; `forget` resets it after a success) and a token bucket shared by
all keys, so a burst of failures across many keys cannot hammer the API server.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram

from kubetune.clock import SYSTEM, Clock

DEPTH = Gauge(
    "kubetune_workqueue_depth", "Keys ready for a worker, each counted once", ["controller"]
)
WAITING = Gauge(
    "kubetune_workqueue_waiting", "Keys waiting for a delay, each counted once", ["controller"]
)
ADDS = Counter("kubetune_workqueue_adds_total", "Keys added to the work queue", ["controller"])
RETRIES = Counter(
    "kubetune_workqueue_retries_total", "Rate-limited re-adds (failed passes)", ["controller"]
)
QUEUE_SECONDS = Histogram(
    "kubetune_workqueue_queue_duration_seconds",
    "Time a key waited ready in the queue before a worker took it",
    ["controller"],
)
WORK_SECONDS = Histogram(
    "kubetune_workqueue_work_duration_seconds",
    "Time a worker held a key (from get to done)",
    ["controller"],
)


@dataclass
class Backoff:
    """Exponential per-key backoff; the delay doubles per failure up to `cap` seconds."""

    base: float = 0.005
    cap: float = 1000.0
    failures: dict[Hashable, int] = field(default_factory=dict)

    def next_delay(self, key: Hashable) -> float:
        count = self.failures.get(key, 0)
        self.failures[key] = count + 1
        if count > 64:  # 2**count would overflow a float long after reaching any cap
            return self.cap
        delay: float = min(self.cap, self.base * (2.0**count))
        return delay

    def forget(self, key: Hashable) -> None:
        self.failures.pop(key, None)

    def attempts(self, key: Hashable) -> int:
        return self.failures.get(key, 0)


class TokenBucket:
    """An overall limit of `rate` retries a second with bursts of `burst`, shared by all keys.

    `reserve` never blocks: it takes a token (going into debt when there is none) and says how
    long the caller must wait for it, so later reservations queue up behind earlier ones.
    """

    def __init__(self, rate: float = 10.0, burst: int = 100, clock: Clock = SYSTEM) -> None:
        if rate <= 0:
            raise ValueError(f"TokenBucket rate must be positive, got {rate}: use e.g. rate=10")
        if burst < 1:
            raise ValueError(f"TokenBucket burst must be at least 1, got {burst}: use e.g. 100")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    def reserve(self) -> float:
        """Take one token; the seconds until it is available (0 when one is there now)."""
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class WorkQueue:
    """Thread-safe queue of keys; `get` blocks until a key is ready or the queue shuts down.

    `name` labels the queue's metrics (the controller sets it); an unnamed queue records none.
    """

    def __init__(
        self,
        backoff: Backoff | None = None,
        clock: Clock = SYSTEM,
        *,
        bucket: TokenBucket | None = None,
        name: str = "",
    ) -> None:
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._bucket = bucket or TokenBucket(clock=clock)
        self._name = ""
        self.name = name
        self._cond = threading.Condition()
        self._ready: deque[Hashable] = deque()
        self._queued: set[Hashable] = set()  # the keys in `_ready`
        self._processing: dict[Hashable, float] = {}  # key -> when a worker took it
        self._dirty: set[Hashable] = set()  # added while processing: again after `done`
        self._ready_since: dict[Hashable, float] = {}
        self._due: dict[Hashable, float] = {}  # each waiting key's earliest due time
        # (due, seq, key); an entry whose due differs from `_due[key]` is stale and skipped.
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._shutdown = False

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, name: str) -> None:
        """Label the metrics `name`; each shows (at zero) from now on, before its first use."""
        self._name = name
        if name:
            for metric in (DEPTH, WAITING, ADDS, RETRIES, QUEUE_SECONDS, WORK_SECONDS):
                metric.labels(name)

    # --- adding -------------------------------------------------------------------------------

    def add(self, key: Hashable) -> None:
        with self._cond:
            if not self._shutdown:
                self._add(key)
                self._gauge()

    def _add(self, key: Hashable) -> None:
        """Queue `key` now (lock held): once, and never beside a worker that holds it."""
        if key in self._queued or key in self._dirty:
            return
        if self.name:
            ADDS.labels(self.name).inc()
        if key in self._processing:
            self._dirty.add(key)
            return
        self._queued.add(key)
        self._ready.append(key)
        self._ready_since[key] = self._clock.monotonic()
        self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue `key` after `delay` seconds, or sooner if it is already due sooner."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            due = self._clock.monotonic() + delay
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due
            self._seq += 1
            heapq.heappush(self._heap, (due, self._seq, key))
            self._gauge()
            self._cond.notify()

    def add_rate_limited(self, key: Hashable) -> float:
        """Re-add after the longer of this key's backoff and the shared bucket's wait; returns
        that delay."""
        with self._cond:
            delay = max(self._backoff.next_delay(key), self._bucket.reserve())
            if self.name:
                RETRIES.labels(self.name).inc()
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        with self._cond:
            self._backoff.forget(key)

    def attempts(self, key: Hashable) -> int:
        with self._cond:
            return self._backoff.attempts(key)

    # --- taking -------------------------------------------------------------------------------

    def _promote_due(self) -> float | None:
        """Move due waiting keys to ready; return seconds until the next one, if any."""
        now = self._clock.monotonic()
        while self._heap:
            due, _, key = self._heap[0]
            if self._due.get(key) != due:
                heapq.heappop(self._heap)  # superseded by an earlier due time
                continue
            if due > now:
                return due - now
            heapq.heappop(self._heap)
            del self._due[key]
            self._add(key)
        return None

    def get(self, timeout: float | None = None) -> Hashable | None:
        """The next ready key, or None on shutdown or when `timeout` passes."""
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        with self._cond:
            while True:
                wait = self._promote_due()
                if self._ready:
                    key = self._ready.popleft()
                    self._queued.discard(key)
                    now = self._clock.monotonic()
                    self._processing[key] = now
                    since = self._ready_since.pop(key, now)
                    if self.name:
                        QUEUE_SECONDS.labels(self.name).observe(now - since)
                    self._gauge()
                    return key
                if self._shutdown:
                    return None
                if deadline is not None:
                    left = deadline - self._clock.monotonic()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: Hashable) -> None:
        """The worker is finished with `key`; a key added meanwhile is queued again now."""
        with self._cond:
            taken = self._processing.pop(key, None)
            if taken is not None and self.name:
                WORK_SECONDS.labels(self.name).observe(self._clock.monotonic() - taken)
            if key in self._dirty:
                self._dirty.discard(key)
                self._add(key)
            self._gauge()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def _gauge(self) -> None:
        if self.name:
            DEPTH.labels(self.name).set(len(self._ready))
            WAITING.labels(self.name).set(len(self._due))

    def __len__(self) -> int:
        """Keys ready or waiting for a delay, each counted once."""
        with self._cond:
            return len(self._queued | self._due.keys())
