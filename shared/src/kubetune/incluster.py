"""The API server as a pod reaches it, with the standard library only.

Why: importing `kubernetes.client` builds hundreds of model classes, about 0.35 s of CPU, and
urllib3 (with its http/email modules and TLS wrappers) another tenth of that. The metrics
collector starts in every trial pod, so on a 2-core node running 8 trials of 3 s those imports
took a sixth of the machine. A pod needs none of it: the API server's address is in
`KUBERNETES_SERVICE_HOST`/`_PORT`, the ServiceAccount's token and CA are files, and
`http.client` over `ssl` keeps connections alive as well. Every kubeconfig (exec plugins, auth
providers, client certificates) still goes through the client (`kube.connect`).

The token is read again once a minute, as client-go does: the kubelet rotates the projected
token before it expires. Failures to connect are retried up to `RETRIES` times, failures after
the request was sent only for idempotent methods (as urllib3's default policy); a connection
the server closed while idle is dropped before it is used. A protocol error is raised as a
`ConnectionError` (an `OSError`, as every other transport failure here).
"""

from __future__ import annotations

import http.client
import os
import select
import ssl
import threading
import time
import urllib.parse
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV, PORT_ENV = "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"
TOKEN_REREAD_SECONDS = 60.0
RETRIES = 3
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
USER_AGENT = "kubetune"

Timeout = float | tuple[float, float] | None
"""Seconds for the whole of each socket operation, or (connect, read), or none."""


class NotInCluster(Exception):
    """This process has no in-cluster configuration; the message says what is missing."""


def host_url(host: str, port: str) -> str:
    """`https://host:port`, an IPv6 address in brackets."""
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def _dropped(conn: http.client.HTTPSConnection) -> bool:
    """Whether an idle connection was closed by the server (readable while idle: EOF)."""
    if conn.sock is None:
        return True
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _close_all(connections: list[http.client.HTTPSConnection]) -> None:
    for conn in connections:
        conn.close()


class Answer:
    """One response, read the way `kubetune.kube.Kube` reads every transport's: `data` whole
    or `stream` in chunks, then `release_conn` (the connection kept only if fully read)."""

    def __init__(
        self, response: http.client.HTTPResponse, conn: http.client.HTTPSConnection, pool: Pool
    ) -> None:
        self._response = response
        self._conn: http.client.HTTPSConnection | None = conn
        self._pool = pool
        self._data: bytes | None = None
        self.status = response.status
        self.reason = response.reason

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = self._response.read()
        return self._data

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        """The body as it arrives, at most `amt` bytes a chunk (nothing is ever encoded:
        no `Accept-Encoding` is sent)."""
        while chunk := self._response.read1(amt):
            yield chunk

    def release_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._response.isclosed() and not self._response.will_close:
            self._pool.give(conn)
        else:
            self._response.close()
            conn.close()


class Pool:
    """Keep-alive TLS connections to one server, at most `maxsize` kept idle (beyond that a
    request opens a connection and closes it after)."""

    def __init__(self, url: str, context: ssl.SSLContext, maxsize: int) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "", parts.port or 443
        self.context = context
        self.maxsize = maxsize
        self._idle: list[http.client.HTTPSConnection] = []
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle)  # the idle ones, when the pool goes

    def take(self) -> http.client.HTTPSConnection:
        """An idle connection still open, else a new one (not connected yet)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return http.client.HTTPSConnection(self.host, self.port, context=self.context)
            if not _dropped(conn):
                return conn
            conn.close()

    def give(self, conn: http.client.HTTPSConnection) -> None:
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def send(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        timeout: Timeout,
    ) -> Answer:
        """One request; its response unread (`Answer`). Raises `OSError` when it failed."""
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout,) * 2
        attempt = 0
        while True:
            conn = self.take()
            connecting = conn.sock is None
            try:
                if connecting:
                    conn.timeout = connect_timeout
                    conn.connect()
                    connecting = False
                assert conn.sock is not None
                conn.sock.settimeout(read_timeout)
                conn.putrequest(method, target, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                if body is not None:
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                return Answer(conn.getresponse(), conn, self)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                attempt += 1
                if attempt > RETRIES or not (connecting or method in IDEMPOTENT):
                    if isinstance(e, OSError):
                        raise
                    raise ConnectionError(f"{method} {self.host}:{self.port}: {e!r}") from e


class InCluster:
    """Requests to the API server with the pod's ServiceAccount token over its CA."""

    def __init__(
        self,
        host: str,
        *,
        directory: Path = SERVICE_ACCOUNT_DIR,
        pool_size: int | None = None,
        reread_seconds: float = TOKEN_REREAD_SECONDS,
    ) -> None:
        self.host = host.rstrip("/")
        self.reread_seconds = reread_seconds
        self.token_file = directory / "token"
        ca_file = directory / "ca.crt"
        if not ca_file.is_file() or not ca_file.stat().st_size:
            raise NotInCluster(f"the ServiceAccount CA {ca_file} is missing or empty")
        self._token = ""
        self._read_at = float("-inf")
        self._lock = threading.Lock()
        self._header()  # a missing token fails here, not at the first request
        # As the kubernetes client's default: 5 connections per CPU kept open.
        maxsize = pool_size if pool_size is not None else (os.cpu_count() or 1) * 5
        context = ssl.create_default_context(cafile=str(ca_file))
        self.pool = Pool(self.host, context, maxsize)

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] = os.environ,
        *,
        directory: Path | None = None,
        pool_size: int | None = None,
    ) -> InCluster:
        """From `KUBERNETES_SERVICE_HOST`/`_PORT` and the ServiceAccount files.

        Raises:
            NotInCluster: either variable is unset or empty, or a file is missing.
        """
        host, port = environ.get(HOST_ENV), environ.get(PORT_ENV)
        if not host or not port:
            raise NotInCluster(f"{HOST_ENV} and {PORT_ENV} are not both set")
        return cls(
            host_url(host, port), directory=directory or SERVICE_ACCOUNT_DIR, pool_size=pool_size
        )

    def _header(self) -> str:
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= self.reread_seconds:
                try:
                    token = self.token_file.read_text().strip()
                except OSError as e:
                    if not self._token:
                        raise NotInCluster(
                            f"the ServiceAccount token {self.token_file}: {e}"
                        ) from e
                    token = self._token  # keep the last one; a request will say if it expired
                if not token:
                    raise NotInCluster(f"the ServiceAccount token {self.token_file} is empty")
                self._token, self._read_at = token, now
            return f"Bearer {self._token}"

    def send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        timeout: Timeout,
    ) -> Answer:
        """`path` with `query`, `headers` (names may repeat) and the token; the response
        unread. Raises `OSError` when no answer came (after the retries above)."""
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        sent = [
            *headers,
            ("Authorization", self._header()),
            ("User-Agent", USER_AGENT),
        ]
        return self.pool.send(method, target, sent, body, timeout)
