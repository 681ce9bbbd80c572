"""kubetune.lightjson gives json's answers: the same values, text and errors."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kubetune import lightjson

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to itself (json reads NaN back as NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(values)
def test_dumps_and_loads_of_any_value_match_json(value: Any) -> None:
    assert lightjson.dumps(value) == json.dumps(value)
    compact = (",", ":")
    text = lightjson.dumps(value, separators=compact)
    assert text == json.dumps(value, separators=compact)
    assert _same(lightjson.loads(text), json.loads(text))
    assert _same(lightjson.loads(text.encode()), json.loads(text.encode()))


def _outcome(load: Any, text: str | bytes) -> tuple[str, Any]:
    try:
        return "value", load(text)
    except ValueError as exc:
        return type(exc).__name__, str(exc)


@given(st.text(alphabet=' \t\n\r{}[]":,.-+eE0123456789truefalsnNaIiy\\u\ufeff'))
@example("")
@example(" 1 ")
@example("1 2")
@example("\ufeff{}")
@example('{"a": 1} x')
@example("NaN")
@example("-Infinity")
def test_loads_of_any_text_answers_as_json(text: str) -> None:
    got, want = _outcome(lightjson.loads, text), _outcome(json.loads, text)
    assert got[0] == want[0]
    assert got[0] != "value" or _same(got[1], want[1])
    assert got[0] == "value" or got[1] == want[1]


@pytest.mark.parametrize(
    "data",
    [
        '{"a": ["b", 1.5]}'.encode("utf-16"),
        '{"a": 1}'.encode("utf-32-le"),
        '{"a": 1}'.encode("utf-8-sig"),
        '{"é": "ü"}'.encode(),
        bytearray(b'{"a": null}'),
    ],
)
def test_loads_of_bytes_in_any_encoding_json_reads(data: bytes) -> None:
    assert lightjson.loads(data) == json.loads(data)


def test_object_hook_sees_every_object_innermost_first() -> None:
    seen: list[dict[str, Any]] = []

    def hook(obj: dict[str, Any]) -> Any:
        seen.append(dict(obj))
        return {"n": len(obj)}

    text = '{"a": {"b": 1, "c": 2}, "d": [{}]}'
    assert lightjson.loads(text, object_hook=hook) == {"n": 2}
    assert seen == [{"b": 1, "c": 2}, {}, {"a": {"n": 2}, "d": [{"n": 0}]}]


def test_dumps_refuses_what_json_refuses_and_calls_default() -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        lightjson.dumps({"a": {1}})
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        lightjson.dumps(loop)
    assert lightjson.dumps({"a": {1}}, default=str) == json.dumps({"a": {1}}, default=str)
