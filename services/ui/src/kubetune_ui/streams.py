"""The live change streams (`/api/events`), bounded: topics per stream, streams per client,
streams in all.

Every stream is one subscriber of the cache's Hub (one flag, however many topics), so an open
stream costs a connection and a few small objects; the caps bound how many there can be. A
stream past a cap is refused before it opens (429 for a count, 400 for a bad topic list), with
the flag that sets the limit in the message.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from kubetune import naming
from kubetune_ui.cache import Hub, Subscriber
from kubetune_ui.writing import Refused

KEEPALIVE = 15.0
COALESCE = 0.3
"""Seconds to gather more changes before telling the page (at most ~3 notices a second)."""
_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
TOPIC = re.compile(rf"experiments|(experiment|trial)/{_NAME}/{_NAME}")
"""The topics the pages subscribe to: `experiments`, `experiment/<ns>/<name>`,
`trial/<ns>/<name>` (Kubernetes object names)."""


@dataclass(frozen=True)
class Limits:
    """The caps, from the flags of the same names."""

    streams: int = 1000
    """--max-streams: open streams in all."""
    per_client: int = 32
    """--max-streams-per-client: by the proxy's proven user, else by the peer address."""
    topics: int = 8
    """--max-topics-per-stream (a page uses one)."""


@dataclass
class Streams:
    """Counts the open streams and refuses one past a cap."""

    hub: Hub
    limits: Limits = field(default_factory=Limits)
    _open: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def topics(self, asked: list[str]) -> frozenset[str]:
        """The topics to subscribe to (the experiment's trials' label with an experiment)."""
        unique = list(dict.fromkeys(asked))
        if not unique:
            raise Refused(400, "topic: give at least one (?topic=experiments)")
        if len(unique) > self.limits.topics:
            raise Refused(
                400,
                f"topic: {len(unique)} topics, more than the {self.limits.topics} one stream may "
                "have (--max-topics-per-stream)",
            )
        expanded = set(unique)
        for topic in unique:
            if not TOPIC.fullmatch(topic):
                raise Refused(
                    400,
                    f"topic: {topic[:80]!r} is not one of experiments, experiment/<namespace>/"
                    "<name>, trial/<namespace>/<name>",
                )
            kind, _, rest = topic.partition("/")
            if kind == "experiment":
                ns, _, name = rest.partition("/")
                expanded.add(f"experiment-label/{ns}/{naming.label_value(name)}")
        return frozenset(expanded)

    def admit(self, client: str) -> None:
        """Counts a stream for `client`; refuses (429) past a cap."""
        with self._lock:
            total = sum(self._open.values())
            if total >= self.limits.streams:
                raise Refused(
                    429,
                    f"too many live streams: {total} open, the most this UI serves "
                    "(--max-streams); close other tabs or try again later",
                )
            if self._open[client] >= self.limits.per_client:
                raise Refused(
                    429,
                    f"too many live streams from you: {self._open[client]} open, the most one "
                    "client may have (--max-streams-per-client); close other tabs",
                )
            self._open[client] += 1

    def release(self, client: str) -> None:
        with self._lock:
            self._open[client] -= 1
            if self._open[client] <= 0:
                del self._open[client]

    def open(self, client: str, topics: list[str]) -> StreamingResponse:
        """The event stream for `topics`, or Refused (nothing is counted then)."""
        wanted = self.topics(topics)
        self.admit(client)
        return _EventStream(self, client, wanted)


class _EventStream(StreamingResponse):
    """A server-sent event stream that gives its place back however it ends (even when the
    client left before the first byte, when the body generator never runs)."""

    def __init__(self, streams: Streams, client: str, topics: frozenset[str]) -> None:
        self._streams, self._client = streams, client
        self._subscriber: Subscriber | None = None
        self._topics = topics
        super().__init__(
            self._events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self._subscriber is not None:
                self._streams.hub.unsubscribe(self._subscriber)
            self._streams.release(self._client)

    async def _events(self) -> AsyncIterator[str]:
        """`change` events, coalesced, with keep-alives."""
        subscriber = self._subscriber = self._streams.hub.subscribe(self._topics)
        names = json.dumps(sorted(self._topics))
        yield "retry: 2000\nevent: hello\ndata: {}\n\n"
        while True:
            try:
                await asyncio.wait_for(subscriber.changed.wait(), KEEPALIVE)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            await asyncio.sleep(COALESCE)
            subscriber.changed.clear()
            yield f"event: change\ndata: {names}\n\n"


def client_of(request: Request, user: str | None) -> str:
    """Whom a stream counts against: the proxy's proven user, else the peer's address."""
    if user is not None:
        return f"user:{user}"
    return f"addr:{request.client.host if request.client else '?'}"
