"""The HTTPS server: one event-loop thread holds every connection, a fixed pool runs the handler.

Why not a thread per connection: 2,000 idle TLS connections then cost 2,000 threads and 235 MiB,
the liveness probe failed and the webhook went into CrashLoopBackOff, which refused every
Experiment and trial pod (issue 13). Here an open connection costs a socket and an SSL object,
never a thread; only a complete admission request takes a worker, and probes take none.

Bounds (flags in `main`):
- `max_connections` open at once. At the cap a new connection closes the oldest idle one (never
  a request being answered), so idle or half-open connections cannot lock out the API server or
  the kubelet's probes; when none is idle the new one is refused.
- `handshake_timeout` from accept to the end of the TLS handshake; `read_timeout` for a fresh
  connection's first request and for each request from its first byte (slow clients);
  `idle_timeout` between requests on a keep-alive connection; `request_timeout` for a whole
  request (read, answer, write): an answer not ready by then is HTTP 504 and the connection
  closes (the API server gives up after the webhook's timeoutSeconds anyway).
- Bodies above `max_body` get HTTP 413 without being read, headers above `MAX_HEADER` HTTP 431,
  chunked bodies or a POST without Content-Length HTTP 400; each closes the connection. Bodies
  being read or answered hold at most `max_buffered` bytes together (8 largest bodies by
  default): past it HTTP 503, retry, so many connections each sending a large body slowly
  cannot take the memory.
- /healthz, /livez and /readyz are answered on the loop thread, without waiting for a worker.
  `alive` tells a probe server on another port (`main`'s `--probe-port`, plain HTTP: a probe
  there costs the webhook half the CPU of one over TLS, a handshake each) whether the loop
  still turns.

Refused connections, failed handshakes and timed-out clients log one line each (no traceback),
at most `LOG_BURST` lines per kind in `LOG_WINDOW` seconds and then one line with the count
left out, so a flood does not flood the log.

TLS uses the SSL context current at accept: `CertificateStore` re-reads the cert/key pair when
either file changes (checked at most every `check_interval` seconds), so a rotated certificate
(cert-manager or a Secret update) is served without a restart; a pair that does not load keeps
the previous one. Neighbours: `reviewing` (what to answer), `main` (flags).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import json
import logging
import os
import queue
import resource
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Handler = Callable[[str, bytes], tuple[int, dict[str, Any]]]
DEFAULT_MAX_BODY = 4 * 1024 * 1024
"""An object is at most ~1.5 MiB in etcd; a review carries object and oldObject."""
DEFAULT_MAX_CONNECTIONS = 1000
"""Open connections at most; an idle TLS connection costs ~15 KiB here (bench/webhook_latency.py
--flood), so the cap keeps a flood well inside the manifest's 160 MiB."""
DEFAULT_WORKERS = 16
"""Admission requests answered at once; more wait (the API server sends a few at a time)."""
MAX_HEADER = 8 * 1024
LOG_BURST = 10
LOG_WINDOW = 10.0
_TICK = 0.25
"""Seconds between deadline sweeps: timeouts are this precise."""
STALL_SECONDS = 30.0
"""A loop that has not turned for this long (it turns at least every `_TICK`) is not alive."""
_CHUNK = 64 * 1024
_ACCEPT_BATCH = 16
_DRAIN_SECONDS = 1.0
_PROBES = ("/healthz", "/livez", "/readyz")


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


class _State:
    HANDSHAKE = "handshaking"
    IDLE = "idle"
    READING = "reading a request"
    BUSY = "answering"
    WRITING = "writing an answer"
    DRAINING = "closing"


@dataclass
class _Request:
    method: str
    path: str
    length: int
    keep_alive: bool


class _Conn:
    """One client connection; only the loop thread touches it (workers pass back its token)."""

    __slots__ = (
        "close_after",
        "closed",
        "deadline",
        "events",
        "inbuf",
        "out",
        "peer",
        "request",
        "request_deadline",
        "reserved",
        "served",
        "sock",
        "state",
        "tier",
        "token",
    )

    def __init__(self, sock: ssl.SSLSocket, peer: str, deadline: float) -> None:
        self.sock = sock
        self.peer = peer
        self.state = _State.HANDSHAKE
        self.deadline = deadline
        self.request_deadline = deadline
        self.events = 0
        self.inbuf = bytearray()
        self.out = memoryview(b"")
        self.close_after = False
        self.request: _Request | None = None
        self.served = 0
        self.tier: int | None = None
        self.token = 0
        self.reserved = 0
        self.closed = False


