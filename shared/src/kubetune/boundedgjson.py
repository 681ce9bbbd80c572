"""GJSON queries with Go's wildcard semantics and a bounded cost.

Why: the conditions of a Trial are user text evaluated inside the trial-controller (and the
webhook), where one slow evaluation holds the interpreter lock, fails the liveness probe and so
stops every Experiment of the cluster. The ``gjson`` package (1.2.x) has three ways to run
long on a small input, each closed here on a subclass of its evaluator:

* ``#(key%"pattern")`` / ``!%`` and wildcard keys (``status.cond*``) become Python regexes built
  from the user's text (``(a+)+b`` backtracks exponentially): matched by
  :mod:`kubetune.wildcard` instead, in linear time and with Go's meaning (``*``, ``?``, ``\\``);
* a modifier materialises what multipaths only reference: ``[@this,@this]`` repeated k times is
  k small lists, but ``@tostr``/``@flatten`` of it is 2**k values; a modifier's input may hold
  at most :data:`MAX_MODIFIER_NODES` values (shared values counted each time they are reached);
* anything else (nested queries over such shared lists) is stopped by a CPU deadline,
  :data:`MAX_CPU_SECONDS` of the evaluating thread, checked at every step of the query.

The library parses recursively, so the nesting depth of the expression is bounded too.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import gjson
from gjson._gjson import (
    ArrayQueryQueryPart,
    BaseQueryPart,
    FieldQueryPart,
    ModifierQueryPart,
    NoResult,
)

from kubetune import wildcard

__all__ = [
    "MAX_CPU_SECONDS",
    "MAX_EXPRESSION_LENGTH",
    "MAX_MODIFIER_NODES",
    "MAX_NESTING",
    "BoundExceeded",
    "check_shape",
    "get",
]

MAX_EXPRESSION_LENGTH = 1024
"""Characters in one condition (Katib's conditions are under 100)."""
MAX_NESTING = 32
"""Open brackets (``(``, ``[``, ``{``) at once in one condition."""
MAX_MODIFIER_NODES = 100_000
"""Values in a modifier's input (a Job object has a few hundred to a few thousand)."""
MAX_CPU_SECONDS = 0.5
"""CPU time of the evaluating thread for one evaluation."""

_clock: Callable[[], float] = time.thread_time


class BoundExceeded(Exception):
    """The evaluation went past one of this module's bounds; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _is_wildcard(text: str) -> bool:
    """Whether a key has an unescaped ``*`` or ``?`` (as the library decides it)."""
    escaped = False
    for c in text:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "*?":
            return True
    return False


def check_shape(expr: str) -> None:
    """Raise BoundExceeded when ``expr`` is too long or nested too deeply to evaluate."""
    if len(expr) > MAX_EXPRESSION_LENGTH:
        raise BoundExceeded(
            f"is {len(expr)} characters long, at most {MAX_EXPRESSION_LENGTH} are allowed"
        )
    depth = deepest = 0
    in_string = escaped = False
    for c in expr:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif c in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}":
            depth -= 1
    if deepest > MAX_NESTING:
        raise BoundExceeded(f"nests {deepest} brackets, at most {MAX_NESTING} are allowed")


class _Bounded(gjson.GJSONObj):
    """The library's evaluator with linear wildcards, sized modifier inputs and a deadline."""

    def __init__(self, obj: gjson.JSONType, query: str) -> None:
        super().__init__(obj, query)
        self._deadline = _clock() + MAX_CPU_SECONDS
        self._sizes: dict[int, tuple[int, object]] = {}

    def run(self, parts: tuple[BaseQueryPart, ...]) -> Any:
        """`get` with the query's parts already parsed (`_parsed`); the same resets first."""
        self._dump_params = {"ensure_ascii": False}
        self._after_hash = False
        self._after_query_all = False
        obj = self._obj
        for part in parts:
            obj = self._parse_part(part, obj)
        return obj

    def _tick(self) -> None:
        if _clock() > self._deadline:
            raise BoundExceeded(f"took more than {MAX_CPU_SECONDS} s of CPU")

    def _parse_part(self, part: BaseQueryPart, obj: Any, *, in_multipaths: bool = False) -> Any:
        self._tick()
        if isinstance(part, FieldQueryPart) and _is_wildcard(part.part):
            return self._wildcard_key(part, obj)
        return super()._parse_part(part, obj, in_multipaths=in_multipaths)

    def _wildcard_key(self, part: FieldQueryPart, obj: Any) -> Any:
        """The value of the first key matching the wildcard, like the library (errors too)."""
        if isinstance(obj, NoResult):
            return obj
        if not isinstance(obj, Mapping):
            raise gjson.GJSONParseError(
                f"Wildcard matching key `{part}` requires a mapping object, got {type(obj)} "
                "instead.",
                query=self._query,
                position=part.start,
            )
        for key in obj:
            if wildcard.matches(key, part.part, self._tick):
                return obj[key]
        raise gjson.GJSONParseError(
            f"No key matching pattern with wildcard `{part}`.",
            query=self._query,
            position=part.start,
        )

    def _parse_query(self, query: ArrayQueryQueryPart, obj: Any) -> Any:
        self._tick()
        if query.operator not in ("%", "!%") or isinstance(query.value, ArrayQueryQueryPart):
            return super()._parse_query(query, obj)
        try:
            value = json.loads(query.value, strict=False)
        except json.JSONDecodeError as ex:
            raise gjson.GJSONParseError(
                f"Invalid value `{query.value}` for the query key `{query.field}`.",
                query=self._query,
                position=query.start + len(query.field) + len(query.operator),
            ) from ex
        pattern = value if isinstance(value, str) else query.value.strip()
        key = query.field.replace("\\", "")
        wanted = query.operator == "%"
        found = []
        for item in obj:
            self._tick()
            subject = (item.get(key) if isinstance(item, Mapping) else None) if key else item
            if (
                isinstance(subject, str)
                and wildcard.matches(subject, pattern, self._tick) is wanted
            ):
                found.append(item)
        return self._evaluate_query_return_value(query, found)

    def _apply_modifier(self, modifier: ModifierQueryPart, obj: Any) -> Any:
        if modifier.name != "this":  # @this returns its input as is
            self._size(obj)
        return super()._apply_modifier(modifier, obj)

    def _size(self, obj: Any) -> int:
        """Values in ``obj`` counting shared ones each time; BoundExceeded past the bound."""
        if not isinstance(obj, (Mapping, list, tuple)):
            return 1
        known = self._sizes.get(id(obj))
        if known is not None:
            return known[0]
        self._tick()
        children = obj.values() if isinstance(obj, Mapping) else obj
        total = 1
        for child in children:
            total += self._size(child)
            if total > MAX_MODIFIER_NODES:
                raise BoundExceeded(f"gives a modifier more than {MAX_MODIFIER_NODES} values")
        self._sizes[id(obj)] = (total, obj)  # the object is kept so that its id stays its own
        return total


def get(obj: gjson.JSONType, expr: str) -> Any:
    """``gjson.get(obj, expr)`` within this module's bounds (BoundExceeded past them)."""
    check_shape(expr)
    try:
        return _Bounded(obj, expr).run(_parsed(expr))
    except RecursionError as e:
        raise BoundExceeded("is nested too deeply for the evaluator") from e


@functools.lru_cache(maxsize=256)
def _parsed(expr: str) -> tuple[BaseQueryPart, ...]:
    """The parts of a query, parsed once: the trial-controller evaluates the same two or three
    conditions on every job status it sees, and parsing took most of each evaluation. Parsing
    reads only the text, and evaluation never changes the parts. A query that does not parse
    raises each time (exceptions are not cached)."""
    if not expr:
        raise gjson.GJSONError("Empty query.")
    return tuple(_Bounded(None, expr)._parse(start=0, end=len(expr) - 1))
