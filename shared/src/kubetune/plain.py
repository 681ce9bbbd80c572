"""Value classes without `dataclasses`: the collector imports its records in every trial pod,
and `dataclasses` loads `inspect` (with `ast`, `dis`, `tokenize`) and builds every class with
`exec`, about a sixth of the sidecar's start.

A subclass lists its fields in `__slots__` and sets them in its own `__init__`; `Plain` compares
and shows them as a dataclass would. `Frozen` records are also hashed by their fields (by
convention never changed once made, as a frozen dataclass's).
"""

from __future__ import annotations


class Plain:
    """Equal when of the same class with equal fields; shown as `Name(field=value, ...)`."""

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = self.__slots__
        return names

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._names())

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True  # the usual case for module-level records (`kube.TRIALS`), and cheap
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Plain)
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._names())
        return f"{self.__class__.__qualname__}({shown})"


class Frozen(Plain):
    """A `Plain` record that is hashable (its fields are never changed once it is made)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._fields())
