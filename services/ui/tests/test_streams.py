"""The live event streams against the real API server: many streams fed from the one watch,
and bounded (topics per stream, streams per client, streams in all)."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from conftest import Proxy

from kubetune.kube import EXPERIMENTS, Kube
from kubetune_testkit import builders
from kubetune_testkit.uipaths import events_path
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


class Stream:
    """One `/api/events` request: its status, its message when refused, its events."""

    def __init__(self, base: str, topics: list[str], headers: dict[str, str] | None = None):
        where = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=60)
        self.connection.request("GET", events_path(topics), headers=headers or {})
        self.response = self.connection.getresponse()
        self.status = self.response.status
        self.message = "" if self.status == 200 else json.loads(self.response.read())["message"]

    def event(self) -> str:
        """The next event's name (keep-alive comments skipped)."""
        name = ""
        while True:
            line = self.response.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line == "" and name:
                return name

    def close(self) -> None:
        self.connection.close()


@pytest.fixture
def streams() -> Iterator[Callable[..., Stream]]:
    with ExitStack() as stack:

        def open_stream(*args: object, **kw: object) -> Stream:
            stream = Stream(*args, **kw)  # type: ignore[arg-type]
            stack.callback(stream.close)
            return stream

        yield open_stream


def test_many_topics_or_unknown_topics_are_refused(
    start_ui: Callable[..., str], streams: Callable[..., Stream]
) -> None:
    """The reproduced attack sent 300 topics a stream; a page sends one."""
    base = start_ui()
    many = streams(base, [f"trial/ns/t{i}" for i in range(300)])
    assert many.status == 400 and "--max-topics-per-stream" in many.message, many.message
    for topics in ([], ["nonsense"], ["trial/ns"], ["experiment/NS/x"]):
        refused = streams(base, topics)
        assert refused.status == 400 and "topic" in refused.message, (topics, refused.message)
    assert streams(base, ["experiments"] * 20).status == 200  # the same topic once


def test_streams_per_client_and_in_all_are_capped(
    start_ui: Callable[..., str], streams: Callable[..., Stream], proxy: Proxy
) -> None:
    base = start_ui(proxy.flag, "--max-streams-per-client=2", "--max-streams=4")
    first, second = streams(base, ["experiments"]), streams(base, ["experiments"])
    assert (first.status, second.status) == (200, 200)
    third = streams(base, ["experiments"])
    assert third.status == 429 and "--max-streams-per-client" in third.message, third.message
    # A user named without the proof is the same client as its address ...
    forged = streams(base, ["experiments"], {"X-Forwarded-User": "mallory"})
    assert forged.status == 429 and "--max-streams-per-client" in forged.message

    # ... the proxy's proven users are clients of their own (all share the proxy's address).
    def user(name: str) -> dict[str, str]:
        return {"X-Kubetune-Proxy-Secret": proxy.secret, "X-Forwarded-User": name}

    assert streams(base, ["experiments"], user("alice")).status == 200
    assert streams(base, ["experiments"], user("bob")).status == 200
    full = streams(base, ["experiments"], user("carol"))
    assert full.status == 429 and "(--max-streams)" in full.message, full.message
    # A closed stream gives its place back.
    first.close()
    assert second.event() == "hello"

    def reopened() -> Stream | None:
        stream = streams(base, ["experiments"], user("carol"))
        return stream if stream.status == 200 else None

    # The server learns of the closed connection a moment later: try until it has.
    again = wait_for("the closed stream's place given back", reopened, interval=0.2)
    assert again.event() == "hello"


def test_one_change_reaches_every_stream_of_its_topic(
    kube: Kube, namespace: str, start_ui: Callable[..., str], streams: Callable[..., Stream]
) -> None:
    base = start_ui(f"--watch-namespace={namespace}")
    listening = [streams(base, ["experiments"]) for _ in range(5)]
    listening.append(streams(base, [f"experiment/{namespace}/live", "experiments"]))
    for stream in listening:
        assert stream.event() == "hello"
    kube.create(EXPERIMENTS, builders.experiment("live", namespace), namespace)
    assert [s.event() for s in listening] == ["change"] * len(listening)
