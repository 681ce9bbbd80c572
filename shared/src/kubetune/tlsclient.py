"""TLS client connections on CPython's `_ssl` and `_socket`, for a process started per trial.

Why: the metrics collector starts in every trial pod, and `import ssl` (with `socket` and
`selectors`) builds dozens of enum classes at import: about a fifth of the collector's start,
paid on every trial. The C modules under them do all of the work: `ssl.SSLContext` is a thin
subclass of `_ssl._SSLContext` and `SSLSocket` wraps the object `_SSLContext._wrap_socket`
returns. This module makes the same calls directly.

Verification is exactly `ssl.create_default_context(cafile=...)`'s: `PROTOCOL_TLS_CLIENT`
(a certificate is required, and OpenSSL checks the host name, or the IP address, given as
`server_hostname` against it), TLS 1.2 at least, trusting only the given CA file. Every
failure is an `OSError` (`_ssl.SSLError`, `TimeoutError`, `ConnectionError`), as with `ssl`.
An interpreter whose `_ssl` lacks the entry points used here (they are private; CPython has
had them since 3.7, and kubetune's images pin 3.11) gets `TlsUnavailable` naming what is
missing, at the first connection, never a weaker check.
"""

from __future__ import annotations

import _socket
import _ssl
import select

from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

_READ = 64 * 1024


class _Socket(_socket.socket):
    """`_socket.socket` with a weak reference slot (`_ssl` holds its socket weakly), as the
    `socket` module's own subclass has."""

    __slots__ = ("__weakref__",)


class TlsUnavailable(Exception):
    """This interpreter's `_ssl` does not have what this module calls."""


class Context:
    """A client TLS context trusting one CA file."""

    def __init__(self, cafile: str) -> None:
        try:
            native: Any = _ssl._SSLContext(_ssl.PROTOCOL_TLS_CLIENT)
            self._wrap = native._wrap_socket
        except AttributeError as e:
            raise TlsUnavailable(str(e)) from e
        native.minimum_version = _ssl.PROTO_TLSv1_2
        native.load_verify_locations(cafile)
        if not native.check_hostname or native.verify_mode != _ssl.CERT_REQUIRED:
            raise TlsUnavailable("PROTOCOL_TLS_CLIENT does not verify by default here")
        self.native = native

    def connect(self, host: str, port: int, timeout: float | None) -> Stream:
        """A TLS connection to `host:port` (each address of the name in turn), handshake
        done, `host` verified against the server's certificate."""
        error: OSError | None = None
        # An ASCII name as bytes: a str would load the IDNA codec (and `unicodedata`) first.
        name: str | bytes = host.encode("ascii") if host.isascii() else host
        for family, kind, proto, _name, address in _socket.getaddrinfo(
            name, port, 0, _socket.SOCK_STREAM
        ):
            sock = _Socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                sock.connect(address)
                tls = self._wrap(sock, False, host)
                tls.do_handshake()
                return Stream(sock, tls)
            except OSError as e:
                sock.close()
                error = e
        raise error or OSError(f"no address for {host}")


class Stream:
    """One TLS connection: `sendall`, buffered `readline`/`read1`, `readable_now`, `close`."""

    def __init__(self, sock: _Socket, tls: Any) -> None:
        self._sock = sock  # the TLS object holds the socket only weakly
        self._tls = tls
        self._buffer = b""

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._tls.write(view) :]

    def _fill(self) -> bytes:
        try:
            return bytes(self._tls.read(_READ))
        except _ssl.SSLEOFError:
            return b""  # the peer closed without close_notify: an end like any other

    def read1(self, size: int) -> bytes:
        """Up to `size` bytes: the buffered ones, else one read (b"" at the end)."""
        if not self._buffer:
            self._buffer = self._fill()
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def readline(self, limit: int) -> bytes:
        """Up to and including the next newline, at most `limit` bytes (b"" at the end)."""
        while b"\n" not in self._buffer and len(self._buffer) < limit:
            more = self._fill()
            if not more:
                break
            self._buffer += more
        end = self._buffer.find(b"\n")
        cut = min(limit, end + 1 if end >= 0 else len(self._buffer))
        line, self._buffer = self._buffer[:cut], self._buffer[cut:]
        return line

    def readable_now(self) -> bool:
        """Whether anything (data or the end) has come without being asked for."""
        if self._buffer or self._tls.pending():
            return True
        readable, _, _ = select.select([self._sock], [], [], 0)
        return bool(readable)

    def close(self) -> None:
        self._sock.close()
