"""The API server as a pod reaches it: HTTP/1.1 over TLS (`tlsclient`), nothing else imported.

Why: importing `kubernetes.client` builds hundreds of model classes, about 0.35 s of CPU, and
urllib3 or even `http.client` (which loads the `email` package to parse headers) cost more
than the rest of the metrics collector's start. The collector starts in every trial pod, so on
a 2-core node running 8 trials of 3 s those imports took a sixth of the machine. A pod needs
none of it: the API server's address is in `KUBERNETES_SERVICE_HOST`/`_PORT`, the
ServiceAccount's token and CA are files, and the API server's answers are plain HTTP/1.1
(a Content-Length or chunked body; no `Accept-Encoding` is sent, so none is compressed).
Every kubeconfig (exec plugins, auth providers, client certificates) still goes through the
client (`kube.connect`).

The token is read again once a minute, as client-go does: the kubelet rotates the projected
token before it expires. Failures to connect are retried up to `RETRIES` times, failures after
the request was sent only for idempotent methods (as urllib3's default policy); a connection
the server closed while idle is dropped before it is used. An answer this client cannot read
raises `ProtocolError`, a `ConnectionError`: every transport failure here is an `OSError`.
"""

from __future__ import annotations

import _thread
import os
import time

from kubetune import tlsclient, urlparts
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
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


class ProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.1 as this client reads it."""


_LINE_LIMIT = 65536
_NO_BODY = (204, 304)


class Connection:
    """One keep-alive TLS connection: a request written whole, its answer read as it comes."""

    def __init__(self, host: str, port: int, context: tlsclient.Context, timeout: float | None):
        self.stream = context.connect(host, port, timeout)

    def dropped(self) -> bool:
        """Whether the server closed it while idle (readable with nothing asked: EOF)."""
        try:
            return self.stream.readable_now()
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        self.stream.close()

    def line(self) -> bytes:
        text = self.stream.readline(_LINE_LIMIT + 1)
        if not text:
            raise ProtocolError("the server closed the connection")
        if len(text) > _LINE_LIMIT:
            raise ProtocolError("a line of the answer is too long")
        return text.rstrip(b"\r\n")


class Answer:
    """One response, read the way `kubetune.kube.Kube` reads every transport's: `data` whole
    or `stream` in chunks, then `release_conn` (the connection kept only if fully read)."""

    def __init__(self, conn: Connection, pool: Pool, method: str) -> None:
        self._conn: Connection | None = conn
        self._pool = pool
        self._data: bytes | None = None
        version, _, rest = conn.line().decode("latin-1").partition(" ")
        code, _, self.reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {version} {rest}"[:200])
        self.status = int(code)
        self.headers: dict[str, str] = {}
        while header := conn.line():
            name, _, value = header.decode("latin-1").partition(":")
            key = name.strip().lower()
            value = value.strip()
            self.headers[key] = f"{self.headers[key]}, {value}" if key in self.headers else value
        connection = self.headers.get("connection", "").lower()
        self.will_close = version == "HTTP/1.0" or "close" in connection
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._left: int | None = None  # bytes of the body (or of the current chunk) unread
        self._done = False
        if method == "HEAD" or self.status in _NO_BODY or 100 <= self.status < 200:
            self._done = True
        elif not self._chunked:
            length = self.headers.get("content-length")
            if length is None:
                self.will_close = True  # the body ends when the connection does
            elif length.isdigit():
                self._left = int(length)
                self._done = self._left == 0
            else:
                raise ProtocolError(f"Content-Length {length!r} is not a number")

    def _read(self, amt: int) -> bytes:
        """Up to `amt` bytes of the body; b"" at its end."""
        conn = self._conn
        if self._done or conn is None:
            return b""
        if self._chunked:
            if not self._left:
                size = conn.line().split(b";", 1)[0].strip()
                try:
                    self._left = int(size, 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size {size[:20]!r}") from None
                if self._left == 0:
                    while conn.line():  # trailers, then the blank line
                        pass
                    self._done = True
                    return b""
            data = conn.stream.read1(min(amt, self._left))
            if not data:
                raise ProtocolError("the server closed the connection inside a chunk")
            self._left -= len(data)
            if self._left == 0 and conn.line():
                raise ProtocolError("a chunk did not end with CRLF")
            return data
        if self._left is None:
            data = conn.stream.read1(amt)
            self._done = not data
            return data
        data = conn.stream.read1(min(amt, self._left))
        if not data:
            raise ProtocolError(f"the server closed the connection {self._left} bytes short")
        self._left -= len(data)
        self._done = self._left == 0
        return data

    @property
    def data(self) -> bytes:
        if self._data is None:
            parts = []
            while part := self._read(1 << 20):
                parts.append(part)
            self._data = b"".join(parts)
        return self._data

    def stream(self, amt: int, decode_content: bool = True) -> Iterator[bytes]:
        """The body as it arrives, at most `amt` bytes a chunk (nothing is ever encoded:
        no `Accept-Encoding` is sent)."""
        while chunk := self._read(amt):
            yield chunk

    def release_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._done and not self.will_close:
            self._pool.give(conn)
        else:
            conn.close()


def _close_all(connections: list[Connection]) -> None:
    for conn in connections:
        conn.close()


class Pool:
    """Keep-alive TLS connections to one server, at most `maxsize` kept idle (beyond that a
    request opens a connection and closes it after)."""

    def __init__(self, url: str, context: tlsclient.Context, maxsize: int) -> None:
        self.host, port = urlparts.host_and_port(url)
        self.port = port or 443
        bracketed = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = bracketed if self.port == 443 else f"{bracketed}:{self.port}"
        self.context = context
        self.maxsize = maxsize
        self._idle: list[Connection] = []
        self._lock = _thread.allocate_lock()

    def __del__(self) -> None:
        """The idle connections close when the pool goes."""
        _close_all(self._idle)

    def take(self) -> Connection | None:
        """An idle connection still open, else None."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not conn.dropped():
                return conn
            conn.close()

    def give(self, conn: Connection) -> None:
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
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{name}: {value}" for name, value in headers]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        attempt = 0
        while True:
            conn = self.take()
            connecting = conn is None
            try:
                if conn is None:
                    conn = Connection(self.host, self.port, self.context, connect_timeout)
                    connecting = False
                conn.stream.settimeout(read_timeout)
                conn.stream.sendall(request)
                return Answer(conn, self, method)
            except OSError:
                if conn is not None:
                    conn.close()
                attempt += 1
                if attempt > RETRIES or not (connecting or method in IDEMPOTENT):
                    raise