class _LogBudget:
    """At most `burst` lines per kind in each `window` seconds; the rest are counted, and the
    count is logged once the window is over. Loop thread only."""

    def __init__(self, burst: int = LOG_BURST, window: float = LOG_WINDOW) -> None:
        self.burst = burst
        self.window = window
        self._kinds: dict[str, list[float]] = {}  # kind -> [window start, lines, left out]

    def line(self, kind: str, level: int, message: str, *args: object) -> None:
        now = time.monotonic()
        state = self._kinds.get(kind)
        if state is None or now - state[0] >= self.window:
            if state is not None:
                self._report(kind, state)
            state = self._kinds[kind] = [now, 0, 0]
        if state[1] < self.burst:
            state[1] += 1
            log.log(level, message, *args)
        else:
            state[2] += 1

    def flush(self) -> None:
        now = time.monotonic()
        for kind, state in list(self._kinds.items()):
            if now - state[0] >= self.window:
                self._report(kind, state)
                del self._kinds[kind]

    def _report(self, kind: str, state: list[float]) -> None:
        if state[2]:
            log.warning(
                "%d more %s lines left out in %.0f s (at most %d per %.0f s)",
                state[2],
                kind,
                self.window,
                self.burst,
                self.window,
            )


def _tls_reason(e: BaseException) -> str:
    """A failed handshake in a few words, with the likely cause."""
    reason = getattr(e, "reason", None)
    if isinstance(e, ssl.SSLEOFError) or reason == "UNEXPECTED_EOF_WHILE_READING":
        return "the client closed the connection during the handshake"
    if reason == "HTTP_REQUEST":
        return "the client sent plain HTTP to this HTTPS port"
    if reason in (
        "TLSV1_ALERT_UNKNOWN_CA",
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
    ):
        return (
            f"the client does not trust the serving certificate ({reason}); check the caBundle "
            "of the webhook configurations"
        )
    if reason:
        return str(reason)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


