"""The probe and metrics endpoint every service exposes: /healthz, /readyz, /metrics."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

Check = Callable[[], bool]


def serve_probes(address: str, port: int, *, healthy: Check, ready: Check) -> ThreadingHTTPServer:
    """Start the probe server in a daemon thread; the caller shuts it down."""

    class _Handler(BaseHTTPRequestHandler):
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

    server = ThreadingHTTPServer((address, port), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    return server
