"""The default format's per-name scan of a small block, in string methods instead of regexes.

`parsing` reads the values of a name that can stand first in the default format by a regex led
by the name itself (`parsing.name_values`), after checking that no occurrence follows a name
character (`parsing.name_after_name`). For a small block this module gives the same answers
with `str.find` and character checks, so a trial whose log is small never imports `re` or
compiles a pattern (a tenth of the collector's start); for big blocks the regexes, which scan
in C, stay faster.

The grammar (all ASCII, as `re.ASCII`): a name not preceded by a name character
(`[A-Za-z0-9_|-]`), blanks (whitespace but a line end), `=`, blanks, then a value: an optional
sign and either `inf`, `infinity` or `nan` in any case not followed by a name character, or
digits, an optional `.` with digits, an optional exponent (`e`, optional sign, digits). The value
may be empty (`parsing` drops it); matches do not overlap.
"""

from __future__ import annotations

NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_|-")
_BLANKS = frozenset(" \t\r\f\v")
DIGITS = frozenset("0123456789")
_WORDS = ("infinity", "inf", "nan")  # the longest first, as the regex tries it


def _skip(text: str, i: int, chars: frozenset[str]) -> int:
    end = len(text)
    while i < end and text[i] in chars:
        i += 1
    return i


def _value_end(text: str, start: int) -> int:
    """Where the value that starts at `start` ends."""
    i = start + 1 if text[start : start + 1] in ("+", "-") else start
    for word in _WORDS:
        end = i + len(word)
        piece = text[i:end]
        if piece.isascii() and piece.lower() == word and text[end : end + 1] not in NAME_CHARS:
            return end
    i = _skip(text, i, DIGITS)
    if text[i : i + 1] == "." and text[i + 1 : i + 2] in DIGITS:
        i = _skip(text, i + 1, DIGITS)
    if text[i : i + 1] in ("e", "E"):
        j = i + 2 if text[i + 1 : i + 2] in ("+", "-") else i + 1
        if text[j : j + 1] in DIGITS:
            i = _skip(text, j, DIGITS)
    return i


def values(text: str, name: str) -> list[str] | None:
    """The values written for `name`, in order; None when an occurrence of `name` right after
    a name character is followed by `=` (the caller then needs the exact regex)."""
    found: list[str] = []
    resume = 0  # matches do not overlap: the next starts where the last ended
    at = text.find(name)
    while at >= 0:
        equals = _skip(text, at + len(name), _BLANKS)
        if text[equals : equals + 1] == "=":
            if at > 0 and text[at - 1] in NAME_CHARS:
                return None
            if at >= resume:
                start = _skip(text, equals + 1, _BLANKS)
                resume = _value_end(text, start)
                found.append(text[start:resume])
        at = text.find(name, at + 1)
    return found


def _is_date(piece: str) -> bool:
    """`YYYY-MM-DDT` in ASCII digits."""
    return (
        len(piece) == 11
        and piece.isascii()
        and piece[:4].isdigit()
        and piece[4] == "-"
        and piece[5:7].isdigit()
        and piece[7] == "-"
        and piece[8:10].isdigit()
        and piece[10] == "T"
    )


def first_line_dated(text: str) -> bool:
    """Whether the block's first line may start with a timestamp (`dddd-..-..T`)."""
    return text[:4].isdigit() and text[4:5] == "-" and text[10:11] == "T"


def has_timestamp(text: str) -> bool:
    """Whether some line may start with an RFC 3339 timestamp (`YYYY-MM-DDT`)."""
    if first_line_dated(text):
        return True
    at = text.find("\n")
    while at >= 0:
        if _is_date(text[at + 1 : at + 12]):
            return True
        at = text.find("\n", at + 1)
    return False
