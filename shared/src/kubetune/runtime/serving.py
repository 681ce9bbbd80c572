"""The probe and metrics endpoint every service exposes: /healthz, /readyz, /metrics."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

Check = Callable[[], bool]

MAX_CONNECTIONS = 16
"""Connections served at once (a thread each); more are closed unanswered, so a flood of the
port costs at most this many threads."""
TIMEOUT = 5.0
"""Seconds a connection may take to send its request and take the answer (a silent or slow
client would otherwise hold its thread for good)."""


class ProbeServer(ThreadingHTTPServer):
    """Serves with no timer: `socketserver`'s loop wakes every half second by default to look
    for a shutdown, which in an idle controller is most of its wakes. Here it sleeps until a
    connection comes, and `shutdown` connects to wake it (again until the loop has ended: a
    connection that came before the shutdown request was seen is served as a normal one).
    At most `MAX_CONNECTIONS` are served at once, each within `TIMEOUT`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def serve(self) -> None:
        self.serve_forever(poll_interval=None)  # type: ignore[arg-type]

    def shutdown(self) -> None:
        waiting = threading.Thread(target=super().shutdown, name="probes-shutdown", daemon=True)
        waiting.start()
        host, port = self.server_address[:2]
        while waiting.is_alive():
            with contextlib.suppress(OSError):
                socket.create_connection((str(host), port), timeout=1).close()
            waiting.join(0.05)


def serve_probes(address: str, port: int, *, healthy: Check, ready: Check) -> ProbeServer:
    """Start the probe server in a daemon thread; the caller shuts it down."""

    class _Handler(BaseHTTPRequestHandler):
        timeout = TIMEOUT

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body, status, kind = generate_latest(REGISTRY), 200, CONTENT_TYPE_LATEST
            elif path in ("/healthz", "/livez"):
                ok = healthy()
                body, status, kind = (
                    (b"ok" if ok else b"unhealthy"),
                    (200 if ok else 500),
                    "text/plain",
                )
            elif path == "/readyz":
                ok = ready()
                body, status, kind = (
                    (b"ok" if ok else b"not ready"),
                    (200 if ok else 503),
                    "text/plain",
                )
            else:
                body, status, kind = b"not found", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

    server = ProbeServer((address, port), _Handler)
    threading.Thread(target=server.serve, name="probes", daemon=True).start()
    return server
