"""A controller process: its flags, leader election, probes, graceful exit.

`add_flags` gives every controller the same command line (from `kubetune.flags`); `run` wires
controllers to the API server and blocks until SIGTERM/SIGINT (exit 0 after in-flight
reconciles finish) or a fatal error such as lost leadership (exit 1, so the pod restarts and
campaigns again).
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import time
import uuid
from types import FrameType

from kubetune import flags, logs
from kubetune.kube import Kube, connect
from kubetune.runtime.controlling import Controller
from kubetune.runtime.serving import serve_probes
from kubetune.typenames import TYPE_CHECKING
from kubetune.wakeups import Wakeup, first_of, wait_in_main_thread

if TYPE_CHECKING:
    from kubetune.runtime.electing import LeaderElector

log = logging.getLogger(__name__)


def add_flags(
    parser: argparse.ArgumentParser,
    service: str,
    *,
    probe_port: int = 8080,
    leader_election: bool = True,
) -> None:
    """The flags every controller shares: `kubetune.flags`' connection, probe and leader
    election flags, and the runtime's own knobs (workers, shutdown grace). A process that is
    one of a kind by construction (the algorithm of one Suggestion) has no election."""
    flags.add_connection_flags(parser)
    flags.add_probe_flags(parser, port=probe_port)
    if leader_election:
        flags.add_leader_election_flags(parser, service)
    else:
        parser.set_defaults(leader_elect=False)
    parser.add_argument(
        "--workers",
        action=flags.EnvDefault,
        env="KUBETUNE_WORKERS",
        type=int,
        default=2,
        help="concurrent reconciles",
    )
    flags.add_shutdown_grace_flag(parser, default=20.0, what="in-flight reconciles")


class Process:
    """Holds the pieces of one running controller process, for tests and for `run`."""

    def __init__(
        self,
        kube: Kube,
        controllers: list[Controller],
        args: argparse.Namespace,
        *,
        probes_required: bool = True,
    ):
        self.kube = kube
        self.controllers = controllers
        self.args = args
        # False: run without probes when the port is taken (pods sharing one network, as in
        # the local cluster, where every algorithm wants 6789; its readiness is a file).
        self.probes_required = probes_required
        self.stop = Wakeup()
        self.fatal = threading.Event()
        identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.elector: LeaderElector | None = None
        if args.leader_elect:
            # Imported here: a process without leader election (an algorithm pod, one per
            # Experiment) need not load it and urllib3 (16 ms of CPU at every start).
            from kubetune.runtime.electing import LeaderElector

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
        try:
            server = serve_probes(
                self.args.probe_address,
                int(self.args.probe_port),
                healthy=lambda: not self.fatal.is_set(),
                ready=self.ready,
            )
        except OSError as e:
            if self.probes_required:
                raise
            log.warning("no probe server on port %s: %s", self.args.probe_port, e)
            server = None
        self.probe_port = server.server_address[1] if server is not None else 0
        workers: list[threading.Thread] = []
        election: threading.Thread | None = None
        try:
            if self.elector is not None:
                election = self.elector.start(self.stop)
                wait_in_main_thread(first_of(self.stop, self.elector.is_leader))
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
            # Asleep until SIGTERM or a lost Lease (a look for a signal once a second).
            if self.elector is None:
                wait_in_main_thread(self.stop)
            else:
                wait_in_main_thread(first_of(self.stop, self.elector.lost))
                if self.elector.lost.is_set():
                    self.fatal.set()
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
            if server is not None:
                server.shutdown()
                server.server_close()
        return 1 if self.fatal.is_set() else 0


def run(
    controllers: list[Controller], args: argparse.Namespace, *, probes_required: bool = True
) -> int:
    """Run until SIGTERM/SIGINT (exit 0) or a fatal error (exit 1)."""
    logs.configure(args.log_format, args.log_level)
    kube = Kube(connect(args.kubeconfig))
    process = Process(kube, controllers, args, probes_required=probes_required)

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        process.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return process.run()
