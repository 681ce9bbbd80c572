"""`webhook serve` (the admission server) and `webhook certs` (CA + serving certificate).

Every flag has an environment fallback (`KUBETUNE_*`); logs go to stdout (JSON lines with
`--log-format=json`); SIGTERM stops accepting connections and exits 0.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from kubetune import config as katib_config
from kubetune import flags, logs
from kubetune.flags import EnvDefault
from kubetune.kube import Kube, connect
from kubetune.runtime.serving import serve_probes
from kubetune.wakeups import wait_in_main_thread
from kubetune_webhook import (
    authorizing,
    certificates,
    katibguard,
    reviewing,
    rotating,
    serving,
    syncing,
    validating,
)
from kubetune_webhook.lookups import KubeCluster, OwnerChain

log = logging.getLogger("kubetune_webhook")

DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="webhook",
        description="kubetune admission webhook: Experiment defaults and validation, trial pod "
        "injection, the FromVolume PV check",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTPS admission server")
    flags.add_connection_flags(serve)
    flags.add_listen_flags(
        serve, env_prefix="KUBETUNE_WEBHOOK", address="0.0.0.0", port=8443, what="HTTPS server"
    )
    serve.add_argument(
        "--probe-port",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_PROBE_PORT",
        type=flags.port_number,
        default=0,
        help="port of a plain-HTTP server (on --address) for the kubelet's probes: /healthz "
        "(the admission loop still turns), /readyz (as on the HTTPS port) and /metrics; a probe "
        "there costs no TLS handshake. 0 = none: probes only on the HTTPS port",
    )
    serve.add_argument(
        "--cert-file",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_CERT_FILE",
        default=f"{DEFAULT_CERT_DIR}/tls.crt",
        help="serving certificate (PEM), reloaded on change",
    )
    serve.add_argument(
        "--key-file",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_KEY_FILE",
        default=f"{DEFAULT_CERT_DIR}/tls.key",
        help="serving key (PEM), reloaded on change",
    )
    serve.add_argument(
        "--cert-check-interval",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_CERT_CHECK_INTERVAL",
        type=float,
        default=1.0,
        help="seconds between checks of the certificate files",
    )
    flags.add_config_flag(serve)
    serve.add_argument(
        "--max-body-bytes",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_MAX_BODY_BYTES",
        type=int,
        default=serving.DEFAULT_MAX_BODY,
        help="larger request bodies get HTTP 413",
    )
    _add_env_flags(
        serve,
        (
            (
                "max-connections",
                _positive_int,
                serving.DEFAULT_MAX_CONNECTIONS,
                "open connections at most; at the limit a new one closes the oldest idle one",
            ),
            (
                "workers",
                _positive_int,
                serving.DEFAULT_WORKERS,
                "admission requests answered at once",
            ),
            ("handshake-timeout", _positive_float, 5.0, "seconds for a client's TLS handshake"),
            (
                "read-timeout",
                _positive_float,
                5.0,
                "seconds for a request to arrive whole (and for a new connection's first request)",
            ),
            ("idle-timeout", _positive_float, 60.0, "seconds a keep-alive connection may idle"),
            (
                "request-timeout",
                _positive_float,
                10.0,
                "seconds for a whole request, read to answer (HTTP 504 past it)",
            ),
        ),
    )
    serve.add_argument(
        "--require-namespace-label",
        action=flags.BoolEnv,
        env="KUBETUNE_WEBHOOK_REQUIRE_NAMESPACE_LABEL",
        default=False,
        help="deny Experiments in namespaces without katib.kubeflow.org/"
        "metrics-collector-injection=enabled (default: accept them with a warning that no "
        "metrics will be collected there)",
    )

    serve.add_argument(
        "--lookup-cache-seconds",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_LOOKUP_CACHE_SECONDS",
        type=float,
        default=10.0,
        help="keep labelled namespaces and pod owners/Trials this long (0 = always ask)",
    )
    serve.add_argument(
        "--trusted-status-writers",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_TRUSTED_STATUS_WRITERS",
        default=",".join(authorizing.DEFAULT_TRUSTED),
        help="comma-separated service accounts of the webhook's namespace (or full usernames) "
        "that may write any Trial's status; any other service account of a Trial's namespace "
        "may write only from that Trial's own pod",
    )
    serve.add_argument(
        "--katib-check-interval",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_KATIB_CHECK_INTERVAL",
        type=_positive_float,
        default=katibguard.DEFAULT_INTERVAL,
        help="seconds between checks for Katib's webhook configurations katib.kubeflow.org; "
        "while they exist the webhook is not Ready and admits trial pods unchanged",
    )
    flags.add_pod_namespace_flag(serve, deprecated_env="KUBETUNE_WEBHOOK_NAMESPACE")
    flags.add_deprecated_alias(serve, "--namespace", "--pod-namespace")
    _add_cert_secret_flags(serve)

    certs = sub.add_parser("certs", help="write a CA and a serving certificate; patch caBundle")
    flags.add_connection_flags(certs)
    certs.add_argument(
        "--out-dir",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_CERT_DIR",
        default=DEFAULT_CERT_DIR,
        help="directory for ca.crt, ca.key (reused when present), tls.crt, tls.key",
    )
    certs.add_argument("--dns-name", action="append", default=[], help="DNS name (repeatable)")
    certs.add_argument("--ip", action="append", default=[], help="IP address (repeatable)")
    certs.add_argument("--days", type=int, default=365, help="validity of the serving cert")
    certs.add_argument(
        "--mutating-webhook",
        action="append",
        default=[],
        help="MutatingWebhookConfiguration whose caBundle to set (repeatable)",
    )
    certs.add_argument(
        "--validating-webhook",
        action="append",
        default=[],
        help="ValidatingWebhookConfiguration whose caBundle to set (repeatable)",
    )
    return parser


def _add_env_flags(
    parser: argparse.ArgumentParser, rows: Iterable[tuple[Any, ...]], kind: Any = None
) -> None:
    """`--flag` for each row, its variable `KUBETUNE_WEBHOOK_<FLAG>`; a row is (flag, type,
    default, help), or (flag, default, help) when `kind` gives the one type of all rows."""
    for row in rows:
        flag, type_, default, text = row if kind is None else (row[0], kind, *row[1:])
        parser.add_argument(
            f"--{flag}",
            action=EnvDefault,
            env="KUBETUNE_WEBHOOK_" + flag.upper().replace("-", "_"),
            type=type_,
            default=default,
            help=text,
        )


def _add_cert_secret_flags(serve: argparse.ArgumentParser) -> None:
    """Serving from a Secret (`syncing.py`) and provisioning it (`rotating.py`)."""
    _add_env_flags(
        serve,
        (
            (
                "cert-secret",
                "",
                "Secret of the pod's namespace to serve the certificate from (written to "
                "--cert-file and --key-file, re-read every --cert-secret-interval); empty: serve "
                "the files as they are",
            ),
            (
                "cert-dns-names",
                "",
                "comma-separated DNS names of the provisioned certificate (default: "
                "<--service-name>.<pod namespace>.svc and .svc.cluster.local)",
            ),
            ("cert-ips", "", "comma-separated IP addresses of the provisioned certificate"),
            (
                "service-name",
                "kubetune-webhook",
                "the webhook's Service, for the default DNS names",
            ),
            (
                "mutating-webhook-configurations",
                "kubetune-webhook",
                "comma-separated MutatingWebhookConfigurations whose caBundle the webhook sets",
            ),
            (
                "validating-webhook-configurations",
                "kubetune-webhook",
                "comma-separated ValidatingWebhookConfigurations whose caBundle the webhook sets",
            ),
        ),
        kind=str,
    )
    serve.add_argument(
        "--provision-certificate",
        action=flags.BoolEnv,
        env="KUBETUNE_WEBHOOK_PROVISION_CERTIFICATE",
        default=True,
        help="with --cert-secret: keep a CA and a serving certificate in that Secret, renewed "
        "before expiry, and set caBundle of the configurations (one replica at a time, by "
        "Lease); false when cert-manager writes the Secret",
    )
    serve.add_argument(
        "--cert-secret-interval",
        action=EnvDefault,
        env="KUBETUNE_WEBHOOK_CERT_SECRET_INTERVAL",
        type=_positive_float,
        default=10.0,
        help="seconds between reads of --cert-secret (and renewal checks by the leader)",
    )


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def cert_plan(args: argparse.Namespace) -> rotating.Plan:
    """What `--cert-secret` provisions, from the flags."""
    dns = _names(args.cert_dns_names) or tuple(
        f"{args.service_name}.{args.pod_namespace}.{suffix}"
        for suffix in ("svc", "svc.cluster.local")
    )
    return rotating.Plan(
        namespace=args.pod_namespace,
        secret=args.cert_secret,
        dns_names=dns,
        ips=_names(args.cert_ips),
        mutating=_names(args.mutating_webhook_configurations),
        validating=_names(args.validating_webhook_configurations),
    )


def _wait_for_secret(
    kube: Kube, args: argparse.Namespace, stopping: threading.Event
) -> syncing.CertificateSync:
    """Start the Secret sync and wait until it has written a pair to serve."""
    sync = syncing.CertificateSync(
        kube,
        cert_plan(args),
        args.cert_file,
        args.key_file,
        provision=args.provision_certificate,
        identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
        interval=args.cert_secret_interval,
    )
    sync.start(stopping)
    log.info("waiting for a certificate in Secret %s/%s", args.pod_namespace, args.cert_secret)
    while not stopping.is_set() and not sync.written.wait(1.0):
        pass
    return sync


def run_serve(args: argparse.Namespace) -> int:
    try:
        cfg = katib_config.load(args.config)
    except (OSError, katib_config.ConfigError) as e:
        log.error("cannot load the configuration: %s", e)
        return 2
    stopping = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    kube = Kube(connect(args.kubeconfig))
    sync = _wait_for_secret(kube, args, stopping) if args.cert_secret else None
    if stopping.is_set():
        return 0
    certs = serving.CertificateStore(args.cert_file, args.key_file, args.cert_check_interval)
    try:
        certs.context()
    except (OSError, ValueError) as e:
        log.error("cannot load the serving certificate %s: %s", args.cert_file, e)
        return 2
    guard = katibguard.KatibGuard(kube, args.katib_check_interval)
    guard.start(stopping)
    cluster = KubeCluster(kube, args.lookup_cache_seconds)
    admission = reviewing.Admission(
        cfg,
        cluster,
        validating.Options(require_namespace_label=args.require_namespace_label),
        reviewing.StatusWriters(
            authorizing.trusted_users(args.trusted_status_writers.split(","), args.pod_namespace),
            OwnerChain(cluster),
        ),
        katib_webhook_present=guard.present,
    )
    server = serving.AdmissionServer(
        (args.address, int(args.port)),
        certs,
        admission.handle,
        max_body=args.max_body_bytes,
        max_connections=args.max_connections,
        workers=args.workers,
        handshake_timeout=args.handshake_timeout,
        read_timeout=args.read_timeout,
        idle_timeout=args.idle_timeout,
        request_timeout=args.request_timeout,
        # From a Secret: ready once the API server trusts the CA (caBundle), not before; and
        # never while Katib's webhook configurations exist (`katibguard.py`).
        ready=lambda: certs.ready() and guard.ready() and (sync is None or sync.trusted.is_set()),
    )
    # Everything built so far (models, schemas, the client) lives as long as the process: keep
    # it out of the collector's full passes, which otherwise show up as latency spikes.
    gc.collect()
    gc.freeze()
    host, port = server.server_address[:2]
    log.info("serving admission on https://%s:%d", host, port, extra={"port": port})
    probes = None
    if args.probe_port:
        try:
            probes = serve_probes(
                args.address, args.probe_port, healthy=server.alive, ready=server.ready
            )
        except OSError as e:
            log.error(
                "cannot serve probes on %s:%d (--probe-port): %s", args.address, args.probe_port, e
            )
            server.server_close()
            return 2
        log.info("serving probes on http://%s:%d", args.address, args.probe_port)
    serving.serve(server)
    wait_in_main_thread(stopping)
    if probes is not None:
        probes.shutdown()
        probes.server_close()
    server.shutdown()
    server.server_close()
    if sync is not None:
        sync.join(timeout=5.0)  # it releases the Lease, so another replica renews at once
    return 0


def run_certs(args: argparse.Namespace) -> int:
    try:
        files = certificates.issue(Path(args.out_dir), args.dns_name, args.ip, args.days)
    except ValueError as e:
        log.error("%s", e)
        return 2
    log.info("wrote %s and %s (CA %s)", files.cert, files.key, files.ca_cert)
    if args.mutating_webhook or args.validating_webhook:
        kube = Kube(connect(args.kubeconfig))
        ca = files.ca_cert.read_bytes()
        for resource, names in (
            (certificates.MUTATING_WEBHOOK_CONFIGURATIONS, args.mutating_webhook),
            (certificates.VALIDATING_WEBHOOK_CONFIGURATIONS, args.validating_webhook),
        ):
            for name in names:
                count = certificates.patch_ca_bundle(kube, resource, name, ca)
                log.info("set caBundle of %d webhook(s) in %s %s", count, resource.kind, name)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_format, args.log_level)
    if args.command == "serve":
        return run_serve(args)
    return run_certs(args)


if __name__ == "__main__":
    sys.exit(main())
