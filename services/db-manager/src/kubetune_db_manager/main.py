"""`db-manager`: serve Katib's DBManager gRPC API (ReportObservationLog, GetObservationLog,
DeleteObservationLog) from Trial objects, so Katib's SDK (`report_metrics`,
`KatibClient.get_trial_metrics`) works and nobody runs a database.

Probes: /healthz and /readyz (ready once the gRPC port is bound), /metrics (RPCs by method
and gRPC code, their latency). Exit codes: 0 after SIGTERM/SIGINT (in-flight RPCs finish
first, within `--shutdown-grace`); 2 bad flags or the port cannot be bound.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from kubetune import flags, logs
from kubetune.flags import EnvDefault
from kubetune.runtime.serving import serve_probes
from kubetune.wakeups import wait_in_main_thread

log = logging.getLogger("db-manager")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="db-manager",
        description="Katib's gRPC DBManager API on top of Trial objects (no database).",
    )
    flags.add_connection_flags(p)
    flags.add_probe_flags(p)

    def flag(name: str, **kw: object) -> None:
        env = "KUBETUNE_" + name.upper().replace("-", "_")
        p.add_argument(f"--{name}", action=EnvDefault, env=env, **kw)  # type: ignore[arg-type]

    flags.add_listen_flags(
        p, env_prefix="KUBETUNE_DB_MANAGER", address="0.0.0.0", port=6789, what="gRPC server"
    )
    flags.add_watch_namespace_flag(
        p, deprecated_env="KUBETUNE_NAMESPACE", what="serve the Trials of"
    )
    flags.add_deprecated_alias(p, "--namespace", "--watch-namespace")
    flag(
        "max-message-bytes",
        type=int,
        default=1024 * 1024,
        help="largest gRPC message (Katib's SDK sends a few metrics per report)",
    )
    flag("max-concurrent-rpcs", type=int, default=64, help="RPCs in progress")
    flag(
        "workers",
        type=int,
        default=32,
        help="threads serving RPCs, made as needed: a report waits for its Trial's write in "
        "one, so fewer than --max-concurrent-rpcs cap how many reports a write can merge; "
        "each holds its request's raw bytes while it waits for the budget",
    )
    flag(
        "budget-bytes",
        type=int,
        default=32 * 1024 * 1024,
        help="memory the requests being served may take, priced from their size and metric "
        "logs before they are parsed; a request that finds no room is RESOURCE_EXHAUSTED",
    )
    flag(
        "budget-wait",
        type=float,
        default=2.0,
        help="seconds a request waits for room in --budget-bytes",
    )
    flag(
        "recent-trials",
        type=int,
        default=100,
        help="with --watch-namespace: Trials whose last write is kept as the base of the next "
        "(saves a read per report; 0 = read every time)",
    )
    flag("max-deadline", type=float, default=30.0, help="seconds an RPC may take")
    flags.add_shutdown_grace_flag(
        p, default=10.0, what="in-flight RPCs", deprecated_env="KUBETUNE_GRACE"
    )
    flags.add_deprecated_alias(p, "--grace", "--shutdown-grace")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.configure(args.log_format, args.log_level)
    positive = ("max_message_bytes", "max_concurrent_rpcs", "workers", "max_deadline")
    for name in (*positive, "budget_bytes", "budget_wait"):
        if getattr(args, name) <= 0:
            log.error("--%s must be positive, got %s", name.replace("_", "-"), getattr(args, name))
            return 2
    if args.recent_trials < 0:
        log.error("--recent-trials must be 0 or more, got %s", args.recent_trials)
        return 2
    # Probes first: importing the Kubernetes client and Katib's SDK takes seconds (minutes on
    # a loaded node), and a liveness probe must not kill the process meanwhile.
    serving_now = threading.Event()
    probes = serve_probes(
        args.probe_address, args.probe_port, healthy=lambda: True, ready=serving_now.is_set
    )
    from kubetune.kube import Kube, connect  # slow imports: after the probes are up
    from kubetune_db_manager import authenticating, serving, storing

    limits = serving.Limits(
        args.max_message_bytes,
        args.max_concurrent_rpcs,
        args.workers,
        args.max_deadline,
        args.budget_bytes,
        args.budget_wait,
    )
    # At most one API connection per worker (only the thread writing a Trial calls the API).
    kube = Kube(connect(args.kubeconfig, pool_size=args.workers))
    store = storing.Store(kube, args.watch_namespace or None, recent=args.recent_trials)
    address = flags.host_port(args.address, args.port)
    try:
        auth = authenticating.Authorizer(kube)
        server, port = serving.server(store, address, limits, auth=auth)
    except (OSError, RuntimeError) as e:
        log.error("cannot listen on %s: %s", address, e)
        probes.shutdown()
        return 2
    serving_now.set()
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info(
        "serving Katib's DBManager on port %d (trials in %s)",
        port,
        args.watch_namespace or "all namespaces",
    )
    wait_in_main_thread(stop)
    server.stop(args.shutdown_grace).wait()
    probes.shutdown()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
