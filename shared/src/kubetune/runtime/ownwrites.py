"""The answers of a process's own writes, for reads from a watch cache that lags behind them.

Why: a controller that reads from a watch cache and writes the object's status often starts
its next pass before the watch has delivered its own write (another object's event, or a
requeue, comes first). The cache then still holds the version the write replaced: a plan made
from it would only conflict, and a GET to get past it costs a request per write. The write's
response is that newer object, so it answers until the cache has moved past the replaced version.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from kubetune.kube import Obj


def resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class OwnWrites:
    """The last write's answer per key, with the resourceVersion it replaced."""

    def __init__(self) -> None:
        self._by_key: dict[Hashable, tuple[str, Obj]] = {}
        self._lock = threading.Lock()

    def wrote(self, key: Hashable, replaced: str, written: Obj) -> None:
        """`written` (the API server's answer) replaced the version `replaced` of `key`."""
        with self._lock:
            self._by_key[key] = (replaced, written)

    def newest(self, key: Hashable, cached: Obj | None) -> Obj | None:
        """The write's answer while `cached` is the version it replaced, else `cached` (and
        the answer is forgotten: the cache has seen the write, or someone wrote since)."""
        with self._lock:
            entry = self._by_key.get(key)
            if entry is None:
                return cached
            if cached is not None and resource_version(cached) == entry[0]:
                return entry[1]
            del self._by_key[key]
            return cached
