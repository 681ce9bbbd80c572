"""Collector kind `PrometheusMetric`: scrape the training's metrics endpoint while it runs.

The endpoint is the collector source's `httpGet` (scheme, port, path; the pod shares one
network namespace, so the sidecar asks 127.0.0.1). Each scrape is one value per metric: a
sample whose name is a wanted metric (the first series of that name when several carry
labels), or, with `--filter` regexes, every match on the exposition's lines as for TEXT logs.
The training's endpoint goes away when it exits, so the last successful scrape before that is
the `latest` value; a failed scrape is logged once per cause and retried at the next interval.
A scrape is bounded in time and in size (a runaway exposition cannot fill the sidecar's memory).
"""

from __future__ import annotations

import math
import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence

from kubetune import lightlog, observations
from kubetune_pns_collector import parsing

log = lightlog.get(__name__)

Run = parsing.Run

MAX_BODY = 4 << 20
# name{labels} value [timestamp]; labels may hold spaces and braces inside quotes.
_SAMPLE = re.compile(
    r"^([A-Za-z_:][A-Za-z0-9_:]*)"  # name
    r'(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?'  # labels
    r"[ \t]+(\S+)(?:[ \t]+\S+)?[ \t]*$"  # value [timestamp]
)


# Go's ParseFloat (the exposition format's value grammar) also reads hexadecimal floats.
_HEX_FLOAT = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+", re.ASCII
)


def sample_value(text: str) -> str | None:
    """A sample's value as kubetune's number text (`kubetune.observations.NUMBER_PATTERN`), or
    None. The exposition format's values are Go's ParseFloat's: decimal numbers, `NaN`, `+Inf`,
    `-Inf` (`observations.is_number` reads them all) and hexadecimal floats (written back in
    decimal here); not Python's `float()`, which also takes `1_0` and non-ASCII digits."""
    if observations.is_number(text):
        return text
    if _HEX_FLOAT.fullmatch(text):
        try:
            return repr(float.fromhex(text))
        except OverflowError:  # beyond a float: not finite, as Go's ParseFloat says
            return None
    return None


def parse_exposition(text: str, names: frozenset[str]) -> dict[str, str]:
    """The first sample of each wanted metric in Prometheus' text format (comments skipped,
    NaN and infinities dropped: they cannot be an observation)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None or m.group(1) not in names or m.group(1) in found:
            continue
        value = sample_value(m.group(3))
        if value is not None and observations.parse_number(value) is not None:
            found[m.group(1)] = value
    return found


class PrometheusSource:
    """A `collecting.Source` that scrapes `url` at most once per `interval` seconds."""

    def __init__(
        self,
        url: str,
        names: Sequence[str],
        filters: Sequence[str] = (),
        interval: float = 1.0,
        timeout: float = 5.0,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--metrics-url {url!r}: must start with http:// or https://")
        self.url = url
        self.names = frozenset(names)
        self.text_parser = parsing.TextParser(names, filters) if filters else None
        self.interval = interval
        self.timeout = timeout
        self._last = -math.inf
        self._last_error = ""
        # The training's own endpoint, usually with a self-signed certificate: the collector
        # reads metrics from its own pod, so it does not verify it (as Prometheus' default
        # `insecure_skip_verify` in-cluster setups do).
        self._tls = ssl.create_default_context()
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE

    def scrape(self) -> str | None:
        """The exposition text, None when the endpoint cannot be read now."""
        request = urllib.request.Request(self.url, headers={"Accept": "text/plain"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._tls) as r:
                body: bytes = r.read(MAX_BODY + 1)
        except (urllib.error.URLError, OSError, ValueError) as e:
            error = str(getattr(e, "reason", e))
            if error != self._last_error:
                log.info("cannot scrape %s yet (%s); retrying", self.url, error)
                self._last_error = error
            return None
        self._last_error = ""
        if len(body) > MAX_BODY:
            log.warning("%s answered more than %d bytes; ignoring this scrape", self.url, MAX_BODY)
            return None
        return body.decode("utf-8", "replace")

    def read(self, final: bool) -> Iterator[list[Run]]:
        now = time.monotonic()
        if now - self._last < self.interval and not final:
            return
        self._last = now
        text = self.scrape()
        if text is None:
            return
        if self.text_parser is not None:
            yield self.text_parser.parse_runs(text)
            return
        stamp = 0.0
        yield [(name, stamp, [value]) for name, value in parse_exposition(text, self.names).items()]

    def watch_dirs(self) -> list[str]:
        return []  # nothing to watch: the collector wakes every second and `read` scrapes

    def polled(self) -> bool:
        return True  # `read` itself keeps to the scrape interval

    def close(self) -> None:
        """Nothing is held open between scrapes."""
