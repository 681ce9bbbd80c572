"""Web UI figure: memory under a flood of live event streams, and how many the caps refuse.

Replays the reproduced attack from one client on loopback: `--streams` (2,000) `/api/events`
streams of `--topics` (300) topics each, opened at once and held; then the same number of
one-topic streams (what a page opens), which the per-client cap stops. Prints the UI process's
RSS before and after each round and the answers counted by status. With `--uncapped`, a third
round runs against a UI started with every cap raised to the flood's size, to show what one
stream costs now that all its topics share one subscriber. Every round ends by itself: each
connection has a 10 s timeout, and all are closed after the round. No asserts.

    python bench/ui_streams.py [--kubeconfig $KUBECONFIG] [--streams 2000] [--topics 300]

Run it in the `ui` tox env (`.tox/ui/bin/python bench/ui_streams.py`). Without a kubeconfig it
starts its own local cluster and stops it after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from ui_page_load import http_status, on_a_cluster

from kubetune.kube import Kube, connect
from kubetune_testkit.crds import install_kubetune_crds
from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.uipaths import events_path
from kubetune_testkit.waiting import wait_for

HOST = "127.0.0.1"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def open_stream(
    port: int, path: str, gate: asyncio.Semaphore
) -> tuple[int, asyncio.StreamWriter | None]:
    """One GET /api/events; its status, and the connection while it is open (a 200)."""
    async with gate:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 10)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), 10)
        except (OSError, TimeoutError):
            return 0, None
    status = int(line.split()[1]) if line.startswith(b"HTTP/") else 0
    if status != 200:
        writer.close()
        return status, None
    return status, writer


async def flood(port: int, pid: int, streams: int, topics: int, what: str) -> None:
    path = events_path(f"trial/bench/t{i:04d}" for i in range(topics))
    before = rss_mb(pid)
    gate = asyncio.Semaphore(200)
    t0 = time.perf_counter()
    answers = await asyncio.gather(*(open_stream(port, path, gate) for _ in range(streams)))
    took = time.perf_counter() - t0
    await asyncio.sleep(1.0)
    after = rss_mb(pid)
    counts = Counter(status for status, _ in answers)
    for _, writer in answers:
        if writer is not None:
            writer.close()
    await asyncio.sleep(2.0)
    settled = rss_mb(pid)
    by_status = ", ".join(f"{n} x {s or 'no answer'}" for s, n in sorted(counts.items()))
    print(
        f"{what}: {streams} streams x {topics} topics in {took:.1f}s: {by_status}; "
        f"refused {streams - counts[200]}; UI RSS {before:.0f} MB before, {after:.0f} MB with "
        f"the streams open, {settled:.0f} MB after closing them"
    )


def start_ui(kubeconfig: str, log: Path, *flags: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    with log.open("ab") as out:
        ui = subprocess.Popen(
            [console_script("kubetune-ui"), f"--kubeconfig={kubeconfig}", f"--port={port}",
             f"--address={HOST}", "--writes=off", *flags],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    wait_for(
        "the UI's caches", lambda: http_status(f"http://{HOST}:{port}/readyz") == 200, timeout=120
    )
    return ui, port


def measure(kubeconfig: str, streams: int, topics: int, uncapped: bool) -> None:
    install_kubetune_crds(Kube(connect(kubeconfig)))  # the UI is ready once it watches them
    log = Path(tempfile.mkdtemp(prefix="bench-ui-streams-")) / "ui.log"
    ui, port = start_ui(kubeconfig, log)
    try:
        print(f"UI with the default caps (log {log}):")
        asyncio.run(flood(port, ui.pid, streams, topics, "  the attack"))
        asyncio.run(flood(port, ui.pid, streams, 1, "  one-topic streams"))
    finally:
        ui.terminate()
        ui.wait(20)
    if not uncapped:
        return
    raised = (f"--max-streams={streams}", f"--max-streams-per-client={streams}",
              f"--max-topics-per-stream={topics}")  # fmt: skip
    ui, port = start_ui(kubeconfig, log, *raised)
    try:
        print(f"UI with the caps raised ({' '.join(raised)}):")
        asyncio.run(flood(port, ui.pid, streams, topics, "  the attack"))
    finally:
        ui.terminate()
        ui.wait(20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--uncapped", action="store_true", help="also a round with caps raised")
    args = parser.parse_args()
    on_a_cluster(
        args.kubeconfig,
        lambda kubeconfig: measure(kubeconfig, args.streams, args.topics, args.uncapped),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
