"""The HTTPS server: a thread per connection (HTTP/1.1 keep-alive, as the API server uses it).

TLS happens in the connection's thread, with the SSL context current at that moment:
`CertificateStore` re-reads the cert/key pair when either file changes (checked at most every
`check_interval` seconds, on the next connection), so a rotated certificate (cert-manager or a
Secret update) is served without a restart; a pair that does not load keeps the previous one.

Bodies above `max_body` bytes are refused with HTTP 400 without being read, and the connection
is closed; a missing Content-Length is HTTP 400 too. Neighbours: `reviewing` (what to answer).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Handler = Callable[[str, bytes], tuple[int, dict[str, Any]]]
DEFAULT_MAX_BODY = 4 * 1024 * 1024
"""An object is at most ~1.5 MiB in etcd; a review carries object and oldObject."""


class CertificateStore:
    """The SSL context of the current cert/key files."""

    def __init__(self, cert_file: str, key_file: str, check_interval: float = 1.0) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.check_interval = check_interval
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._stamp: tuple[object, ...] | None = None
        self._checked = 0.0
        self.loads = 0

    def _files_stamp(self) -> tuple[object, ...]:
        stamp: list[object] = []
        for name in (self.cert_file, self.key_file):
            st = os.stat(name)
            stamp += [st.st_ino, st.st_mtime_ns, st.st_size]
        return tuple(stamp)

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context

    def context(self) -> ssl.SSLContext:
        """The current context, reloaded when the files changed.

        Raises:
            OSError, ssl.SSLError: no pair has ever loaded.
        """
        now = time.monotonic()
        with self._lock:
            if self._context is not None and now - self._checked < self.check_interval:
                return self._context
            self._checked = now
            try:
                stamp = self._files_stamp()
                if stamp != self._stamp or self._context is None:
                    self._context = self._load()
                    self._stamp = stamp
                    self.loads += 1
                    log.info("loaded serving certificate %s", self.cert_file)
            except (OSError, ssl.SSLError) as e:
                if self._context is None:
                    raise
                log.warning("keeping the previous certificate, cannot load the new one: %s", e)
            return self._context

    def ready(self) -> bool:
        try:
            self.context()
        except (OSError, ssl.SSLError):
            return False
        return True


class AdmissionServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        certs: CertificateStore,
        handler: Handler,
        *,
        max_body: int = DEFAULT_MAX_BODY,
        idle_timeout: float = 60.0,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.certs = certs
        self.handler = handler
        self.max_body = max_body
        self.idle_timeout = idle_timeout
        self.ready = ready or certs.ready
        super().__init__(address, _RequestHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        sock: socket.socket = request
        try:
            # Small writes must leave at once: with Nagle and the peer's delayed ACK every
            # answer would wait ~40 ms.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            context = self.certs.context()
            sock.settimeout(10.0)
            tls = context.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError) as e:
            log.debug("TLS handshake with %s failed: %s", client_address, e)
            return
        try:
            tls.settimeout(self.idle_timeout)
            _RequestHandler(tls, client_address, self)
        finally:
            with contextlib.suppress(OSError):
                tls.close()


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # headers and body leave in one write (flushed after each request)
    server: AdmissionServer
    server_version = "kubetune-webhook"

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send(status, json.dumps({"error": message}).encode())
        if self.close_connection:
            self._linger()

    def _linger(self, budget: float = 1.0, limit: int = 1 << 20) -> None:
        """Read (and drop) what the client is still sending before we close, for a moment:
        closing a socket with unread data resets the connection, and the client could lose
        the answer that explains why."""
        self.wfile.flush()
        deadline = time.monotonic() + budget
        seen = 0
        try:
            self.connection.settimeout(0.05)
            while seen < limit and time.monotonic() < deadline:
                chunk = self.connection.recv(65536)
                if not chunk:
                    return
                seen += len(chunk)
        except (OSError, ssl.SSLError):
            return

    def _discard(self, length: int) -> bool:
        """Read and drop `length` body bytes; False when the client went away."""
        while length > 0:
            chunk = self.rfile.read(min(length, 65536))
            if not chunk:
                return False
            length -= len(chunk)
        return True

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/healthz", "/livez"):
            self._send(200, b"ok", "text/plain")
        elif path == "/readyz":
            ok = self.server.ready()
            self._send(200 if ok else 503, b"ok" if ok else b"not ready", "text/plain")
        else:
            self._error(404, f"no such path {path}")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length_header is None:
            self.close_connection = True
            self._error(400, "a Content-Length header is required (no chunked bodies)")
            return
        try:
            length = int(length_header)
        except ValueError:
            self.close_connection = True
            self._error(400, f"bad Content-Length {length_header!r}")
            return
        if length < 0 or length > self.server.max_body:
            # A body up to 16 times the limit is read and dropped so the connection stays
            # usable; a larger one is not read at all and the connection is closed.
            if 0 <= length <= 16 * self.server.max_body:
                if not self._discard(length):
                    self.close_connection = True
                    return
            else:
                self.close_connection = True
            self._error(
                400,
                f"request body of {length} bytes exceeds the limit of {self.server.max_body} bytes",
            )
            return
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            return
        started = time.perf_counter()
        status, answer = self.server.handler(path, body)
        self._send(status, json.dumps(answer).encode())
        log.debug(
            "%s %s -> %d in %.1f ms",
            self.command,
            path,
            status,
            (time.perf_counter() - started) * 1e3,
        )

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        log.debug("%s " + format, self.client_address[0], *args)


def serve(server: AdmissionServer) -> threading.Thread:
    """Serve in a daemon thread; stop with `server.shutdown()`."""
    thread = threading.Thread(target=server.serve_forever, name="webhook", daemon=True)
    thread.start()
    return thread


def certificate_files_exist(cert_file: str, key_file: str) -> bool:
    return Path(cert_file).is_file() and Path(key_file).is_file()
