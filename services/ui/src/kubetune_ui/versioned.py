"""A per-experiment cache of the last value built, valid while the version it was built from
stays the same; bounded to the most recently used keys (the page JSON, the study, the
importance all rebuild only after a change and must not grow with the cluster)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class VersionedCache(Generic[K, V]):
    """The last value per key and the version it was built from; at most `entries` keys, the
    least recently used going first. Not thread-safe: callers that share it lock."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._items: OrderedDict[K, tuple[Hashable, V]] = OrderedDict()

    def get(self, key: K, version: Hashable) -> V | None:
        """The value built from `version`, or None (absent, or built from another version)."""
        cached = self._items.get(key)
        if cached is None or cached[0] != version:
            return None
        self._items.move_to_end(key)
        return cached[1]

    def put(self, key: K, version: Hashable, value: V) -> V:
        self._items[key] = (version, value)
        self._items.move_to_end(key)
        while len(self._items) > self.entries:
            self._items.popitem(last=False)
        return value

    def drop(self, key: K) -> None:
        self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)