class AdmissionServer:
    """HTTPS (HTTP/1.1 keep-alive, as the API server uses it) on one loop thread and a pool.

    `serve_forever` runs the loop (see `serve`); `shutdown` stops it from another thread and
    waits; `server_close` closes the listener and every connection.
    """

    def __init__(
        self,
        address: tuple[str, int],
        certs: CertificateStore,
        handler: Handler,
        *,
        max_body: int = DEFAULT_MAX_BODY,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        workers: int = DEFAULT_WORKERS,
        handshake_timeout: float = 5.0,
        read_timeout: float = 5.0,
        idle_timeout: float = 60.0,
        request_timeout: float = 10.0,
        max_buffered: int | None = None,
        ready: Callable[[], bool] | None = None,
        backlog: int = 1024,
    ) -> None:
        for name, value in (
            ("max_body", max_body),
            ("max_connections", max_connections),
            ("workers", workers),
            ("handshake_timeout", handshake_timeout),
            ("read_timeout", read_timeout),
            ("idle_timeout", idle_timeout),
            ("request_timeout", request_timeout),
            ("max_buffered", max_buffered if max_buffered is not None else max_body),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be greater than 0, got {value}")
        self.certs = certs
        self.handler = handler
        self.max_body = max_body
        self.max_connections = _fit_to_file_limit(max_connections, workers)
        self.workers = workers
        self.handshake_timeout = handshake_timeout
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.request_timeout = request_timeout
        self.max_buffered = max_buffered if max_buffered is not None else 8 * max_body
        self._buffered = 0
        self.ready = ready or certs.ready
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._listener = socket.create_server(address, family=family, backlog=backlog)
        self._listener.setblocking(False)
        self.server_address: tuple[str, int] = self._listener.getsockname()[:2]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="webhook-worker")
        self._answers: queue.SimpleQueue[tuple[_Conn, int, int, bytes]] = queue.SimpleQueue()
        self._conns: dict[_Conn, None] = {}
        # Closed first when the cap is reached: never used (handshaking or no request yet),
        # then idle keep-alive, then a request still arriving; oldest first in each.
        self._tiers: tuple[collections.OrderedDict[_Conn, None], ...] = tuple(
            collections.OrderedDict() for _ in range(3)
        )
        self._resume: collections.deque[_Conn] = collections.deque()
        self._logs = _LogBudget()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._accept_paused_until = 0.0
        self._turned = time.monotonic()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    # -- the loop ---------------------------------------------------------------------------

    def serve_forever(self) -> None:
        self._stopped.clear()
        self._turned = time.monotonic()
        try:
            next_sweep = time.monotonic() + _TICK
            while not self._stop.is_set():
                timeout = 0.0 if self._resume else max(0.0, next_sweep - time.monotonic())
                events = self._selector.select(timeout)
                self._turned = time.monotonic()
                # Requests first, then handshakes, then new connections: under a flood of
                # connections the work for admission requests waits the least.
                self._deliver_answers()
                handshakes: list[_Conn] = []
                accept = False
                for key, _ in events:
                    if key.data == "accept":
                        accept = True
                    elif key.data == "wake":
                        with contextlib.suppress(OSError):
                            while self._wake_r.recv(4096):
                                pass
                    elif key.data.state == _State.HANDSHAKE:
                        handshakes.append(key.data)
                    else:
                        self._guarded(self._on_event, key.data)
                self._deliver_answers()
                for _ in range(len(self._resume)):
                    conn = self._resume.popleft()
                    if conn.state == _State.IDLE:
                        self._guarded(self._read, conn)
                for conn in handshakes:
                    self._guarded(self._on_event, conn)
                if accept:
                    self._accept()
                now = time.monotonic()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + _TICK
        finally:
            self._stopped.set()

    def alive(self) -> bool:
        """The loop runs and has turned within `STALL_SECONDS` (a liveness probe's answer)."""
        running = not self._stopped.is_set()
        return running and time.monotonic() - self._turned < STALL_SECONDS

    def shutdown(self) -> None:
        """Stop `serve_forever` (running in another thread) and wait until it has."""
        self._stop.set()
        self._wake()
        self._stopped.wait()

    def server_close(self) -> None:
        for conn in list(self._conns):
            self._close(conn)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._selector.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            self._wake_w.send(b"\0")

    def _guarded(self, step: Callable[[_Conn], None], conn: _Conn) -> None:
        """Run a step for a connection still open; a bug closes that connection, not the loop."""
        if conn.closed:  # closed earlier in this round (to make room, say)
            return
        try:
            step(conn)
        except Exception:
            log.exception("closing connection from %s after an unexpected error", conn.peer)
            self._close(conn)

    def _on_event(self, conn: _Conn) -> None:
        if conn.state == _State.HANDSHAKE:
            self._handshake(conn)
        elif conn.state in (_State.IDLE, _State.READING):
            self._read(conn)
        elif conn.state == _State.WRITING:
            self._write(conn)
        elif conn.state == _State.DRAINING:
            self._drain(conn)

    def _watch(self, conn: _Conn, events: int) -> None:
        if events == conn.events or conn.closed:
            return
        if conn.events == 0:
            self._selector.register(conn.sock, events, conn)
        elif events == 0:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, events, conn)
        conn.events = events

    def _set_tier(self, conn: _Conn, tier: int | None) -> None:
        if conn.tier == tier:
            return
        if conn.tier is not None:
            self._tiers[conn.tier].pop(conn, None)
        if tier is not None:
            self._tiers[tier][conn] = None
        conn.tier = tier

    def _release(self, conn: _Conn) -> None:
        self._buffered -= conn.reserved
        conn.reserved = 0

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        self._watch(conn, 0)
        conn.closed = True
        self._release(conn)
        self._set_tier(conn, None)
        self._conns.pop(conn, None)
        with contextlib.suppress(OSError):
            conn.sock.close()

    # -- accepting --------------------------------------------------------------------------

    def _accept(self) -> None:
        if time.monotonic() < self._accept_paused_until:
            return
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno == errno.ECONNABORTED:
                    continue
                # Out of file descriptors or buffers: make room, or wait a moment rather than
                # spin on a listener that stays readable.
                self._logs.line("refused-connection", logging.WARNING, "cannot accept: %s", e)
                if not self._evict(None):
                    self._accept_paused_until = time.monotonic() + 0.1
                return
            self._admit(sock, f"{peer[0]}:{peer[1]}")

    def _evict(self, newcomer: str | None) -> bool:
        for tier in self._tiers:
            if tier:
                victim = next(iter(tier))
                self._logs.line(
                    "refused-connection",
                    logging.WARNING,
                    "closing connection from %s (%s) to make room%s: %d open, the limit "
                    "(--max-connections)",
                    victim.peer,
                    victim.state,
                    f" for {newcomer}" if newcomer else "",
                    len(self._conns),
                )
                self._close(victim)
                return True
        return False

    def _admit(self, sock: socket.socket, peer: str) -> None:
        if len(self._conns) >= self.max_connections and not self._evict(peer):
            self._logs.line(
                "refused-connection",
                logging.WARNING,
                "refusing connection from %s: %d open, all answering (--max-connections)",
                peer,
                len(self._conns),
            )
            sock.close()
            return
        try:
            sock.setblocking(False)
            # Small writes must leave at once: with Nagle and the peer's delayed ACK every
            # answer would wait ~40 ms.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.certs.context().wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        except (OSError, ssl.SSLError) as e:
            self._logs.line(
                "tls-handshake", logging.INFO, "TLS handshake with %s failed: %s", peer,
                _tls_reason(e),
            )  # fmt: skip
            sock.close()
            return
        conn = _Conn(tls, peer, time.monotonic() + self.handshake_timeout)
        self._conns[conn] = None
        self._set_tier(conn, 0)
        self._watch(conn, selectors.EVENT_READ)

    def _handshake(self, conn: _Conn) -> None:
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ssl.SSLError) as e:
            level = logging.WARNING if "trust" in _tls_reason(e) else logging.INFO
            self._logs.line(
                "tls-handshake", level, "TLS handshake with %s failed: %s", conn.peer,
                _tls_reason(e),
            )  # fmt: skip
            self._close(conn)
            return
        conn.state = _State.IDLE
        conn.deadline = time.monotonic() + self.read_timeout
        self._read(conn)

    # -- reading a request ------------------------------------------------------------------

    def _read(self, conn: _Conn) -> None:
        """Read what has arrived (until the current request is complete), then parse."""
        while len(conn.inbuf) < self._read_limit(conn):
            try:
                chunk = conn.sock.recv(_CHUNK)
            except ssl.SSLWantReadError:
                self._watch(conn, selectors.EVENT_READ)
                break
            except ssl.SSLWantWriteError:
                self._watch(conn, selectors.EVENT_WRITE)
                break
            except ssl.SSLError as e:
                self._logs.line(
                    "tls-error", logging.INFO, "closing connection from %s: TLS error while %s: %s",
                    conn.peer, conn.state, _tls_reason(e),
                )  # fmt: skip
                self._close(conn)
                return
            except OSError as e:
                log.debug("connection from %s lost while %s: %s", conn.peer, conn.state, e)
                self._close(conn)
                return
            if not chunk:
                if conn.state == _State.READING:
                    log.debug("%s closed the connection in the middle of a request", conn.peer)
                self._close(conn)
                return
            conn.inbuf += chunk
        if conn.state == _State.IDLE:
            while conn.inbuf[:2] == b"\r\n":  # stray line ends between requests (RFC 9112 2.2)
                del conn.inbuf[:2]
            if conn.inbuf:
                now = time.monotonic()
                conn.state = _State.READING
                conn.request_deadline = now + self.request_timeout
                conn.deadline = min(now + self.read_timeout, conn.request_deadline)
                self._set_tier(conn, 2)
        if conn.state == _State.READING:
            self._parse(conn)

    def _read_limit(self, conn: _Conn) -> int:
        if conn.request is None:
            return MAX_HEADER + 4
        return conn.request.length

    def _parse(self, conn: _Conn) -> None:
        if conn.request is None:
            end = conn.inbuf.find(b"\r\n\r\n", 0, MAX_HEADER + 4)
            if end < 0:
                if len(conn.inbuf) > MAX_HEADER:
                    self._refuse(conn, 431, f"request headers exceed {MAX_HEADER} bytes")
                return
            head = bytes(conn.inbuf[:end]).decode("latin-1")
            del conn.inbuf[: end + 4]
            request = self._request_line(conn, head)
            if request is None:
                return
            conn.request = request
        if len(conn.inbuf) < conn.request.length:
            return
        body = bytes(conn.inbuf[: conn.request.length])
        del conn.inbuf[: conn.request.length]
        self._dispatch(conn, conn.request, body)

    def _request_line(self, conn: _Conn, head: str) -> _Request | None:
        """The request from its head, or None after refusing it."""
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._refuse(conn, 400, f"malformed request line {lines[0][:100]!r}")
            return None
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._refuse(conn, 400, f"malformed header line {line[:100]!r}")
                return None
            headers[name.strip().lower()] = value.strip()
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        length_header = headers.get("content-length")
        if "transfer-encoding" in headers or (method == "POST" and length_header is None):
            self._refuse(conn, 400, "a Content-Length header is required (no chunked bodies)")
            return None
        length = 0
        if length_header is not None:
            if not length_header.isdigit():
                self._refuse(conn, 400, f"bad Content-Length {length_header!r}")
                return None
            length = int(length_header)
        if length > self.max_body:
            self._refuse(
                conn,
                413,
                f"request body of {length} bytes exceeds the limit of {self.max_body} bytes "
                "(--max-body-bytes)",
            )
            return None
        if self._buffered + length > self.max_buffered:
            self._logs.line(
                "refused-request", logging.WARNING,
                "refusing a %d-byte request from %s: %d bytes of requests held already",
                length, conn.peer, self._buffered,
            )  # fmt: skip
            self._refuse(
                conn,
                503,
                f"the webhook holds {self._buffered} bytes of requests already (at most "
                f"{self.max_buffered}); retry",
            )
            return None
        conn.reserved = length
        self._buffered += length
        return _Request(method, target.split("?", 1)[0], length, keep_alive)

    def _refuse(self, conn: _Conn, status: int, message: str) -> None:
        """Answer an error and close: what follows on the connection cannot be trusted."""
        log.debug("refusing a request from %s: %d %s", conn.peer, status, message)
        self._set_tier(conn, None)
        self._respond(conn, status, json.dumps({"error": message}).encode(), close=True)

    # -- answering --------------------------------------------------------------------------

    def _dispatch(self, conn: _Conn, request: _Request, body: bytes) -> None:
        conn.state = _State.BUSY
        self._set_tier(conn, None)
        self._watch(conn, 0)
        if request.method == "GET":
            if request.path == "/readyz":
                ok = self.ready()
                self._respond(conn, 200 if ok else 503, b"ok" if ok else b"not ready", "text/plain")
            elif request.path in _PROBES:
                self._respond(conn, 200, b"ok", "text/plain")
            else:
                self._respond(
                    conn, 404, json.dumps({"error": f"no such path {request.path}"}).encode()
                )
        elif request.method == "POST":
            conn.token += 1
            self._pool.submit(self._answer, conn, conn.token, request.path, body)
        else:
            message = f"method {request.method} not allowed: POST an AdmissionReview, GET a probe"
            self._respond(conn, 405, json.dumps({"error": message}).encode())

    def _answer(self, conn: _Conn, token: int, path: str, body: bytes) -> None:
        """Worker thread: run the handler, hand the encoded answer back to the loop."""
        started = time.perf_counter()
        try:
            status, answer = self.handler(path, body)
            payload = json.dumps(answer).encode()
        except Exception:
            log.exception("admission handler failed on %s", path)
            status, payload = 500, b'{"error": "internal error, see the webhook\'s log"}'
        log.debug("POST %s -> %d in %.1f ms", path, status, (time.perf_counter() - started) * 1e3)
        self._answers.put((conn, token, status, payload))
        self._wake()

    def _deliver_answers(self) -> None:
        while True:
            try:
                conn, token, status, payload = self._answers.get_nowait()
            except queue.Empty:
                return
            if conn.closed or conn.state != _State.BUSY or conn.token != token:
                continue  # timed out meanwhile
            self._guarded(functools.partial(self._respond, status=status, payload=payload), conn)

    def _respond(
        self,
        conn: _Conn,
        status: int,
        payload: bytes,
        kind: str = "application/json",
        *,
        close: bool = False,
    ) -> None:
        close = close or conn.request is None or not conn.request.keep_alive
        head = (
            f"HTTP/1.1 {status} {_phrase(status)}\r\nServer: kubetune-webhook\r\n"
            f"Content-Type: {kind}\r\nContent-Length: {len(payload)}\r\n"
            + ("Connection: close\r\n" if close else "")
            + "\r\n"
        )
        conn.out = memoryview(head.encode("latin-1") + payload)  # one write, one TLS record
        conn.close_after = close
        conn.state = _State.WRITING
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        while conn.out:
            try:
                sent = conn.sock.send(conn.out)
            except ssl.SSLWantWriteError:
                self._watch(conn, selectors.EVENT_WRITE)
                return
            except ssl.SSLWantReadError:
                self._watch(conn, selectors.EVENT_READ)
                return
            except (OSError, ssl.SSLError) as e:
                log.debug("cannot answer %s: %s", conn.peer, e)
                self._close(conn)
                return
            conn.out = conn.out[sent:]
        conn.request = None
        self._release(conn)
        conn.served += 1
        if conn.close_after:
            # Read (and drop) what the client still sends for a moment before closing: closing
            # with unread data resets the connection, and the client could lose the answer.
            conn.state = _State.DRAINING
            conn.deadline = time.monotonic() + _DRAIN_SECONDS
            self._drain(conn)
            return
        conn.state = _State.IDLE
        conn.deadline = time.monotonic() + self.idle_timeout
        self._set_tier(conn, 1)
        self._watch(conn, selectors.EVENT_READ)
        self._resume.append(conn)  # a next request may be buffered already

    def _drain(self, conn: _Conn) -> None:
        for _ in range(64):
            try:
                if not conn.sock.recv(_CHUNK):
                    break
            except ssl.SSLWantReadError:
                self._watch(conn, selectors.EVENT_READ)
                return
            except (OSError, ssl.SSLError):
                break
        else:
            self._watch(conn, selectors.EVENT_READ)  # more to come, until the deadline
            return
        self._close(conn)

    # -- deadlines --------------------------------------------------------------------------

    def _sweep(self, now: float) -> None:
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            self._accept()
        for conn in list(self._conns):
            if conn.closed:
                continue
            if conn.state in (_State.BUSY, _State.WRITING):
                if now < conn.request_deadline:
                    continue
                if conn.state == _State.BUSY:
                    self._logs.line(
                        "timed-out-request", logging.WARNING,
                        "no answer for %s within %g s (--request-timeout): HTTP 504",
                        conn.peer, self.request_timeout,
                    )  # fmt: skip
                    conn.token += 1  # the worker's late answer is dropped
                    message = f"no answer within {self.request_timeout:g} s"
                    self._respond(conn, 504, json.dumps({"error": message}).encode(), close=True)
                else:
                    self._logs.line(
                        "slow-client", logging.INFO,
                        "closing connection from %s: answer not taken within %g s",
                        conn.peer, self.request_timeout,
                    )  # fmt: skip
                    self._close(conn)
                continue
            if now < conn.deadline:
                continue
            if conn.state == _State.HANDSHAKE:
                self._logs.line(
                    "tls-handshake", logging.INFO,
                    "TLS handshake with %s failed: not done within %g s (--handshake-timeout)",
                    conn.peer, self.handshake_timeout,
                )  # fmt: skip
            elif conn.state == _State.READING:
                self._logs.line(
                    "slow-client", logging.INFO,
                    "closing connection from %s: request not complete within %g s "
                    "(--read-timeout)",
                    conn.peer, self.read_timeout,
                )  # fmt: skip
            elif conn.state == _State.IDLE and not conn.served:
                self._logs.line(
                    "slow-client", logging.INFO,
                    "closing connection from %s: no request within %g s of the handshake "
                    "(--read-timeout)",
                    conn.peer, self.read_timeout,
                )  # fmt: skip
            self._close(conn)
        self._logs.flush()


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _fit_to_file_limit(max_connections: int, workers: int) -> int:
    """Lower the cap below the open-files limit (raising the soft limit first): running out
    of descriptors would fail accept() for everyone, the API server included."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + workers + 64
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        if soft < wanted:
            fitted = max(1, soft - workers - 64)
            log.warning(
                "--max-connections %d lowered to %d: the open-files limit is %d",
                max_connections, fitted, soft,
            )  # fmt: skip
            return fitted
    return max_connections


def serve(server: AdmissionServer) -> threading.Thread:
    """Serve in a daemon thread; stop with `server.shutdown()`."""
    thread = threading.Thread(target=server.serve_forever, name="webhook", daemon=True)
    thread.start()
    return thread


def certificate_files_exist(cert_file: str, key_file: str) -> bool:
    return Path(cert_file).is_file() and Path(key_file).is_file()