class InCluster:
    """Requests to the API server with the pod's ServiceAccount token over its CA."""

    def __init__(
        self,
        host: str,
        *,
        directory: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
        pool_size: int | None = None,
        reread_seconds: float = TOKEN_REREAD_SECONDS,
    ) -> None:
        self.host = host.rstrip("/")
        self.reread_seconds = reread_seconds
        self.token_file = os.path.join(directory, "token")
        ca_file = os.path.join(directory, "ca.crt")
        if not os.path.isfile(ca_file) or not os.path.getsize(ca_file):
            raise NotInCluster(f"the ServiceAccount CA {ca_file} is missing or empty")
        self._token = ""
        self._read_at = float("-inf")
        self._lock = _thread.allocate_lock()
        self._header()  # a missing token fails here, not at the first request
        # As the kubernetes client's default: 5 connections per CPU kept open.
        maxsize = pool_size if pool_size is not None else (os.cpu_count() or 1) * 5
        context = tlsclient.Context(ca_file)
        self.pool = Pool(self.host, context, maxsize)

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] = os.environ,
        *,
        directory: str | os.PathLike[str] | None = None,
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
                    with open(self.token_file, encoding="utf-8") as fh:
                        token = fh.read().strip()
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
        target = path + ("?" + urlparts.query_string(query) if query else "")
        sent = [
            *headers,
            ("Authorization", self._header()),
            ("User-Agent", USER_AGENT),
        ]
        return self.pool.send(method, target, sent, body, timeout)
