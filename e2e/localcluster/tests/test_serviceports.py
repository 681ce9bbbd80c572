"""The node agent's forwarders for Services whose pods listen on another port (real sockets)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from localcluster.nodeagent.names import NameTable
from localcluster.nodeagent.serviceports import (
    FORWARD_ANNOTATION,
    Route,
    ServiceProxy,
    routes_from,
    service_address,
)

JSON = dict[str, Any]
NODE_IP = "10.244.1.2"


def _service(
    name: str, ports: list[JSON], cluster_ip: str = "10.96.0.10", forward: bool = True
) -> JSON:
    annotations = {FORWARD_ANNOTATION: "true"} if forward else {}
    return {
        "metadata": {"namespace": "kubeflow", "name": name, "annotations": annotations},
        "spec": {"clusterIP": cluster_ip, "ports": ports},
    }


def _slice(service: str, ports: list[JSON], *addresses: str) -> JSON:
    return {
        "metadata": {
            "namespace": "kubeflow",
            "name": f"{service}-abcde",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
        "ports": ports,
    }


def test_an_annotated_service_is_routed_at_its_port_to_the_pods_port() -> None:
    """katib-db-manager as the local overlay runs it: port 6789, targetPort `api` = 26789.
    Services without the annotation are never forwarded (a forwarder holds its port)."""
    services = [
        _service("katib-db-manager", [{"name": "api", "port": 6789, "targetPort": "api"}]),
        _service("webhook", [{"name": "https", "port": 443, "targetPort": 9443}], forward=False),
        _service("headless", [{"name": "g", "port": 1, "targetPort": 2}], cluster_ip="None"),
    ]
    slices = [
        _slice("katib-db-manager", [{"name": "api", "port": 26789}], NODE_IP),
        _slice("webhook", [{"name": "https", "port": 9443}], NODE_IP),
        _slice("headless", [{"name": "g", "port": 2}], NODE_IP),
    ]
    assert routes_from(services, slices) == {
        ("kubeflow", "katib-db-manager"): (Route(6789, ((NODE_IP, 26789),)),)
    }


def test_a_service_without_endpoints_is_not_routed() -> None:
    services = [_service("db", [{"name": "api", "port": 6789, "targetPort": "api"}])]
    assert routes_from(services, [_slice("db", [{"name": "api", "port": 26789}])]) == {}


def test_addresses_are_loopback_and_differ_per_agent_and_service() -> None:
    a = service_address("/state/one:node", "kubeflow", "katib-db-manager")
    assert a.startswith("127.") and not a.startswith("127.0.")
    assert a == service_address("/state/one:node", "kubeflow", "katib-db-manager")
    assert a != service_address("/state/two:node", "kubeflow", "katib-db-manager")
    assert a != service_address("/state/one:node", "kubeflow", "other")


@pytest.fixture
def echo() -> Iterator[int]:
    """A server on 127.0.0.1 answering each line with `echo: <line>`."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as f:
                for line in f:
                    f.write(b"echo: " + line)
                    f.flush()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_the_proxy_forwards_the_service_port_to_the_pods_port(echo: int) -> None:
    proxy = ServiceProxy("test-seed")
    try:
        routes = {("kubeflow", "db"): (Route(6789, (("127.0.0.1", echo),)),)}
        served = proxy.update(routes)
        address = service_address("test-seed", "kubeflow", "db")
        assert served == {("kubeflow", "db"): (address,)}
        with socket.create_connection((address, 6789), timeout=5) as conn:
            conn.sendall(b"hello\n")
            assert conn.makefile("rb").readline() == b"echo: hello\n"
        # Gone from the routes: the port is closed again.
        assert proxy.update({}) == {}
        with pytest.raises(OSError):
            socket.create_connection((address, 6789), timeout=5).close()
    finally:
        proxy.close()


def test_the_hosts_file_names_the_forwarder_for_a_routed_service() -> None:
    slices = [_slice("katib-db-manager", [{"name": "api", "port": 26789}], NODE_IP)]
    table = NameTable.from_slices(slices).with_addresses(
        {("kubeflow", "katib-db-manager"): ("127.9.9.9",)}
    )
    pod = {"metadata": {"namespace": "ns", "name": "trial-pod"}, "spec": {}}
    hosts = table.render(pod, NODE_IP)
    assert "127.9.9.9\tkatib-db-manager.kubeflow.svc.cluster.local" in hosts
    assert f"{NODE_IP}\tkatib-db-manager" not in hosts
