"""Services forwarded from a loopback address of their own, for pods that listen elsewhere.

Pods share the host network, so a pod cannot always listen on its Service's port: 6789, the
port of Katib's ``katib-db-manager`` Service, is every suggestion-algorithm pod's, so kubetune's
local overlay runs db-manager on another (``targetPort: api``). Clients still dial the Service's
name and port (Katib's SDK: ``katib-db-manager.kubeflow:6789``), and with no kube-proxy a
ClusterIP does not route. So, as kube-proxy's first (userspace) mode did, the agent listens for
a Service annotated ``localcluster.kubetune.io/forward: "true"`` on an address of its own, at
every TCP port of the Service, and forwards each connection to an endpoint's target port. The
pods' hosts files name that address for the Service (``names.NameTable``).

Only annotated Services: a listener holds its port on its address, and a pod's server that
later binds 0.0.0.0 at that port without SO_REUSEPORT would fail (the training-operator's
webhook did, at its target port, when every Service whose ports differ was forwarded).

The address is a 127.x.y.z (all of 127/8 is the loopback device's) derived from the agent's
seed and the Service, so concurrent clusters on one host get different ones. Listeners set
SO_REUSEPORT, so a pod's server that binds 0.0.0.0 on the same port with it (gRPC does) still
starts; the kernel gives each connection to the most specific listener. A Service whose
listeners cannot all be bound keeps its endpoint addresses, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)
JSON = dict[str, Any]
Target = tuple[str, int]
CONNECT_TIMEOUT = 5.0
CHUNK = 65536
FORWARD_ANNOTATION = "localcluster.kubetune.io/forward"


@dataclass(frozen=True)
class Route:
    """One listening port of a Service and the endpoints (address, port) it forwards to."""

    port: int
    targets: tuple[Target, ...]


def _slice_ports(slices: Iterable[JSON]) -> dict[tuple[str, str], dict[str, tuple[Target, ...]]]:
    """(namespace, service) -> port name -> the non-terminating endpoints at that port."""
    found: dict[tuple[str, str], dict[str, set[Target]]] = {}
    for s in slices:
        meta = s.get("metadata") or {}
        svc = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if not svc or s.get("addressType", "IPv4") != "IPv4":
            continue
        addrs = [
            str(a)
            for ep in s.get("endpoints") or []
            if not (ep.get("conditions") or {}).get("terminating")
            for a in ep.get("addresses") or []
        ]
        by_name = found.setdefault((str(meta.get("namespace") or ""), svc), {})
        for p in s.get("ports") or []:
            if p.get("protocol", "TCP") == "TCP" and isinstance(p.get("port"), int):
                by_name.setdefault(str(p.get("name") or ""), set()).update(
                    (a, int(p["port"])) for a in addrs
                )
    return {k: {n: tuple(sorted(t)) for n, t in v.items()} for k, v in found.items()}


def routes_from(
    services: Iterable[JSON], slices: Iterable[JSON]
) -> dict[tuple[str, str], tuple[Route, ...]]:
    """The annotated Services with endpoints, each with a route for every TCP port it serves."""
    endpoints = _slice_ports(slices)
    out: dict[tuple[str, str], tuple[Route, ...]] = {}
    for svc in services:
        meta, spec = svc.get("metadata") or {}, svc.get("spec") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if (meta.get("annotations") or {}).get(FORWARD_ANNOTATION) != "true":
            continue
        if spec.get("clusterIP") == "None" or key not in endpoints:
            continue  # headless: clients dial the pods themselves
        routes = []
        for p in spec.get("ports") or []:
            targets = endpoints[key].get(str(p.get("name") or ""), ())
            if p.get("protocol", "TCP") == "TCP" and targets and isinstance(p.get("port"), int):
                routes.append(Route(int(p["port"]), targets))
        if routes:
            out[key] = tuple(sorted(routes, key=lambda r: r.port))
    return out


def service_address(seed: str, namespace: str, name: str) -> str:
    """The Service's loopback address for this agent: 127.a.b.c, never 127.0.x.x (localhost,
    the host's own name)."""
    digest = hashlib.sha256(f"{seed}\0{namespace}\0{name}".encode()).digest()
    return f"127.{1 + digest[0] % 254}.{digest[1]}.{1 + digest[2] % 254}"


class _Listener:
    """One listening socket forwarding every connection to one of its targets."""

    def __init__(self, address: str, port: int, targets: tuple[Target, ...]) -> None:
        self.targets = targets
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            self.sock.bind((address, port))
            self.sock.listen(128)
        except OSError:
            self.sock.close()
            raise
        self._turn = itertools.count()
        self._thread = threading.Thread(
            target=self._accept, name=f"forward-{address}:{port}", daemon=True
        )
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        targets = self.targets
        start = next(self._turn)
        for i in range(len(targets)):
            target = targets[(start + i) % len(targets)]
            try:
                upstream = socket.create_connection(target, timeout=CONNECT_TIMEOUT)
            except OSError as exc:
                log.debug("forward to %s:%d failed: %s", *target, exc)
                continue
            upstream.settimeout(None)
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()
            upstream.close()
            break
        client.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self.sock.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy until ``src`` ends, then end ``dst``'s writing half."""
    with contextlib.suppress(OSError):
        while data := src.recv(CHUNK):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class ServiceProxy:
    """The agent's forwarders, kept to the current routes."""

    def __init__(self, seed: str) -> None:
        self.seed = seed
        self._listeners: dict[tuple[str, str, int], _Listener] = {}
        self._failed: set[tuple[str, str, int]] = set()  # warned about once

    def update(
        self, routes: dict[tuple[str, str], tuple[Route, ...]]
    ) -> dict[tuple[str, str], tuple[str, ...]]:
        """Listen for ``routes`` (and stop what is no longer routed); the address of each
        Service whose every route is listened to, for the hosts files."""
        wanted = {(ns, name, r.port): r.targets for (ns, name), rs in routes.items() for r in rs}
        for key in [k for k in self._listeners if k not in wanted]:
            self._listeners.pop(key).close()
        served: dict[tuple[str, str], tuple[str, ...]] = {}
        for (ns, name), rs in routes.items():
            address = service_address(self.seed, ns, name)
            complete = True
            for r in rs:
                listener = self._listeners.get((ns, name, r.port))
                if listener is not None:
                    listener.targets = r.targets
                    continue
                try:
                    self._listeners[(ns, name, r.port)] = _Listener(address, r.port, r.targets)
                except OSError as exc:
                    level = logging.DEBUG if (ns, name, r.port) in self._failed else logging.WARNING
                    self._failed.add((ns, name, r.port))
                    log.log(
                        level, "cannot forward %s/%s at %s:%d: %s", ns, name, address, r.port, exc
                    )
                    complete = False
            if complete:
                served[(ns, name)] = (address,)
        return served

    def close(self) -> None:
        for listener in self._listeners.values():
            listener.close()
        self._listeners.clear()
