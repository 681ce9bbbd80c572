"""TEXT (default format and user filters) and JSON lines to metric values."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubetune_pns_collector import literalscan, parsing
from kubetune_pns_collector.parsing import DEFAULT_FORMAT, JsonParser, TextParser

NAMES = ("loss", "accuracy", "val-loss", "test/accuracy")
STAMP = 1638454071.5  # 2021-12-02T14:07:51.5Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("epoch 1: loss=0.5 accuracy=0.9\n", [("loss", "0.5"), ("accuracy", "0.9")]),
        ("loss = -1.5e-3\n", [("loss", "-1.5e-3")]),
        ("loss=1E+10 accuracy=.5\n", [("loss", "1E+10"), ("accuracy", ".5")]),
        ("val-loss=0.25\n", [("val-loss", "0.25")]),
        ("train-loss=9 loss=1\n", [("loss", "1")]),  # whole names only
        # Non-finite values are values (kept in `latest`, never min/max: observations.py).
        ("loss=nan accuracy=inf\n", [("loss", "nan"), ("accuracy", "inf")]),
        ("loss=NaN\nloss=3\n", [("loss", "NaN"), ("loss", "3")]),
        ("nothing here\n", []),
        ("Loss=1\n", []),  # names are case-sensitive
        ("loss=1\r\naccuracy=2\r\n", [("loss", "1"), ("accuracy", "2")]),
        ("loss\n=1\n", []),  # a metric never spans lines
        # `/` is not in the default name pattern: the name is what follows it (as upstream)
        ("test/accuracy=0.7\n", [("accuracy", "0.7")]),
        ("loss=1\ufffd\ufffd accuracy=2\n", [("loss", "1"), ("accuracy", "2")]),
        ("loss=1accuracy=2 x=1-val-loss=3\n", [("loss", "1"), ("accuracy", "2")]),
        ("loss=-inf accuracy=+Infinity\n", [("loss", "-inf"), ("accuracy", "+Infinity")]),
        ("loss=1e309\n", [("loss", "1e309")]),
        ("loss=- accuracy=information loss=nano\n", []),  # a sign, or a word, is no value
        # ASCII digits only, as upstream's Go regex: `１` and `٣` are no digits.
        ("loss=\uff11 accuracy=\u0663.5 val-loss=\uff10.1\n", []),
        ("loss=1_0\n", [("loss", "1")]),  # upstream's regex stops at `_`: never 10
    ],
    ids=[
        "two",
        "spaces-exponent",
        "exponent-E",
        "dashes",
        "prefix",
        "nan-inf",
        "nan-then-number",
        "none",
        "case",
        "crlf",
        "no-span",
        "slash",
        "replacement-chars",
        "adjacent",
        "signed-inf",
        "overflow",
        "no-value",
        "non-ascii-digits",
        "underscore",
    ],
)
def test_default_format(text: str, expected: list[tuple[str, str]]) -> None:
    got = TextParser(NAMES).parse(text)
    assert [(n, v) for n, v, _ in got] == expected
    assert all(stamp == 0.0 for _, _, stamp in got)


def test_line_timestamps_are_rfc3339_first_tokens() -> None:
    text = (
        "2021-12-02T14:07:51.5Z epoch 1 loss=0.5\n"
        "no stamp loss=0.4\n"
        "2021-12-02T14:07:51.5 loss=0.3\n"  # no zone: not RFC 3339
        "2021-12-02T15:07:51.500000000+01:00 accuracy=0.1 loss=0.2\n"
    )
    got = TextParser(NAMES).parse(text)
    assert got == [
        ("loss", "0.5", STAMP),
        ("loss", "0.4", 0.0),
        ("loss", "0.3", 0.0),
        ("accuracy", "0.1", STAMP),
        ("loss", "0.2", STAMP),
    ]


def test_user_filters_names_with_slashes_and_special_values() -> None:
    filters = [r"([\w/-]+)\s*:\s*(\S+)", r"\{metricName: ([\w|-]+), metricValue: (\S+)\}"]
    text = (
        "test/accuracy: 0.75\n"
        "{metricName: loss, metricValue: nan}\n"
        "{metricName: val-loss, metricValue: -inf}\n"
        "irrelevant: 1\n"
    )
    got = TextParser(NAMES, filters).parse(text)
    assert [(n, v) for n, v, _ in got] == [
        ("test/accuracy", "0.75"),
        ("loss", "nan"),
        ("val-loss", "-inf"),
    ]


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        (["(unclosed"], "is not a valid regular expression"),
        ([r"(\w+)=\d+"], "needs two groups"),
        ([DEFAULT_FORMAT, "[z-a](x)(y)"], "'[z-a](x)(y)' is not a valid regular expression"),
    ],
    ids=["syntax", "one-group", "second-of-two"],
)
def test_invalid_filters_are_a_clear_error(filters: list[str], message: str) -> None:
    with pytest.raises(parsing.FilterError, match=re.escape(message)):
        TextParser(NAMES, filters)


def test_json_lines() -> None:
    text = (
        '{"loss": "0.5", "accuracy": 0.25, "timestamp": 1638454071.5}\n'
        "\n"
        '{"loss": "0.4", "timestamp": "2021-12-02T14:07:51.5Z", "epoch": "3"}\n'
        "not json at all\n"
        "[1, 2]\n"
        '{"loss": true, "accuracy": null, "val-loss": {"x": 1}}\n'
        '{"loss": NaN}\n'
        '{"loss": "1e-3", "timestamp": "yesterday"}\n'
    )
    got = sorted(JsonParser(NAMES).parse(text), key=lambda t: (t[2], t[0], t[1]))
    assert got == sorted(
        [
            ("loss", "0.5", STAMP),
            ("accuracy", "0.25", STAMP),
            ("loss", "0.4", STAMP),
            ("loss", "NaN", 0.0),
            ("loss", "1e-3", 0.0),
        ],
        key=lambda t: (t[2], t[0], t[1]),
    )


_line = st.lists(
    st.sampled_from(
        [
            *("loss", "accuracy", "val-loss", "x", "=", " ", "\t", "\r", "0", "1.5", "-", "e3"),
            *("E", ".", "inf", "NaN", "Infinity", "\uff11", "\u0663", "_", "\u00e9"),
        ]
    ),
    max_size=12,
).map("".join)


@settings(max_examples=500)
@given(st.lists(_line, max_size=8))
def test_block_parsing_equals_upstream_line_by_line(lines: list[str]) -> None:
    """The many-lines-at-once fast path gives what upstream's per-line regex gives, with its
    value group also taking whole-word inf/infinity/nan and a lone sign being no value."""
    text = "\n".join(lines) + "\n"
    expected = []
    assert DEFAULT_FORMAT == r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
    upstream = re.compile(  # ASCII: Go's `\d`, `\w` and `\s` are
        r"([\w|-]+)\s*=\s*([+-]?(?:(?i:inf(?:inity)?|nan)(?![\w|-])|\d*(\.\d+)?([Ee][+-]?\d+)?))",
        re.ASCII,
    )
    for line in text.replace("\r\n", "\n").split("\n"):
        for m in upstream.finditer(line):
            name, value = m.group(1).strip(), m.group(2).strip()
            if value not in ("", "+", "-") and name in NAMES:
                expected.append((name, value, 0.0))
    assert TextParser(NAMES).parse(text) == expected


_TRICKY_NAMES = ("loss", "accuracy", "val-loss", "e5x", "inf", "-loss", "1", "_x|y")
_tricky_line = st.lists(
    st.sampled_from(
        [
            *_TRICKY_NAMES,
            *("x", "=", " ", "\t", "0", "1.5", "-", "+", "e3", "E", "."),
            *("nan", "Infinity", "2024-01-02T03:04:05Z ", "|", "\uff11", "\u0663"),
        ]
    ),
    max_size=12,
).map("".join)


@settings(max_examples=1000)
@given(
    st.lists(_tricky_line, max_size=8),
    st.one_of(st.just(NAMES), st.sets(st.sampled_from(_TRICKY_NAMES)).map(tuple)),
)
@example(["x=-loss=1"], ("-loss",))  # a sign, then `loss`: no `-loss`
@example(["a=1 =2"], ("1",))  # a value, then no name
@example(["a=e5x=3"], ("e5x",))  # a=e5, then x=3
@example(["a=inf=3"], ("inf",))
@example(["x=1loss=2"], ("loss",))  # upstream finds loss=2 right after the value
@example(["loss=\uff11 accuracy=\u06630"], NAMES)  # Go's `\d` is ASCII
def test_runs_equal_upstream_line_by_line(lines: list[str], names: tuple[str, ...]) -> None:
    """`parse_runs` (the path big logs take: one literal-led scan per metric name where that
    is exact) gives, per name, the values upstream's per-line regex gives, in order."""
    text = "\n".join(lines) + "\n"
    upstream = re.compile(  # ASCII: Go's `\d`, `\w` and `\s` are
        r"([\w|-]+)\s*=\s*([+-]?(?:(?i:inf(?:inity)?|nan)(?![\w|-])|\d*(\.\d+)?([Ee][+-]?\d+)?))",
        re.ASCII,
    )
    expected: dict[str, list[str]] = {}
    for line in text.split("\n"):
        for m in upstream.finditer(line):
            name, value = m.group(1).strip(), m.group(2).strip()
            if value not in ("", "+", "-") and name in names:
                expected.setdefault(name, []).append(value)
    for budget in (parsing.STRING_SCAN_BUDGET, 0):  # string methods, then the regexes
        got: dict[str, list[str]] = {}
        with _string_scan_budget(budget):
            for name, _, values in TextParser(names).parse_runs(text):
                got.setdefault(name, []).extend(values)
        assert got == expected, budget


