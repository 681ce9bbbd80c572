"""The lookup cache: entries expire, the size is bounded, ttl 0 keeps nothing."""

from __future__ import annotations

from kubetune.clock import ManualClock
from kubetune_webhook.lookups import TTLCache


def test_entries_expire() -> None:
    clock = ManualClock()
    cache = TTLCache(10, clock=clock)
    cache.put("a", 1)
    clock.seconds = 10
    assert cache.get("a") == 1
    clock.seconds = 10.5
    assert cache.get("a") is None


def test_least_recently_used_goes_first() -> None:
    cache = TTLCache(10, size=2, clock=ManualClock())
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_zero_ttl_keeps_nothing() -> None:
    cache = TTLCache(0)
    cache.put("a", 1)
    assert cache.get("a") is None
