"""A regular expression compiled, and `re` imported, on its first use.

Why: importing `re` (with `enum` and `functools` behind it) and compiling a pattern cost
instructions in every trial pod's collector, which for a small log never needs them.
"""

from __future__ import annotations

from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    import re


class LazyPattern:
    """`pattern` compiled with `re.ASCII` (as upstream's Go regexes read `\\d` and `\\w`) when
    `ascii`; `get()` compiles it once."""

    __slots__ = ("_ascii", "_compiled", "source")

    def __init__(self, source: str, *, ascii: bool = True) -> None:  # noqa: A002 - re's name
        self.source = source
        self._ascii = ascii
        self._compiled: re.Pattern[str] | None = None

    def get(self) -> re.Pattern[str]:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.source, re.ASCII if self._ascii else 0)
        return self._compiled
