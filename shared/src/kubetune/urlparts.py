"""Percent-encoding of path segments and query strings, and the host and port of an https URL.

Why not `urllib.parse`: it loads `ipaddress` with it, and with `pathlib` (which loads it too)
about 3 ms of CPU at every start of the metrics collector, in every trial pod, for the three
functions below. They give what `urllib.parse.quote(text, safe="")`, `urlencode(pairs)` and
`urlsplit(url).hostname/.port` give for the URLs kubetune builds (the tests compare them).
"""

from __future__ import annotations

from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")
_HEX = "0123456789ABCDEF"


def quote(text: str, *, plus: bool = False) -> str:
    """`text` as UTF-8 with every byte but the unreserved ones (RFC 3986: letters, digits,
    `-._~`) written `%XX`; `plus` writes a space as `+` (form encoding, for query strings)."""
    if text.isascii() and all(ord(c) in _UNRESERVED for c in text):
        return text  # names and values that need no escaping: the usual case
    out: list[str] = []
    for byte in text.encode("utf-8"):
        if byte in _UNRESERVED:
            out.append(chr(byte))
        elif plus and byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{_HEX[byte >> 4]}{_HEX[byte & 15]}")
    return "".join(out)


def query_string(pairs: Iterable[tuple[str, str]]) -> str:
    """`name=value&...` with both sides form-encoded (`quote(..., plus=True)`)."""
    return "&".join(f"{quote(str(k), plus=True)}={quote(str(v), plus=True)}" for k, v in pairs)


def host_and_port(url: str, default_port: int = 443) -> tuple[str, int]:
    """The host (lower-cased, without IPv6 brackets) and port of `scheme://host[:port][/...]`.

    Raises:
        ValueError: no `scheme://`, an unclosed `[`, or a port that is not a number in 0-65535.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise ValueError(f"not an absolute URL: {url!r}")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    if authority.startswith("["):
        host, bracket, after = authority[1:].partition("]")
        if not bracket:
            raise ValueError(f"unclosed '[' in {url!r}")
        port_text = after[1:] if after.startswith(":") else ""
    else:
        host, _, port_text = authority.partition(":")
    if not port_text:
        return host.lower(), default_port
    if not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"port {port_text!r} of {url!r} is not a number in 0-65535")
    return host.lower(), int(port_text)
