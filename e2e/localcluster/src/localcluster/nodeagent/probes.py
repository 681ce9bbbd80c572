"""Readiness, liveness and startup probes (httpGet, tcpSocket, exec, grpc as tcp).

Pods share the host network, so network probes always dial 127.0.0.1 (never the podIP),
whatever ``host`` says. exec probes run inside the container's namespaces via nsenter.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


def _port(value: Any, container: JSON) -> int:
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for p in container.get("ports") or []:
        if p.get("name") == value:
            return int(p["containerPort"])
    raise ValueError(f"named port {value!r} not found")


def run_probe(probe: JSON, container: JSON, exec_in: Callable[[list[str], float], int]) -> bool:
    """Run one probe once; True on success."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "httpGet" in probe:
            hg = probe["httpGet"]
            scheme = str(hg.get("scheme", "HTTP")).lower()
            url = f"{scheme}://127.0.0.1:{_port(hg['port'], container)}{hg.get('path', '/')}"
            req = urllib.request.Request(url)
            for h in hg.get("httpHeaders") or []:
                req.add_header(h["name"], h["value"])
            import ssl

            ctx = ssl._create_unverified_context() if scheme == "https" else None
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
                return 200 <= int(resp.status) < 400
        if "tcpSocket" in probe or "grpc" in probe:
            ref = probe.get("tcpSocket") or probe.get("grpc") or {}
            with socket.create_connection(
                ("127.0.0.1", _port(ref["port"], container)), timeout=timeout
            ):
                return True
        if "exec" in probe:
            return exec_in(list(probe["exec"].get("command") or []), timeout) == 0
    except (OSError, ValueError, urllib.error.URLError, subprocess.SubprocessError):
        return False
    return False


@dataclass
class ProbeState:
    """Schedule and counters of one probe of one container run."""

    probe: JSON
    kind: str  # readiness | liveness | startup
    started: float = field(default_factory=time.monotonic)
    next_at: float = 0.0
    successes: int = 0
    failures: int = 0
    result: bool = False

    def __post_init__(self) -> None:
        self.next_at = self.started + float(self.probe.get("initialDelaySeconds") or 0)

    def due(self, now: float) -> bool:
        """Time to probe again."""
        return now >= self.next_at

    def record(self, ok: bool, now: float) -> bool:
        """Count a result; returns the thresholded state (True = passing)."""
        self.next_at = now + float(self.probe.get("periodSeconds") or 10)
        if ok:
            self.successes += 1
            self.failures = 0
            if self.successes >= int(self.probe.get("successThreshold") or 1):
                self.result = True
        else:
            self.failures += 1
            self.successes = 0
            if self.failures >= int(self.probe.get("failureThreshold") or 3):
                self.result = False
        return self.result

    def failed_out(self) -> bool:
        """Liveness/startup: failures reached the threshold."""
        return self.failures >= int(self.probe.get("failureThreshold") or 3)
