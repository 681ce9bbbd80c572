"""The kubelet's HTTPS endpoint: ``kubectl logs`` and ``exec`` go apiserver -> here.

Serves ``GET /containerLogs/<ns>/<pod>/<container>`` with ``previous``, ``tailLines``,
``limitBytes`` and ``follow`` from the agent's log files, ``/exec/<ns>/<pod>/<container>``
(an upgrade to SPDY, see ``spdy``), plus ``/healthz``. It listens on
the node's pod address (a secondary address on lo) with a self-signed certificate; the
API server does not verify kubelet certificates unless told to.
"""

from __future__ import annotations

import glob
import logging
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from kubetune import pki

from . import spdy

log = logging.getLogger(__name__)


def self_signed(directory: str, ip: str, name: str) -> tuple[str, str]:
    """Write a serving cert/key for ip and name; returns their paths."""
    pair = pki.issue(None, f"system:node:{name}", server=True, dns=(name,), ips=(ip,), days=7)
    crt, key = pair.write(Path(directory), "kubelet")
    return str(crt), str(key)


def log_files(state_dir: str, ns: str, pod: str, container: str) -> list[str]:
    """The container's log files of the newest pod with that name, oldest run first."""
    dirs = glob.glob(
        os.path.join(
            glob.escape(os.path.join(state_dir, "pods")), glob.escape(f"{ns}_{pod}_") + "*"
        )
    )
    if not dirs:
        return []
    newest = max(dirs, key=os.path.getmtime)
    files = glob.glob(os.path.join(glob.escape(os.path.join(newest, container)), "*.log"))
    return sorted(files, key=lambda f: int(os.path.basename(f).split(".")[0]))


# Starts a command in a running container (ns, pod, container, argv), or None if not running.
ExecStarter = Callable[[str, str, str, list[str]], "subprocess.Popen[bytes] | None"]


def _flag(q: dict[str, list[str]], name: str) -> bool:
    return (q.get(name) or ["false"])[-1].lower() in ("1", "true")


class KubeletServer:
    """A ThreadingHTTPServer in a daemon thread."""

    def __init__(
        self,
        state_dir: str,
        ip: str,
        node_name: str,
        is_running: Callable[[str, str, str], bool],
        start_exec: ExecStarter | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.is_running = is_running
        self.start_exec = start_exec
        crt, key = self_signed(os.path.join(state_dir, "pki"), ip, node_name)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: object) -> None:  # noqa: N802, RUF100
                log.debug("kubelet endpoint: " + fmt, *args)

            def do_GET(self) -> None:  # noqa: N802, RUF100
                server.handle(self)

            def do_POST(self) -> None:  # noqa: N802, RUF100
                server.handle(self)

        self.httpd = ThreadingHTTPServer((ip, 0), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="kubelet-http", daemon=True
        )

    def start(self) -> None:
        """Serve in the background."""
        self.thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        """Route one GET."""
        url = urlparse(req.path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts == ["healthz"]:
            self._reply(req, 200, b"ok")
            return
        if parts[0] == "exec" and len(parts) in (4, 5):
            self._exec(req, parts[1], parts[2], parts[-1], parse_qs(url.query))
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._reply(req, 404, b"not found")
            return
        _, ns, pod, container = parts
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        files = log_files(self.state_dir, ns, pod, container)
        previous = q.get("previous") in ("true", "1")
        if previous:
            files = files[:-1]
        if not files:
            which = "previous " if previous else ""
            msg = f'container "{container}" in pod "{pod}" has no {which}log'
            self._reply(req, 400 if previous else 404, msg.encode())
            return
        path = files[-1]
        with open(path, "rb") as fh:
            data = fh.read()
        if "tailLines" in q:
            n = int(q["tailLines"])
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-n:]) if n > 0 else b""
        if "limitBytes" in q:
            data = data[: int(q["limitBytes"])]
        follow = q.get("follow") in ("true", "1") and not previous
        req.send_response(200)
        req.send_header("Content-Type", "text/plain")
        if not follow:
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data)
            return
        req.end_headers()
        req.wfile.write(data)
        req.wfile.flush()
        offset = os.path.getsize(path)
        with open(path, "rb") as fh:
            fh.seek(offset)
            idle_after_stop = 0
            while idle_after_stop < 3:
                chunk = fh.read(65536)
                if chunk:
                    req.wfile.write(chunk)
                    req.wfile.flush()
                    continue
                if not self.is_running(ns, pod, container):
                    idle_after_stop += 1
                time.sleep(0.2)

    def _exec(
        self,
        req: BaseHTTPRequestHandler,
        ns: str,
        pod: str,
        container: str,
        q: dict[str, list[str]],
    ) -> None:
        """Upgrade to SPDY and run the command in the container (remotecommand v4)."""
        if self.start_exec is None or req.headers.get("Upgrade", "").upper() != spdy.UPGRADE:
            self._reply(req, 400, b"exec needs an upgrade to SPDY/3.1")
            return
        protocol = spdy.negotiate(req.headers.get_all("X-Stream-Protocol-Version") or [])
        if protocol is None:
            self._reply(req, 403, f"exec: the client must offer {spdy.PROTOCOL}".encode())
            return
        request = spdy.ExecRequest(
            command=q.get("command", []),
            stdin=_flag(q, "input") or _flag(q, "stdin"),
            stdout=_flag(q, "output") or _flag(q, "stdout"),
            stderr=_flag(q, "error") or _flag(q, "stderr"),
            tty=_flag(q, "tty"),
        )
        req.send_response(101)
        req.send_header("Connection", "Upgrade")
        req.send_header("Upgrade", spdy.UPGRADE)
        req.send_header("X-Stream-Protocol-Version", protocol)
        req.end_headers()
        req.wfile.flush()
        req.close_connection = True
        start_exec = self.start_exec
        conn = spdy.Connection(sock=req.connection, reader=req.rfile)
        spdy.ExecSession(conn, request).serve(lambda argv: start_exec(ns, pod, container, argv))

    @staticmethod
    def _reply(req: BaseHTTPRequestHandler, code: int, body: bytes) -> None:
        req.send_response(code)
        req.send_header("Content-Type", "text/plain")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)