@contextlib.contextmanager
def _string_scan_budget(chars: int) -> Iterator[None]:
    """Parsers made inside scan `chars` characters by `literalscan`, then by the regexes."""
    saved, parsing.STRING_SCAN_BUDGET = parsing.STRING_SCAN_BUDGET, chars
    try:
        yield
    finally:
        parsing.STRING_SCAN_BUDGET = saved


def test_a_parser_takes_the_regexes_once_its_string_budget_is_spent() -> None:
    with _string_scan_budget(30):
        parser = TextParser(["loss"])
        block = "loss=1\n" * 3  # 21 characters
        assert parser.parse_runs(block) == [("loss", 0.0, ["1", "1", "1"])]
        assert parser._literal_patterns is None  # by string methods
        assert parser.parse_runs(block) == [("loss", 0.0, ["1", "1", "1"])]
        assert parser._literal_patterns is not None  # 42 > 30: by the regexes


_SCAN_NAMES = ("loss", "l", "ss", "acc", "x_1", "Val-acc|y")
_scan_text = st.lists(
    st.sampled_from(
        [
            *_SCAN_NAMES,
            *("x", "=", " ", "\t", "\n", "\r", "\f", "0", "1.5", "-", "+", "e3", "E", "."),
            *("inf", "Infinity", "NaN", "|", "_", "\u00e9", "\uff11", "\u0130nf"),
        ]
    ),
    max_size=14,
).map("".join)


