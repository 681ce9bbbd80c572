"""`json.loads` and `json.dumps` through CPython's C accelerator `_json` alone.

Why: `import json` imports `re` (and with it `enum`, `functools` and `collections`) and
compiles seven regular expressions, about a tenth of the instructions a trial pod's collector
spends before it waits; json's Python layer only hands the work to `_json` anyway. Results are
the standard library's, bit for bit: what the fast path cannot parse (a BOM, UTF-16 or UTF-32
bytes, invalid JSON) goes to `json.loads`, imported then, which raises its own error.
"""

from __future__ import annotations

import _json

from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"
_BOMS = (b"\xff\xfe", b"\xfe\xff")  # UTF-16's (UTF-32's also hold a NUL)
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """The attributes `_json.make_scanner` reads, as `json.JSONDecoder()` sets them."""

    strict = True
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__

    def __init__(self, object_hook: Callable[[dict[str, Any]], Any] | None) -> None:
        self.object_hook = object_hook


def _scanner(object_hook: Callable[[dict[str, Any]], Any] | None) -> _json.make_scanner:
    # typeshed asks for a scanner; the C code reads only the context's attributes.
    return _json.make_scanner(_Context(object_hook))  # type: ignore[arg-type]


_PLAIN_SCANNER = _scanner(None)


def _standard_loads(text: str | bytes, object_hook: Callable[[dict[str, Any]], Any] | None) -> Any:
    import json

    return json.loads(text, object_hook=object_hook)


def loads(text: str | bytes, *, object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """`json.loads(text, object_hook=object_hook)`."""
    if isinstance(text, bytes | bytearray):
        # UTF-8 without a BOM has no NUL among its first bytes; json's detect_encoding then
        # answers utf-8 too. Everything else is the standard library's to read.
        if b"\x00" in text[:4] or text[:2] in _BOMS or text[:3] == b"\xef\xbb\xbf":
            return _standard_loads(text, object_hook)
        text = text.decode("utf-8", "surrogatepass")
    scan = _PLAIN_SCANNER if object_hook is None else _scanner(object_hook)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = scan(text, start)
    except StopIteration:
        return _standard_loads(text, object_hook)
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return _standard_loads(text, object_hook)
    return value


def _unserializable(value: object) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps(
    value: Any,
    *,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
) -> str:
    """`json.dumps(value, separators=separators, default=default)`."""
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    encode = _json.make_encoder(
        {},  # markers: circular references raise ValueError, as json's check_circular
        default or _unserializable,
        _json.encode_basestring_ascii,
        None,  # indent
        separators[1],
        separators[0],
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
    return "".join(encode(value, 0))
