"""The work queue: de-duplication, one worker per key, delays, backoff and the shared bucket."""

from __future__ import annotations

import itertools
import threading
import time
import urllib.request
from collections.abc import Hashable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from kubetune.clock import ManualClock
from kubetune.runtime.queue import Backoff, TokenBucket, WorkQueue
from kubetune.runtime.serving import serve_probes


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


def test_a_waiting_key_keeps_one_entry_at_its_earliest_due_time() -> None:
    clock = ManualClock()
    q = WorkQueue(clock=clock)
    q.add_after("a", 5)
    for _ in range(1000):
        q.add_after("a", 10)  # later: the earlier time stays
    assert len(q) == 1
    clock.seconds = 5.0
    assert q.get(0) == "a"
    q.done("a")
    clock.seconds = 10.0
    assert q.get(0) is None, "the later requests were folded into the earlier one"
    q.add_after("b", 10)
    q.add_after("b", 2)  # sooner: moves it forward
    clock.seconds = 12.0
    assert q.get(0) == "b"
    q.done("b")
    clock.seconds = 20.0
    assert q.get(0) is None and len(q) == 0


def test_client_go_default_limits() -> None:
    backoff = Backoff()
    delays = [backoff.next_delay("k") for _ in range(40)]
    assert delays[0] == 0.005 and delays[1] == 0.01 and delays[-1] == 1000.0
    bucket = TokenBucket()
    assert (bucket.rate, bucket.burst) == (10.0, 100)


def test_the_bucket_lets_a_burst_through_then_spaces_retries_at_its_rate() -> None:
    clock = ManualClock()
    bucket = TokenBucket(rate=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    clock.advance(1.0)  # refills up to the burst, after paying back the debt
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]


@pytest.mark.parametrize("rate, burst, named", [(0, 1, "rate"), (1, 0, "burst")])
def test_a_bucket_without_room_is_refused_with_the_field_named(
    rate: float, burst: int, named: str
) -> None:
    with pytest.raises(ValueError, match=f"TokenBucket {named} must be"):
        TokenBucket(rate=rate, burst=burst)


def test_a_retry_waits_the_longer_of_the_backoff_and_the_bucket() -> None:
    clock = ManualClock()
    q = WorkQueue(Backoff(base=0.05, cap=100), clock=clock, bucket=TokenBucket(10, 2, clock))
    # many keys failing at once: the first two pass on their backoff, then the bucket spaces
    delays = [q.add_rate_limited(f"k{i}") for i in range(4)]
    assert delays == pytest.approx([0.05, 0.05, 0.1, 0.2])
    # one key failing again and again: its own backoff dominates
    assert q.add_rate_limited("k0") == pytest.approx(max(0.1, 0.3))
    clock.advance(100)
    assert q.add_rate_limited("k0") == pytest.approx(0.2)


def _sample(metric: str, name: str) -> float:
    return REGISTRY.get_sample_value(metric, {"controller": name}) or 0.0


def test_metrics_count_each_key_once_and_time_the_queue_and_the_work() -> None:
    clock = ManualClock()
    q = WorkQueue(clock=clock, name="metrics-test")
    for _ in range(5):
        q.add("a")
        q.add_after("b", 3)
        q.add_after("c", 3)
    assert _sample("kubetune_workqueue_depth", "metrics-test") == 1
    assert _sample("kubetune_workqueue_waiting", "metrics-test") == 2
    assert _sample("kubetune_workqueue_adds_total", "metrics-test") == 1
    clock.advance(2)
    assert q.get(0) == "a"
    assert _sample("kubetune_workqueue_queue_duration_seconds_sum", "metrics-test") == 2
    assert _sample("kubetune_workqueue_depth", "metrics-test") == 0
    clock.advance(0.5)
    q.add_rate_limited("a")
    q.done("a")
    assert _sample("kubetune_workqueue_work_duration_seconds_sum", "metrics-test") == 0.5
    assert _sample("kubetune_workqueue_retries_total", "metrics-test") == 1
    clock.advance(1)
    assert _sample("kubetune_workqueue_adds_total", "metrics-test") == 1
    assert q.get(0) == "a"  # its retry was due first (5 ms after the failure)
    assert _sample("kubetune_workqueue_adds_total", "metrics-test") == 4
    assert _sample("kubetune_workqueue_depth", "metrics-test") == 2  # b and c
    assert _sample("kubetune_workqueue_waiting", "metrics-test") == 0


def test_the_queue_metrics_are_on_the_probe_endpoint() -> None:
    q = WorkQueue(name="endpoint-test")
    q.add("a")
    server = serve_probes("127.0.0.1", 0, healthy=lambda: True, ready=lambda: True)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    for metric in ("depth", "waiting", "adds_total", "retries_total"):
        assert f'kubetune_workqueue_{metric}{{controller="endpoint-test"}}' in text
    for metric in ("queue_duration_seconds", "work_duration_seconds"):
        assert f"kubetune_workqueue_{metric}_bucket" in text


# --- the queue against a reference model -------------------------------------------------------


@dataclass
class Model:
    """What the queue must do, written as plainly as possible (a list, sets and a dict)."""

    now: float = 0.0
    ready: list[Hashable] = field(default_factory=list)
    processing: set[Hashable] = field(default_factory=set)
    dirty: set[Hashable] = field(default_factory=set)
    due: dict[Hashable, tuple[float, int]] = field(default_factory=dict)
    order: itertools.count[int] = field(default_factory=itertools.count)

    def add(self, key: Hashable) -> None:
        if key in self.processing:
            self.dirty.add(key)
        elif key not in self.ready:
            self.ready.append(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
        elif key not in self.due or self.due[key][0] > self.now + delay:
            self.due[key] = (self.now + delay, next(self.order))

    def get(self) -> Hashable | None:
        for key, _ in sorted(self.due.items(), key=lambda item: item[1]):
            if self.due[key][0] <= self.now:
                del self.due[key]
                self.add(key)
        if not self.ready:
            return None
        key = self.ready.pop(0)
        self.processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self.processing.discard(key)
        if key in self.dirty:
            self.dirty.discard(key)
            self.add(key)

    def __len__(self) -> int:
        return len(set(self.ready) | set(self.due))


KEYS = st.sampled_from("abcd")
OPS = st.one_of(
    st.tuples(st.just("add"), KEYS),
    st.tuples(st.just("add_after"), KEYS, st.integers(0, 6)),
    st.tuples(st.just("advance"), st.integers(0, 4)),
    st.tuples(st.just("get")),
    st.tuples(st.just("done"), st.integers(0, 3)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(OPS, max_size=60))
def test_the_queue_behaves_like_the_reference_model(ops: list[tuple[object, ...]]) -> None:
    clock = ManualClock()
    q = WorkQueue(clock=clock)
    model = Model()
    held: list[Hashable] = []
    for op in ops:
        match op:
            case ("add", key):
                q.add(key)
                model.add(key)
            case ("add_after", key, int(delay)):
                q.add_after(key, delay)
                model.add_after(key, delay)
            case ("advance", int(seconds)):
                clock.advance(seconds)
                model.now += seconds
            case ("get",):
                got = q.get(0)
                assert got == model.get()
                if got is not None:
                    assert got not in held, "one key handed to two workers"
                    held.append(got)
            case ("done", int(index)) if held:
                key = held.pop(index % len(held))
                q.done(key)
                model.done(key)
        assert len(q) == len(model)
