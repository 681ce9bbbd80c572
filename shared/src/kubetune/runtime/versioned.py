"""Work done once per version of an object, for controllers woken by many objects.

A Trial's pass runs when its Trial, its job or one of its pods changes: about twenty times in a
Trial's life, while the Trial itself changes three or four times and its job five. Parsing the
Trial or judging the job again on every pass gives the same answer for the same content, and
(uid, resourceVersion) names one content of one object: the answer computed for it stands
until the object changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")

DEFAULT_LIMIT = 4096
"""Versions remembered; past it the memory starts over (a pass then computes again)."""


class PerVersion(Generic[T]):
    """Values computed from an object, remembered by (uid, resourceVersion, *extra)."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._values: dict[tuple[Hashable, ...], T] = {}

    def get(self, obj: Mapping[str, Any], compute: Callable[[], T], *extra: Hashable) -> T:
        """The value for this version of `obj`, computed by `compute` the first time. An object
        without uid or resourceVersion (not from the API server) is computed every time;
        `extra` names anything else the value depends on. A `compute` that raises is not
        remembered."""
        meta = obj.get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        if not uid or not version:
            return compute()
        key = (uid, version, *extra)
        try:
            return self._values[key]
        except KeyError:
            pass
        value = compute()
        if len(self._values) >= self.limit:
            self._values.clear()
        self._values[key] = value
        return value
