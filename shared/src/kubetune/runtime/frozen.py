"""Read-only objects for the informer caches, and `thaw` for a copy a reconciler may change.

Why: every reconcile and every event handler shares the cached objects by reference; one that
changed a cached object in place would change what every later pass sees, without a write to
the API server. The cache therefore holds objects frozen once, when they arrive: `FrozenDict`
and `FrozenList` are `dict` and `list` (reads, `isinstance`, JSON encoding cost what they cost
on plain ones), and every method that would change one raises `FrozenError`. A reconciler that
needs a changed copy calls `thaw` (or `copy.deepcopy`, which thaws too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from kubetune.kube import Obj

HOW = "cached objects are read-only: change a copy from kubetune.runtime.thaw(obj)"


class FrozenError(TypeError):
    """A write into a cached (frozen) object."""


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise FrozenError(HOW)


class FrozenDict(dict[str, Any]):
    """A `dict` whose contents cannot change (its values are frozen too)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: thaw(value) for key, value in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (thaw(self),))


class FrozenList(list[Any]):
    """A `list` whose contents cannot change (its items are frozen too)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [thaw(item) for item in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (thaw(self),))


_LEAVES = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """`value` with every dict and list in it replaced by a frozen one (a frozen one is kept,
    so a transform's output that reuses frozen parts costs only its own new parts)."""
    kind = type(value)
    if kind is dict:
        return FrozenDict({k: v if type(v) in _LEAVES else freeze(v) for k, v in value.items()})
    if kind is list:
        return FrozenList([v if type(v) in _LEAVES else freeze(v) for v in value])
    if kind in _LEAVES or kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList([freeze(v) for v in value])
    return value  # a transform's own read-only types (MappingProxyType, tuples, dataclasses)


def freeze_object(obj: Obj) -> Obj:
    """A cached object, frozen (typed as the object it is)."""
    frozen: Obj = freeze(obj)
    return frozen


def thaw(value: Any) -> Any:
    """A plain, changeable deep copy of `value` (frozen or not): every mapping becomes a dict,
    every list or tuple a list; anything else (strings, numbers) is kept."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value
