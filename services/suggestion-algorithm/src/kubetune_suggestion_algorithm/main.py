"""`suggestion-algorithm`: the process in the algorithm Deployment of one Suggestion.

Watches its Suggestion, its Experiment and the Experiment's Trials; every change (and a periodic
resync) wakes one `syncing.Syncer.sync` pass. /healthz and /readyz are served on
`--probe-port` (the Service's 6789). SIGTERM ends the process with 0 after the pass in progress.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from kubetune import flags, logs
from kubetune.flags import EnvDefault
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS, Kube, connect
from kubetune.runtime.serving import serve_probes
from kubetune.runtime.watching import Event, Informer
from kubetune_suggestion_algorithm import syncing

log = logging.getLogger("kubetune_suggestion_algorithm")

READY_FILE = "ready"
"""Under the data directory, written after the first pass: the Deployment's readiness probe."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="suggestion-algorithm",
        description="Fill a Suggestion's status with assignments from a search algorithm.",
    )
    flags.add_connection_flags(p)
    flags.add_probe_flags(p, port=6789)
    p.add_argument(
        "--suggestion",
        action=EnvDefault,
        env="KUBETUNE_SUGGESTION",
        required=True,
        help="Suggestion name (= Experiment name)",
    )
    p.add_argument(
        "--namespace",
        action=EnvDefault,
        env="KUBETUNE_NAMESPACE",
        required=True,
        help="namespace of the Suggestion",
    )
    p.add_argument(
        "--algorithm",
        action=EnvDefault,
        env="KUBETUNE_ALGORITHM",
        default="",
        help="algorithm this process was started for (the Suggestion's spec wins)",
    )
    p.add_argument(
        "--data-dir",
        action=EnvDefault,
        env="KUBETUNE_DATA_DIR",
        default="/opt/katib/data",
        help="directory of the algorithm state ('' = in memory)",
    )
    p.add_argument(
        "--max-suggestion-bytes",
        action=EnvDefault,
        env="KUBETUNE_MAX_SUGGESTION_BYTES",
        type=int,
        default=syncing.DEFAULT_MAX_BYTES,
        help="keep the Suggestion object below this size: more new assignments wait until "
        "their Trials exist (etcd refuses objects above ~1.5 MiB)",
    )
    p.add_argument(
        "--resync",
        action=EnvDefault,
        env="KUBETUNE_RESYNC",
        type=float,
        default=30.0,
        help="seconds between passes when nothing changes",
    )
    return p


def data_dir(path: str) -> Path | None:
    """The state directory; an unwritable one falls back to a temporary directory (logged)."""
    if not path:
        return None
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-test"
        probe.write_text("")
        probe.unlink()
        return directory
    except OSError as e:
        fallback = Path(tempfile.mkdtemp(prefix="kubetune-suggestion-"))
        log.warning("data dir %s is not writable (%s); state goes to %s", path, e, fallback)
        return fallback


def run(args: argparse.Namespace, stop: threading.Event, wake: threading.Event) -> int:
    """Pass after pass until `stop`; `wake` cuts a wait short (set it together with `stop`)."""
    kube = Kube(connect(args.kubeconfig))
    ready = threading.Event()
    try:
        server = serve_probes(
            args.probe_address, int(args.probe_port), healthy=lambda: True, ready=ready.is_set
        )
    except OSError as e:  # pods sharing one network (the local cluster) all want 6789
        log.warning("no probe server on port %s: %s", args.probe_port, e)
        server = None
    directory = data_dir(args.data_dir)
    marker = (directory or Path(tempfile.gettempdir())) / READY_FILE
    marker.unlink(missing_ok=True)

    def on_event(event: Event) -> None:
        wake.set()

    informers = [
        Informer(kube, SUGGESTIONS, on_event, namespace=args.namespace),
        Informer(kube, EXPERIMENTS, on_event, namespace=args.namespace),
        Informer(
            kube,
            TRIALS,
            on_event,
            namespace=args.namespace,
            label_selector=syncing.trial_selector(args.suggestion),
        ),
    ]
    for informer in informers:
        informer.start(stop)
    syncer = syncing.Syncer(
        kube,
        args.namespace,
        args.suggestion,
        args.algorithm,
        directory,
        max_bytes=int(args.max_suggestion_bytes),
    )
    pause = 0.5
    try:
        while not stop.is_set():
            if not all(i.synced.is_set() for i in informers):
                stop.wait(0.1)
                continue
            wake.clear()
            try:
                # list() of a dict view runs in C under the GIL: a consistent snapshot of
                # the Trials cache while the watch thread updates it.
                again = syncer.sync(list(informers[2].cache.values()))
                if not ready.is_set():
                    marker.write_text("ready\n")
                    ready.set()
                pause = 0.5
            except Exception:
                log.exception("pass failed; again in %.1fs", pause)
                stop.wait(pause)
                pause = min(pause * 2, 30.0)
                continue
            if not again:
                wake.wait(float(args.resync))
    finally:
        stop.set()
        if server is not None:
            server.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.configure(args.log_format, args.log_level)
    stop, wake = threading.Event(), threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()
        wake.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        return run(args, stop, wake)
    except Exception:
        log.exception("fatal error")
        return 1


if __name__ == "__main__":
    sys.exit(main())
