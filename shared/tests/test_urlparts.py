"""`urlparts` gives what `urllib.parse` gives for the paths, queries and hosts kubetune builds."""

from __future__ import annotations

import urllib.parse

import pytest

from kubetune import urlparts

TEXTS = [
    "",
    "plain-name.v1",
    "a b",
    "a+b&c=d",
    "slash/and%percent",
    "?#[]@!$'()*,;:",
    "tilde~under_score",
    "ünïcödé",
    "日本語",
    "emoji 🎛",
    "\x00\x01\n\t\x7f",
    "labelSelector=app in (a,b)",
]


@pytest.mark.parametrize("text", TEXTS)
def test_quote_is_urllibs_quote_with_nothing_safe(text: str) -> None:
    assert urlparts.quote(text) == urllib.parse.quote(text, safe="")


def test_query_string_is_urllibs_urlencode() -> None:
    pairs = [(t, t[::-1]) for t in TEXTS] + [("watch", "true"), ("limit", "500")]
    assert urlparts.query_string(pairs) == urllib.parse.urlencode(pairs)
    assert urlparts.query_string([]) == ""


@pytest.mark.parametrize(
    "url",
    [
        "https://10.96.0.1:443",
        "https://10.96.0.1",
        "https://kubernetes.default.svc:6443/",
        "https://Kubernetes.Default.SVC:8443/api?x=1#f",
        "https://[fd00::1]:6443",
        "https://[FD00::1]",
        "https://user@host:1/path",
        "https://host:/",
    ],
)
def test_host_and_port_are_urlsplits(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    assert urlparts.host_and_port(url) == (parts.hostname, parts.port or 443)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("10.96.0.1:443", "not an absolute URL"),
        ("https://[fd00::1:6443", "unclosed"),
        ("https://host:http", "not a number"),
        ("https://host:99999", "not a number"),
    ],
)
def test_bad_urls_are_refused_with_the_reason(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        urlparts.host_and_port(url)
