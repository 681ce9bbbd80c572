"""A controller process: flags with env-var fallbacks, leader election, probes, graceful exit.

`add_flags` gives every controller the same command line; `run` wires controllers to the API
server and blocks until SIGTERM/SIGINT (exit 0 after in-flight reconciles finish) or a fatal
error such as lost leadership (exit 1, so the pod restarts and campaigns again).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from types import FrameType

from kubetune import logs
from kubetune.kube import Kube, connect
from kubetune.runtime.controlling import Controller
from kubetune.runtime.electing import LeaderElector
from kubetune.runtime.serving import serve_probes

log = logging.getLogger(__name__)


class EnvDefault(argparse.Action):
    """A flag whose default comes from an environment variable when that is set."""

    def __init__(self, env: str, required: bool = False, default: object = None, **kw: object):
        if env in os.environ:
            default = os.environ[env]
            required = False
        kw.setdefault("help", "")
        kw["help"] = f"{kw['help']} (env {env})"
        super().__init__(default=default, required=required, **kw)  # type: ignore[arg-type]

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every kubetune process shares: where the cluster is and how to log."""
    parser.add_argument("--kubeconfig", action=EnvDefault, env="KUBECONFIG", help="kubeconfig path")
    parser.add_argument(
        "--log-format",
        action=EnvDefault,
        env="KUBETUNE_LOG_FORMAT",
        default="text",
        choices=["text", "json"],
        help="log line format",
    )
    parser.add_argument(
        "--log-level", action=EnvDefault, env="KUBETUNE_LOG_LEVEL", default="info", help="log level"
    )


def add_flags(parser: argparse.ArgumentParser, service: str) -> None:
    """The flags every controller shares."""
    prefix = "KUBETUNE_"
    add_connection_flags(parser)
    parser.add_argument(
        "--probe-address",
        action=EnvDefault,
        env=f"{prefix}PROBE_ADDRESS",
        default="0.0.0.0",
        help="address of /healthz, /readyz and /metrics",
    )
    parser.add_argument(
        "--probe-port",
        action=EnvDefault,
        env=f"{prefix}PROBE_PORT",
        type=int,
        default=8080,
        help="port of /healthz, /readyz and /metrics (0 = any free port)",
    )
    parser.add_argument(
        "--leader-elect",
        action=EnvDefault,
        env=f"{prefix}LEADER_ELECT",
        default="true",
        choices=["true", "false"],
        help="campaign for a Lease before reconciling",
    )
    parser.add_argument(
        "--leader-election-namespace",
        action=EnvDefault,
        env="POD_NAMESPACE",
        default="kubeflow",
        help="namespace of the Lease",
    )
    parser.add_argument(
        "--leader-election-id",
        action=EnvDefault,
        env=f"{prefix}LEADER_ELECTION_ID",
        default=f"kubetune-{service}",
        help="name of the Lease",
    )
    parser.add_argument(
        "--workers",
        action=EnvDefault,
        env=f"{prefix}WORKERS",
        type=int,
        default=2,
        help="concurrent reconciles",
    )
    parser.add_argument(
        "--shutdown-grace",
        action=EnvDefault,
        env=f"{prefix}SHUTDOWN_GRACE",
        type=float,
        default=20.0,
        help="seconds to let in-flight reconciles finish on SIGTERM",
    )


class Process:
    """Holds the pieces of one running controller process, for tests and for `run`."""

    def __init__(self, kube: Kube, controllers: list[Controller], args: argparse.Namespace):
        self.kube = kube
        self.controllers = controllers
        self.args = args
        self.stop = threading.Event()
        self.fatal = threading.Event()
        identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.elector: LeaderElector | None = None
        if str(args.leader_elect) == "true":
            self.elector = LeaderElector(
                kube, args.leader_election_namespace, args.leader_election_id, identity
            )
        self.started = threading.Event()
        self.probe_port = 0

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader.is_set()

    def ready(self) -> bool:
        # A standby is ready (it can take over); a leader once its caches have synced.
        if not self.leading():
            return True
        return self.started.is_set() and all(c.synced() for c in self.controllers)

    def run(self) -> int:
        server = serve_probes(
            self.args.probe_address,
            int(self.args.probe_port),
            healthy=lambda: not self.fatal.is_set(),
            ready=self.ready,
        )
        self.probe_port = server.server_address[1]
        workers: list[threading.Thread] = []
        election: threading.Thread | None = None
        try:
            if self.elector is not None:
                election = self.elector.start(self.stop)
                while not self.stop.is_set() and not self.elector.is_leader.wait(0.2):
                    pass
                if self.stop.is_set():
                    return 0
            for controller in self.controllers:
                controller.workers = int(self.args.workers)
                controller.start_informers(self.kube, self.stop)
            # Reconcile only from full caches: a worker that started early would see a partial
            # world (and list everything from the API server to make up for it).
            while not self.stop.is_set() and not all(c.synced() for c in self.controllers):
                self.stop.wait(0.05)
            for controller in self.controllers:
                workers += controller.start_workers(self.stop)
            self.started.set()
            log.info("started %s", ", ".join(c.name for c in self.controllers))
            while not self.stop.wait(0.2):
                if self.elector is not None and self.elector.lost.is_set():
                    self.fatal.set()
                    break
        finally:
            self.stop.set()
            for controller in self.controllers:
                controller.queue.shutdown()
            # A leader that lost its Lease must stop acting now: another may already lead.
            lost = self.elector is not None and self.elector.lost.is_set()
            grace = 0.5 if lost else float(self.args.shutdown_grace)
            end = time.monotonic() + grace
            for thread in workers:
                thread.join(max(0.0, end - time.monotonic()))
            if election is not None and self.elector is not None and not lost:
                # The election thread releases the Lease on stop (one writer: no 409 race).
                election.join(self.elector.renew_deadline + 1)
            server.shutdown()
            server.server_close()
        return 1 if self.fatal.is_set() else 0


def run(controllers: list[Controller], args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT (exit 0) or a fatal error (exit 1)."""
    logs.configure(args.log_format, args.log_level)
    kube = Kube(connect(args.kubeconfig))
    process = Process(kube, controllers, args)

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        process.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return process.run()
