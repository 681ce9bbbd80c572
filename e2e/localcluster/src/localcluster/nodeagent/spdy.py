"""``exec`` on the kubelet endpoint: the server half of Kubernetes' remotecommand over SPDY/3.1.

The API server hands ``pods/exec`` to the kubelet as an HTTP upgrade to SPDY/3.1 (it turns
kubectl's WebSocket into SPDY itself), so the node agent needs this to run a command in a
container. Argo's workflow-controller relies on it to stop sidecars when a step's main
container ends; without it a lost signal leaves a pod running for ever.

Only what remotecommand's ``v4.channel.k8s.io`` needs: the client opens an ``error`` stream
and one per requested stdio (SYN_STREAM, answered by SYN_REPLY); the output goes back as DATA
frames; the exit status is a ``metav1.Status`` JSON on the error stream, then every stream
is finished. No stdin, no TTY (refused with a Status naming them). Frame layout, header
blocks and the zlib dictionary are those of the SPDY/3 draft.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import struct
import subprocess
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

log = logging.getLogger(__name__)

PROTOCOL = "v4.channel.k8s.io"
UPGRADE = "SPDY/3.1"

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1, 2, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
FLAG_FIN = 0x01
CHUNK = 32 * 1024
STREAMS_TIMEOUT = 10.0

# The SPDY/3 header-compression dictionary: length-prefixed common header names, then a run
# of common values. zlib refuses a header block compressed against any other dictionary.
_DICT_WORDS = (  # noqa: SIM905 - as a literal list it would take 65 lines
    "options|head|post|put|delete|trace|accept|accept-charset|accept-encoding|accept-language|"
    "accept-ranges|age|allow|authorization|cache-control|connection|content-base|"
    "content-encoding|content-language|content-length|content-location|content-md5|"
    "content-range|content-type|date|etag|expect|expires|from|host|if-match|"
    "if-modified-since|if-none-match|if-range|if-unmodified-since|last-modified|location|"
    "max-forwards|pragma|proxy-authenticate|proxy-authorization|range|referer|retry-after|"
    "server|te|trailer|transfer-encoding|upgrade|user-agent|vary|via|warning|www-authenticate|"
    "method|get|status|200 OK|version|HTTP/1.1|url|public|set-cookie|keep-alive|origin"
).split("|")
_DICT_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504"
    "505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, "
    "Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
HEADER_DICTIONARY = (
    b"".join(struct.pack(">I", len(w)) + w.encode() for w in _DICT_WORDS) + _DICT_TAIL.encode()
)


def encode_headers(headers: dict[str, str]) -> bytes:
    """An uncompressed SPDY/3 header block (32-bit counts and lengths)."""
    out = [struct.pack(">I", len(headers))]
    for name, value in headers.items():
        n, v = name.lower().encode(), value.encode()
        out += [struct.pack(">I", len(n)), n, struct.pack(">I", len(v)), v]
    return b"".join(out)


def decode_headers(block: bytes) -> dict[str, str]:
    """Parse an uncompressed header block; a short or malformed block raises ValueError."""
    try:
        (count,) = struct.unpack_from(">I", block, 0)
        pos, headers = 4, {}
        for _ in range(count):
            (n,) = struct.unpack_from(">I", block, pos)
            name = block[pos + 4 : pos + 4 + n].decode()
            pos += 4 + n
            (v,) = struct.unpack_from(">I", block, pos)
            headers[name.lower()] = block[pos + 4 : pos + 4 + v].decode()
            pos += 4 + v
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed SPDY header block: {exc}") from exc
    return headers


def exit_status(returncode: int) -> dict[str, Any]:
    """The metav1.Status the kubelet writes on the error stream (client-go reads the code)."""
    if returncode == 0:
        return {"metadata": {}, "status": "Success"}
    code = 128 - returncode if returncode < 0 else returncode
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def failure_status(message: str) -> dict[str, Any]:
    return {"metadata": {}, "status": "Failure", "message": message, "reason": "BadRequest"}


@dataclass
class Connection:
    """One upgraded socket: frame I/O and the two header-compression contexts."""

    sock: socket.socket
    reader: io.BufferedIOBase
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    deflate: Any = field(default_factory=lambda: zlib.compressobj(zdict=HEADER_DICTIONARY))
    inflate: Any = field(default_factory=lambda: zlib.decompressobj(zdict=HEADER_DICTIONARY))

    def _send(self, data: bytes) -> None:
        with self.send_lock:
            self.sock.sendall(data)

    @staticmethod
    def _control_frame(ftype: int, flags: int, payload: bytes) -> bytes:
        head = struct.pack(">HHI", 0x8000 | VERSION, ftype, (flags << 24) | len(payload))
        return head + payload

    def control(self, ftype: int, flags: int, payload: bytes) -> None:
        self._send(self._control_frame(ftype, flags, payload))

    def data(self, stream_id: int, payload: bytes, fin: bool = False) -> None:
        flags = FLAG_FIN if fin else 0
        self._send(struct.pack(">II", stream_id, (flags << 24) | len(payload)) + payload)

    def reply(self, stream_id: int) -> None:
        with self.send_lock:
            block = self.deflate.compress(encode_headers({})) + self.deflate.flush(
                zlib.Z_SYNC_FLUSH
            )
            # compressed and sent under one lock: the peer inflates blocks in wire order
            self.sock.sendall(
                self._control_frame(SYN_REPLY, 0, struct.pack(">I", stream_id) + block)
            )

    def read_frame(self) -> tuple[bool, int, int, bytes] | None:
        """(is_control, type-or-stream-id, flags, payload), or None at end of stream."""
        head = self._read_exact(8)
        if head is None:
            return None
        first, second = struct.unpack(">II", head)
        flags, length = second >> 24, second & 0xFFFFFF
        payload = self._read_exact(length)
        if payload is None:
            return None
        if first & 0x80000000:
            return True, first & 0xFFFF, flags, payload
        return False, first & 0x7FFFFFFF, flags, payload

    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = self.reader.read(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf


@dataclass
class ExecRequest:
    """What the exec URL asked for."""

    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    def wanted_streams(self) -> set[str]:
        wanted = {"error"}
        wanted |= {name for name, on in (("stdout", self.stdout), ("stderr", self.stderr)) if on}
        return wanted | ({"stdin"} if self.stdin else set())


class ExecSession:
    """Serves one exec on an upgraded connection: streams, the process, its status."""

    def __init__(self, conn: Connection, request: ExecRequest) -> None:
        self.conn = conn
        self.request = request
        self.streams: dict[str, int] = {}
        self.all_open = threading.Event()
        self.closed = threading.Event()

    def serve(self, start: Callable[[list[str]], subprocess.Popen[bytes] | None]) -> None:
        reader = threading.Thread(target=self._read_loop, name="exec-frames", daemon=True)
        reader.start()
        if not self.all_open.wait(STREAMS_TIMEOUT):
            log.info("exec: the client did not open its streams; giving up")
            return
        if self.request.tty:
            self._finish(failure_status("exec: tty is not supported by the local node agent"))
            return
        if not self.request.command:
            self._finish(failure_status("exec: no command given (query parameter 'command')"))
            return
        proc = start(self.request.command)
        if proc is None:
            self._finish(failure_status("exec: the container is not running"))
            return
        pumps = [
            threading.Thread(target=self._pump, args=(pipe, name), daemon=True)
            for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))
            if pipe is not None
        ]
        for t in pumps:
            t.start()
        while proc.poll() is None:
            if self.closed.wait(0.2):
                proc.kill()
        for t in pumps:
            t.join()
        self._finish(exit_status(proc.returncode))

    def _pump(self, pipe: IO[bytes], name: str) -> None:
        stream = self.streams.get(name)
        while chunk := pipe.read1(CHUNK):  # type: ignore[attr-defined]
            if stream is not None and not self.closed.is_set():
                try:
                    self.conn.data(stream, chunk)
                except OSError:
                    self.closed.set()

    def _finish(self, status: dict[str, Any]) -> None:
        try:
            self.conn.data(self.streams["error"], json.dumps(status).encode())
            for stream in self.streams.values():
                self.conn.data(stream, b"", fin=True)
        except OSError:
            pass

    def _read_loop(self) -> None:
        try:
            while (frame := self.conn.read_frame()) is not None:
                self._on_frame(*frame)
        except (OSError, ValueError, zlib.error) as exc:
            log.info("exec: connection ended: %s", exc)
        finally:
            self.closed.set()

    def _on_frame(self, control: bool, kind: int, flags: int, payload: bytes) -> None:
        if not control:
            return  # stdin data: not supported, dropped
        if kind == SYN_STREAM:
            (stream_id,) = struct.unpack_from(">I", payload, 0)
            stream_id &= 0x7FFFFFFF
            headers = decode_headers(self.conn.inflate.decompress(payload[10:]))
            self.conn.reply(stream_id)
            self.streams[headers.get("streamtype", "")] = stream_id
            if self.request.wanted_streams() <= set(self.streams):
                self.all_open.set()
        elif kind == PING:
            self.conn.control(PING, 0, payload)
        elif kind == GOAWAY:
            raise ValueError("client sent GOAWAY")


def negotiate(offered: list[str]) -> str | None:
    """The stream protocol to answer with, from the X-Stream-Protocol-Version headers."""
    versions = {v.strip() for header in offered for v in header.split(",")}
    return PROTOCOL if PROTOCOL in versions else None
