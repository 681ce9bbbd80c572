"""GJSON's ``%`` / ``!%`` wildcard patterns, matched in time linear in the text.

Why: in Go's gjson (Katib's) ``#(name%"D*")`` is a wildcard match (``*`` any run of
characters, ``?`` exactly one, ``\\`` makes the next character literal), not a regular
expression; the Python ``gjson`` package turns the pattern into a Python regex instead, so
``(a+)+b`` backtracks for ever on a long ``aaa...c``. Here the pattern is a small NFA whose
states are the pattern's positions, all run at once as the bits of an integer: one step per
character of the text whatever the pattern, never backtracking (Go's matcher backtracks and so
gives up, answering "no match", past a complexity limit; this one needs none).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["compile_pattern", "matches"]


@dataclass(frozen=True)
class _Pattern:
    """The pattern as bit masks over its tokens (bit i = token i; bit ``size`` = the end)."""

    size: int
    star: int  # tokens that are `*`
    any: int  # tokens that are `?`
    chars: dict[str, int]  # literal character -> the tokens that are it
    literal: str | None  # the whole pattern when it has no wildcard

    def step_mask(self, char: str) -> int:
        return self.chars.get(char, 0) | self.any

    def close(self, states: int) -> int:
        """Add the states reached by letting each reached `*` match nothing."""
        # Consecutive stars are merged, so one shift reaches past any star.
        return states | ((states & self.star) << 1)


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> _Pattern:
    """The pattern's tokens as masks: ``*`` runs merged, ``\\x`` a literal ``x``."""
    star = any_ = 0
    chars: dict[str, int] = {}
    size = 0
    wild = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            wild = True
            i += 1
            if size and star & (1 << (size - 1)):
                continue  # `**` is `*`
            star |= 1 << size
        elif c == "?":
            wild = True
            any_ |= 1 << size
            i += 1
        else:
            if c == "\\" and i + 1 < len(pattern):
                wild = True  # the literal differs from the pattern text
                i += 1
                c = pattern[i]
            chars[c] = chars.get(c, 0) | (1 << size)
            i += 1
        size += 1
    literal = None if wild else pattern
    return _Pattern(size=size, star=star, any=any_, chars=chars, literal=literal)


CHECK_EVERY = 4096
"""Characters read between two calls of ``matches``'s ``check``."""


def matches(text: str, pattern: str, check: Callable[[], None] | None = None) -> bool:
    """Whether the whole of ``text`` matches the GJSON wildcard ``pattern``.

    ``check`` (if any) is called every :data:`CHECK_EVERY` characters, to stop a long match
    by raising (a caller's deadline)."""
    p = compile_pattern(pattern)
    if p.literal is not None:
        return text == p.literal
    final = 1 << p.size
    states = p.close(1)
    for i, char in enumerate(text):
        if check is not None and not i % CHECK_EVERY:
            check()
        states = p.close(((states & p.step_mask(char)) << 1) | (states & p.star))
        if not states:
            return False
        if states & final and p.star & (final >> 1):
            return True  # ends with `*`: the rest of the text cannot change the answer
    return bool(states & final)
