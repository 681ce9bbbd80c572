"""GJSON's wildcard patterns (`%` / `!%`, wildcard keys): Go's meaning, in linear time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetune import wildcard


@pytest.mark.parametrize(
    ("text", "pattern", "expected"),
    [
        ("hello", "*llo", True),
        ("jello", "?ello", True),
        ("hello", "h*o", True),
        ("hello", "h*x", False),
        ("", "", True),
        ("", "*", True),
        ("", "?", False),
        ("x", "**", True),
        ("a*b", r"a\*b", True),  # an escaped star is a literal star
        ("axb", r"a\*b", False),
        ("a?", r"a\?", True),
        ("ab", r"a\?", False),
        (r"a\b", r"a\\b", True),
        ("(a+)+b", "(a+)+b", True),  # regex syntax means itself
        ("aaab", "(a+)+b", False),
        ("a.c", "a.c", True),
        ("abc", "a.c", False),
        ("Complete", "Comp*", True),
        ("héllo", "h?llo", True),  # one character, not one byte
    ],
)
def test_go_semantics(text: str, pattern: str, expected: bool) -> None:
    assert wildcard.matches(text, pattern) is expected


def _reference(text: str, pattern: str) -> bool:
    """A backtracking matcher, fine on the tiny inputs hypothesis draws."""
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, text, re.S) is not None


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="ab", max_size=8), st.text(alphabet="ab*?", max_size=6))
def test_agrees_with_a_backtracking_matcher(text: str, pattern: str) -> None:
    assert wildcard.matches(text, pattern) is _reference(text, pattern)


def test_pathological_regex_is_a_literal_on_a_long_text() -> None:
    """`(a+)+b` made Python's regex run for ever on a long `aaa...c`: here it is a literal."""
    assert wildcard.matches("a" * 200_000 + "c", "(a+)+b") is False


def test_many_stars_on_a_long_text_take_one_pass() -> None:
    """A backtracking matcher is polynomial of degree 6 here; the NFA reads the text once."""
    assert wildcard.matches("a" * 200_000 + "c", "*a*a*a*a*a*b") is False
    assert wildcard.matches("a" * 200_000 + "b", "*a*a*a*a*a*b") is True


def test_a_long_match_calls_the_check_so_a_deadline_can_stop_it() -> None:
    calls: list[int] = []

    def check() -> None:
        calls.append(1)
        if len(calls) > 2:
            raise TimeoutError

    with pytest.raises(TimeoutError):
        wildcard.matches("a" * (wildcard.CHECK_EVERY * 10), "*b", check)
    assert len(calls) == 3
