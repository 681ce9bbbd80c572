"""The work queue: de-duplication, one worker per key, delays and per-key backoff."""

from __future__ import annotations

import threading
import time

from kubetune.clock import ManualClock
from kubetune.runtime.queue import Backoff, WorkQueue


def test_duplicates_collapse() -> None:
    q = WorkQueue()
    for _ in range(3):
        q.add("a")
    q.add("b")
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", None]


def test_key_added_while_processing_comes_back_once_after_done() -> None:
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    q.add("a")
    assert q.get(0) is None  # not handed to a second worker while held
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(0) is None


def test_delayed_add_waits_for_the_clock() -> None:
    clock = ManualClock()
    q = WorkQueue(clock=clock)
    q.add_after("a", 5)
    assert q.get(0) is None
    clock.seconds = 4.9
    assert q.get(0) is None
    clock.seconds = 5.0
    assert q.get(0) == "a"


def test_backoff_doubles_per_key_caps_and_forgets() -> None:
    b = Backoff(base=0.01, cap=0.05)
    assert [b.next_delay("k") for _ in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert b.next_delay("other") == 0.01
    b.forget("k")
    assert b.next_delay("k") == 0.01


def test_rate_limited_adds_use_the_backoff() -> None:
    clock = ManualClock()
    q = WorkQueue(Backoff(base=1.0, cap=100), clock=clock)
    assert q.add_rate_limited("k") == 1.0
    assert q.add_rate_limited("k") == 2.0
    assert q.attempts("k") == 2
    clock.seconds = 1.0
    assert q.get(0) == "k"
    q.done("k")
    q.forget("k")
    assert q.attempts("k") == 0


def test_get_blocks_until_add_and_shutdown_releases_waiters() -> None:
    q = WorkQueue()
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    time.sleep(0.05)
    q.add("x")
    t.join(2)
    assert got == ["x"]
    waiter = threading.Thread(target=lambda: got.append(q.get()))
    waiter.start()
    q.shutdown()
    waiter.join(2)
    assert got == ["x", None] and not waiter.is_alive()


def test_many_workers_never_share_a_key() -> None:
    q = WorkQueue()
    active: set[str] = set()
    overlaps: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        while (key := q.get(timeout=0.3)) is not None:
            assert isinstance(key, str)
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            time.sleep(0.001)
            with lock:
                active.discard(key)
            q.done(key)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(400):
        q.add(f"k{i % 7}")
    for t in threads:
        t.join(5)
    assert overlaps == []