@settings(max_examples=1000)
@given(_scan_text, st.sampled_from(_SCAN_NAMES))
@example("xloss=1", "loss")  # after a name character: the caller needs the exact regex
@example("loss=1loss=2", "loss")
@example("loss=infinityx loss=Inf", "loss")
@example("loss = .5e+3.2", "loss")
def test_literal_scan_finds_what_the_name_regexes_find(text: str, name: str) -> None:
    after = parsing.name_after_name(name).search(text) is not None
    found = literalscan.values(text, name)
    assert found is None if after else found == parsing.name_values(name).findall(text)


@given(st.text(alphabet="0123456789-T\n x\uff11", max_size=30))
@example("2024-01-02T03")
@example("x\n2024-01-02T")
@example("x\n2024-01-0\uff11T")
def test_timestamp_check_by_string_methods_agrees_with_the_regex(text: str) -> None:
    assert parsing._has_timestamp(text, by_strings=True) is parsing._has_timestamp(text)


# The name rules as regexes (ASCII, as the default format's): the string checks that replaced
# them at import must agree on every name.
_NAME_RE = re.compile(r"[\w|-]+", re.ASCII)
_SAFE_NAME_RE = re.compile(r"[^\W\d][\w|-]*", re.ASCII)
_EXPONENT_START_RE = re.compile(r"[Ee][+-]?[0-9]")


@given(st.text(alphabet="aeEzZ_09|-+.=é１ \n", max_size=6))
@example("e-5")
@example("E+1")
@example("é")
@example("loss\n")
def test_name_checks_agree_with_the_regexes_they_replace(name: str) -> None:
    assert parsing._is_name(name) == bool(_NAME_RE.fullmatch(name))
    assert parsing._exponent_start(name) == bool(_EXPONENT_START_RE.match(name))
    expected = (
        bool(_NAME_RE.fullmatch(name))
        and bool(_SAFE_NAME_RE.fullmatch(name))
        and not _EXPONENT_START_RE.match(name)
        and name.lower() not in ("inf", "infinity", "nan")
    )
    assert parsing._literal_safe(name) == expected


def test_literal_scan_is_taken_for_plain_names_only() -> None:
    """The fast per-name scan is used when every name is safe for it, else the exact regex."""
    assert TextParser(NAMES).literal is not None
    for tricky in ("e5x", "inf", "NaN", "-loss", "1", "9lives"):
        assert TextParser([*NAMES, tricky]).literal is None, tricky
    assert TextParser(NAMES, [r"(\w+)=(\S+)"]).literal is None
