"""The `start` fixture: db-manager processes serving the test's namespace (or all)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dbclient import Server

from kubetune_testkit.processes import ServiceProcess, free_port


@pytest.fixture
def start(
    cluster: Any, namespace: str, services: Callable[..., ServiceProcess]
) -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def run(*extra: str, every_namespace: bool = False, token: str | None = None) -> Server:
        """A db-manager serving the test's namespace, or all of them; its stub sends `token`."""
        port = free_port()
        scope = [] if every_namespace else ["--watch-namespace", namespace]
        process = services(
            "db-manager",
            "--kubeconfig",
            cluster.kubeconfig,
            "--address",
            "127.0.0.1",
            "--port",
            str(port),
            *scope,
            "--probe-port",
            "0",
            *extra,
        ).start()
        server = Server(process, port, token)
        server.ready()
        made.append(server)
        return server

    yield run
    for server in made:
        server.channel.close()
