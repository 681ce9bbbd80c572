"""A small JSON REST client for the Kubernetes API.

The agent works on plain dicts (the wire format) rather than generated models, so status
patches say exactly what a kubelet would send and unknown fields survive round trips.
Credentials come from a kubeconfig via the official client's loader.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlparse

import urllib3
from kubernetes import client as kclient
from kubernetes import config as kconfig

log = logging.getLogger(__name__)

JSON = dict[str, Any]
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


class ApiError(Exception):
    """An HTTP error answer from the API server, with its Status body."""

    def __init__(self, status: int, body: JSON | None, method: str, path: str) -> None:
        self.status = status
        self.body = body or {}
        msg = self.body.get("message", "") if isinstance(self.body, dict) else ""
        super().__init__(f"{method} {path}: HTTP {status}: {msg}")

    @property
    def reason(self) -> str:
        """The Status reason (NotFound, Conflict, Expired, ...)."""
        return str(self.body.get("reason", ""))


class Kube:
    """Thread-safe JSON client bound to one kubeconfig."""

    def __init__(self, kubeconfig: str, pool_size: int = 32) -> None:
        cfg = kclient.Configuration()
        kconfig.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=cfg
        )
        self.server = str(cfg.host).rstrip("/")
        parsed = urlparse(self.server)
        self.server_host = parsed.hostname or "127.0.0.1"
        self.server_port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.ca_file: str | None = cfg.ssl_ca_cert
        self._headers: dict[str, str] = {"Accept": "application/json"}
        token = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
        if token:
            self._headers["Authorization"] = token
        kw: dict[str, Any] = {"maxsize": pool_size, "block": False}
        if cfg.ssl_ca_cert:
            kw["ca_certs"] = cfg.ssl_ca_cert
            kw["cert_reqs"] = "CERT_REQUIRED"
        elif not cfg.verify_ssl:
            kw["cert_reqs"] = "CERT_NONE"
        if cfg.cert_file:
            kw["cert_file"] = cfg.cert_file
            kw["key_file"] = cfg.key_file
        self._pool = urllib3.PoolManager(**kw)
        self._lock = threading.Lock()

    def ca_pem(self) -> str:
        """The PEM the client trusts for the server, for pods' ca.crt fallback."""
        if not self.ca_file:
            return ""
        with open(self.ca_file, encoding="utf-8") as fh:
            return fh.read()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> JSON:
        """One request; raises ApiError on a non-2xx answer."""
        url = self.server + path
        if params:
            url += "?" + urlencode({k: v for k, v in params.items() if v is not None})
        headers = dict(self._headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        resp = self._pool.request(
            method, url, body=data, headers=headers, timeout=timeout, retries=False
        )
        payload: Any = None
        if resp.data:
            try:
                payload = json.loads(resp.data)
            except ValueError:
                payload = {"message": resp.data[:500].decode(errors="replace")}
        if resp.status >= 300:
            raise ApiError(resp.status, payload, method, path)
        return payload if isinstance(payload, dict) else {}

    def get(self, path: str, **params: Any) -> JSON:
        """GET a path."""
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: JSON) -> JSON:
        """POST (create)."""
        return self.request("POST", path, body)

    def patch(self, path: str, body: JSON, content_type: str = SMP) -> JSON:
        """PATCH, strategic merge by default."""
        return self.request("PATCH", path, body, content_type=content_type)

    def delete(self, path: str, body: JSON | None = None) -> JSON:
        """DELETE with optional DeleteOptions."""
        return self.request("DELETE", path, body)

    def watch(self, path: str, timeout_seconds: int = 300, **params: Any) -> Iterator[JSON]:
        """Stream watch events (dicts with type and object) until the server ends it."""
        q = dict(params)
        q.update(watch="true", timeoutSeconds=timeout_seconds, allowWatchBookmarks="true")
        url = self.server + path + "?" + urlencode(q)
        resp = self._pool.request(
            "GET",
            url,
            headers=self._headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=10, read=timeout_seconds + 30),
            retries=False,
        )
        try:
            if resp.status >= 300:
                raise ApiError(resp.status, json.loads(resp.read() or b"{}"), "WATCH", path)
            buf = b""
            for chunk in resp.stream(65536, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    """The REST path of a pod (or one of its subresources)."""
    p = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
    return p + (f"/{sub}" if sub else "")
