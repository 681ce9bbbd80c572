"""The work queue every controller uses: de-duplicating, per-key backoff, delayed adds.

A key is handed to at most one worker at a time. A key added again while a worker holds it is
marked dirty and handed out once more after `done`, so no change is lost and no two workers
reconcile one object at once. Failures back off per key (`base * 2**failures`, capped);
`forget` resets a key after a success.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Hashable
from dataclasses import dataclass, field

from kubetune.clock import SYSTEM, Clock


@dataclass
class Backoff:
    """Exponential per-key backoff; the delay doubles per failure up to `cap` seconds."""

    base: float = 0.005
    cap: float = 300.0
    failures: dict[Hashable, int] = field(default_factory=dict)

    def next_delay(self, key: Hashable) -> float:
        count = self.failures.get(key, 0)
        self.failures[key] = count + 1
        delay: float = min(self.cap, self.base * (2.0**count))
        return delay

    def forget(self, key: Hashable) -> None:
        self.failures.pop(key, None)

    def attempts(self, key: Hashable) -> int:
        return self.failures.get(key, 0)


class WorkQueue:
    """Thread-safe queue of keys; `get` blocks until a key is ready or the queue shuts down."""

    def __init__(
        self,
        backoff: Backoff | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._cond = threading.Condition()
        self._ready: list[Hashable] = []
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._dirty: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._shutdown = False

    def add(self, key: Hashable) -> None:
        with self._cond:
            if self._shutdown:
                return
            if key in self._processing:
                self._dirty.add(key)
                return
            if key in self._queued:
                return
            self._queued.add(key)
            self._ready.append(key)
            self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            self._seq += 1
            heapq.heappush(self._delayed, (self._clock.monotonic() + delay, self._seq, key))
            self._cond.notify()

    def add_rate_limited(self, key: Hashable) -> float:
        """Re-add after this key's next backoff delay; returns that delay."""
        with self._cond:
            delay = self._backoff.next_delay(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        with self._cond:
            self._backoff.forget(key)

    def attempts(self, key: Hashable) -> int:
        with self._cond:
            return self._backoff.attempts(key)

    def _promote_due(self) -> float | None:
        """Move due delayed keys to ready; return seconds until the next one, if any."""
        now = self._clock.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> Hashable | None:
        """The next ready key, or None on shutdown or when `timeout` passes."""
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        with self._cond:
            while True:
                wait = self._promote_due()
                if self._ready:
                    key = self._ready.pop(0)
                    self._queued.discard(key)
                    self._processing.add(key)
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
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                if key not in self._queued:
                    self._queued.add(key)
                    self._ready.append(key)
                    self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._ready) + len(self._delayed)
