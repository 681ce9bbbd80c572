"""A plain-HTTP proxy in front of the test cluster's API server that sees every request.

A process under test gets a kubeconfig naming the proxy (`kubeconfig()`); the proxy forwards
each connection over TLS with the cluster's own client certificate. It records the request
line of every request (so a test can count LISTs and watches) and `cut_watches()` drops the
connections of the watches in flight mid-stream, as a broken network or a restarted API
server would.
"""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import ssl
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import yaml

_REQUEST_LINE = re.compile(rb"(GET|POST|PUT|PATCH|DELETE) (\S+) HTTP/1\.[01]\r\n")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") == "true"

    @property
    def is_list(self) -> bool:
        """A GET of a collection that is not a watch (a LIST, paged or not)."""
        return self.method == "GET" and not self.is_watch and _is_collection(self.path)


def _is_collection(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    # /api/v1/<plural>, /api/v1/namespaces/<ns>/<plural>, /apis/<g>/<v>/... likewise
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    return len(rest) == 1


class ApiProxy:
    """Listens on 127.0.0.1 (plain HTTP); each connection is forwarded to the API server."""

    def __init__(self, kubeconfig: str, work: Path | None = None) -> None:
        config = yaml.safe_load(Path(kubeconfig).read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        where = urllib.parse.urlsplit(cluster["server"])
        self.upstream = (where.hostname or "127.0.0.1", where.port or 443)
        self.work = work or Path(tempfile.mkdtemp(prefix="apiproxy-"))
        files = {}
        for name in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
            path = self.work / name
            path.write_bytes(base64.b64decode(cluster.get(name) or user.get(name) or ""))
            files[name] = str(path)
        self.tls = ssl.create_default_context(cafile=files["certificate-authority-data"])
        self.tls.load_cert_chain(files["client-certificate-data"], files["client-key-data"])
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._watching: dict[socket.socket, socket.socket] = {}
        self._sockets: list[socket.socket] = [self.listener]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def kubeconfig(self, path: Path) -> str:
        """A kubeconfig that reaches the API server through this proxy, written at `path`."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "proxy", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(config))
        return str(path)

    def all_requests(self) -> list[Request]:
        """Every request so far, in order."""
        with self._lock:
            return list(self.requests)

    def seen(self, plural: str) -> list[Request]:
        """The requests so far on collections named `plural` (e.g. "trials")."""
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/").rsplit("/", 1)[-1] == plural]

    def watches_in_flight(self) -> int:
        with self._lock:
            return len(self._watching)

    def cut_watches(self) -> int:
        """Drop every watch in flight mid-stream (no clean end); how many were dropped."""
        with self._lock:
            cut = list(self._watching.items())
            self._watching.clear()
        for pair in cut:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()
        return len(cut)

    def close(self) -> None:
        self._closed.set()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                raw = socket.create_connection(self.upstream)
                server = self.tls.wrap_socket(raw, server_hostname=self.upstream[0])
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket) -> None:
        """Client to server, noting each request line (requests start a read)."""
        try:
            while data := client.recv(65536):
                for match in _REQUEST_LINE.finditer(data):
                    self._note(match, client, server)
                server.sendall(data)
        except OSError:
            pass
        finally:
            _shut(client, server)

    def _note(self, match: re.Match[bytes], client: socket.socket, server: socket.socket) -> None:
        where = urllib.parse.urlsplit(match.group(2).decode())
        request = Request(
            match.group(1).decode(), where.path, dict(urllib.parse.parse_qsl(where.query))
        )
        with self._lock:
            self.requests.append(request)
            if request.is_watch:
                self._watching[client] = server
            else:
                self._watching.pop(client, None)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _shut(source, sink)


def _shut(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
