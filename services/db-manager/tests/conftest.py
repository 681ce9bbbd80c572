"""The `start` fixture: db-manager processes serving the test's namespace (or all)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dbclient import Server

from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.waiting import wait_for

SERVING = re.compile(r"serving Katib's DBManager on port (\d+)")


def bound_port(process: ServiceProcess) -> int:
    """The port a `--port 0` run bound, from its log: a port picked free by the test and bound
    later by the process can be taken in between by any of CI's parallel envs."""

    def logged() -> int | None:
        assert process.alive(), process.logs()
        found = SERVING.search(process.output())
        return int(found.group(1)) if found else None

    # Importing the Kubernetes client and Katib's SDK takes seconds, minutes on a loaded machine.
    return wait_for("db-manager to say which port it serves", logged, 300)


@pytest.fixture
def start(
    cluster: Any, namespace: str, services: Callable[..., ServiceProcess]
) -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def run(*extra: str, every_namespace: bool = False, token: str | None = None) -> Server:
        """A db-manager serving the test's namespace, or all of them; its stub sends `token`."""
        scope = [] if every_namespace else ["--watch-namespace", namespace]
        process = services(
            "db-manager",
            "--kubeconfig",
            cluster.kubeconfig,
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            *scope,
            "--probe-port",
            "0",
            *extra,
        ).start()
        server = Server(process, bound_port(process), token)
        server.ready()
        made.append(server)
        return server

    yield run
    for server in made:
        server.channel.close()
