"""The node's pod address: a /32 secondary address on ``lo``.

Endpoints reject loopback pod IPs, and the host's real interface must never receive test
traffic. An extra address such as 10.244.17.3 on ``lo`` is neither: validation accepts it,
and every packet to it stays on the loopback device. Pods share the host network, so a
pod listening on 0.0.0.0:<port> is reachable at <podIP>:<port> from this host only.
The address is derived from a seed (the state dir) so concurrent agents pick different
ones, and removed again on shutdown. Each claim is recorded in ``/run/localcluster-nodeagent``
with the agent's PID, so an agent that was SIGKILLed has its address removed by the next.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import logging
import os
import socket
import subprocess

import psutil

log = logging.getLogger(__name__)
REGISTRY = "/run/localcluster-nodeagent/addresses"


def _record(ip: str) -> None:
    os.makedirs(REGISTRY, exist_ok=True)
    me = psutil.Process()
    with open(os.path.join(REGISTRY, ip), "w", encoding="utf-8") as fh:
        json.dump({"pid": me.pid, "ctime": me.create_time()}, fh)


def sweep_stale() -> None:
    """Remove addresses whose agent is gone."""
    for path in glob.glob(os.path.join(REGISTRY, "10.244.*")):
        try:
            with open(path, encoding="utf-8") as fh:
                rec = json.load(fh)
            alive = abs(psutil.Process(int(rec["pid"])).create_time() - rec["ctime"]) < 0.01
        except (OSError, ValueError, KeyError, psutil.NoSuchProcess):
            alive = False
        if not alive:
            release_lo_address(os.path.basename(path))


def host_addresses() -> set[str]:
    """All IPv4 addresses configured on this host."""
    return {
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET
    }


def claim_lo_address(seed: str) -> str | None:
    """Add a free 10.244.x.y/32 to lo; None if that is not possible (not root, no ip)."""
    with contextlib.suppress(OSError):
        sweep_stale()
    digest = hashlib.sha256(seed.encode()).digest()
    taken = host_addresses()
    for i in range(0, 60, 2):
        ip = f"10.244.{digest[i % 32]}.{digest[(i + 1) % 32] % 254 + 1}"
        if ip in taken:
            continue
        try:
            res = subprocess.run(
                ["ip", "addr", "add", f"{ip}/32", "dev", "lo"],
                capture_output=True,
                text=True,
                check=False,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("cannot add a pod address to lo: %s", exc)
            return None
        if res.returncode == 0:
            with contextlib.suppress(OSError):
                _record(ip)
            return ip
        if "File exists" not in res.stderr:
            log.warning("cannot add a pod address to lo: %s", res.stderr.strip())
            return None
    return None


def release_lo_address(ip: str) -> None:
    """Remove an address added by claim_lo_address."""
    subprocess.run(
        ["ip", "addr", "del", f"{ip}/32", "dev", "lo"], capture_output=True, check=False, timeout=10
    )
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(REGISTRY, ip))
