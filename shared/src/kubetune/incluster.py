"""The API server as a pod reaches it, without the `kubernetes` client package.

Why: importing `kubernetes.client` builds hundreds of model classes, about 0.35 s of CPU. The
metrics collector starts in every trial pod, so on a 2-core node running 8 trials of 3 s that
import alone took a sixth of the machine. A pod needs none of it: the API server's address is
in `KUBERNETES_SERVICE_HOST`/`_PORT`, and the ServiceAccount's token and CA are files. Every
kubeconfig (exec plugins, auth providers, client certificates) still goes through the client
(`kube.connect`).

The token is read again once a minute, as client-go does: the kubelet rotates the projected
token before it expires.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

import urllib3

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV, PORT_ENV = "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"
TOKEN_REREAD_SECONDS = 60.0


class NotInCluster(Exception):
    """This process has no in-cluster configuration; the message says what is missing."""


def host_url(host: str, port: str) -> str:
    """`https://host:port`, an IPv6 address in brackets."""
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


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
        self.pool = urllib3.PoolManager(
            maxsize=maxsize, cert_reqs="CERT_REQUIRED", ca_certs=str(ca_file)
        )

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

    def prepare(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        headers: Mapping[str, str],
    ) -> tuple[str, urllib3.HTTPHeaderDict]:
        """The URL of `path` with `query`, and `headers` with the token added (`method` is
        the same for every request here; the kubernetes client's twin takes it)."""
        url = self.host + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        sent = urllib3.HTTPHeaderDict(headers)
        sent["Authorization"] = self._header()
        return url, sent
