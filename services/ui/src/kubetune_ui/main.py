"""`kubetune-ui`: the web UI's server.

Every flag has an environment fallback (`KUBETUNE_*`); SIGTERM stops it (uvicorn's handler)
with exit 0. `--writes=impersonate` without `--proxy-secret-file` does not start (exit 2): a UI
that acts as whoever a header names must know which requests come from its proxy, and a UI
that silently turned read-only would hide the mistake until someone tried to write.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType

import uvicorn

from kubetune import flags, logs
from kubetune.flags import EnvDefault
from kubetune.kube import Kube, connect
from kubetune_ui import app
from kubetune_ui.cache import Cluster
from kubetune_ui.streams import Limits
from kubetune_ui.writing import PROOF_HEADER, RESERVED, Identity, WriteMode, Writer, read_secret

log = logging.getLogger("kubetune.ui")


def _whole(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number in low..high."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{what} is {low}..{high}, got {value}")
        return value

    return convert


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="kubetune's web UI: Experiments, Trials, their metrics, live from the API.",
    )
    flags.add_connection_flags(parser)
    flags.add_watch_namespace_flag(parser)
    # The base Deployment sets --address=0.0.0.0: the UI is reached only through its proxy.
    flags.add_listen_flags(
        parser, env_prefix="KUBETUNE_UI", address="127.0.0.1", port=8080, what="web UI"
    )
    flags.add_shutdown_grace_flag(parser, default=2.0, what="open event streams")
    parser.add_argument(
        "--writes",
        action=EnvDefault,
        env="KUBETUNE_UI_WRITES",
        default=WriteMode.OFF.value,
        choices=[m.value for m in WriteMode],
        help="create/delete/restart Experiments: 'impersonate' the user the proxy names (needs "
        "--proxy-secret-file), with the UI's 'own-credentials' (one user running it locally), "
        "or 'off' (default)",
    )
    parser.add_argument(
        "--proxy-secret-file",
        action=EnvDefault,
        env="KUBETUNE_UI_PROXY_SECRET_FILE",
        default="",
        help=f"file with the secret the authenticating proxy sends in {PROOF_HEADER}; user "
        "headers of a request without it are ignored",
    )
    parser.add_argument(
        "--user-header",
        action=EnvDefault,
        env="KUBETUNE_UI_USER_HEADER",
        default="X-Forwarded-User",
        help="request header in which the proxy names the user (oauth2-proxy: X-Forwarded-User "
        "or X-Forwarded-Email; Kubeflow: kubeflow-userid)",
    )
    parser.add_argument(
        "--user-prefix",
        action=EnvDefault,
        env="KUBETUNE_UI_USER_PREFIX",
        default="",
        help="prefix the proxy puts before the user name, removed (Kubeflow: e.g. "
        "accounts.google.com:)",
    )
    parser.add_argument(
        "--groups-header",
        action=EnvDefault,
        env="KUBETUNE_UI_GROUPS_HEADER",
        default="X-Forwarded-Groups",
        help="request header with the user's groups, comma-separated ('' for none)",
    )
    parser.add_argument(
        "--impersonate-groups",
        action=EnvDefault,
        env="KUBETUNE_UI_IMPERSONATE_GROUPS",
        default="",
        help="comma-separated groups that may be impersonated (the resourceNames of the "
        "impersonation ClusterRole); other groups the proxy names are dropped",
    )
    for flag, default, what in (
        ("max-streams", Limits.streams, "live event streams open at once, in all"),
        ("max-streams-per-client", Limits.per_client, "live event streams of one client"),
        ("max-topics-per-stream", Limits.topics, "topics one live event stream may ask for"),
    ):
        parser.add_argument(
            f"--{flag}",
            action=EnvDefault,
            env=f"KUBETUNE_UI_{flag.upper().replace('-', '_')}",
            type=_whole(1, 1_000_000, "a whole number"),
            default=default,
            help=f"{what} (default {default}); more are refused",
        )
    return parser


def _identity(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Identity:
    """Who the proxy says a request is, and how it proves it; exits 2 on a bad setup."""
    proof = None
    if args.proxy_secret_file:
        try:
            proof = read_secret(args.proxy_secret_file)
        except ValueError as e:
            parser.error(str(e))
    elif args.writes == WriteMode.IMPERSONATE.value:
        parser.error(
            "--writes=impersonate needs --proxy-secret-file (KUBETUNE_UI_PROXY_SECRET_FILE): "
            f"the secret the authenticating proxy sends in {PROOF_HEADER}, so that no other "
            "client can name a user; or run read-only with --writes=off"
        )
    groups = frozenset(g.strip() for g in args.impersonate_groups.split(",") if g.strip())
    reserved = sorted(g for g in groups if g.lower().startswith(RESERVED))
    if reserved:
        parser.error(
            f"--impersonate-groups: {', '.join(reserved)}: {RESERVED} groups belong to the API "
            "server and are never impersonated; remove them"
        )
    return Identity(proof, args.user_header, args.groups_header, args.user_prefix, groups)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_format, args.log_level)
    identity = _identity(parser, args)
    kube = Kube(connect(args.kubeconfig))
    cluster = Cluster(kube, args.watch_namespace)
    writer = Writer(kube, WriteMode(args.writes), identity)
    limits = Limits(args.max_streams, args.max_streams_per_client, args.max_topics_per_stream)
    cluster.start()
    application = app.build(cluster, kube, writer, limits)
    config = uvicorn.Config(
        application,
        host=args.address,
        port=args.port,
        log_level="warning",
        access_log=False,
        # Event streams never end by themselves: on SIGTERM give them a moment, then close them.
        timeout_graceful_shutdown=max(1, round(args.shutdown_grace)),
    )
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        for sock in server.servers[0].sockets if server.servers else []:
            host, port = sock.getsockname()[:2]
            print(f"serving the UI on http://{host}:{port}/", flush=True)
            log.info("writes: %s", writer.mode.value)

    async def serve() -> None:
        waiter = asyncio.ensure_future(announce())
        await server.serve()
        waiter.cancel()

    # uvicorn stops on SIGTERM/SIGINT, then raises the signal again for the handler it found:
    # this one, so a stop is a clean exit 0 (not death by the signal); before uvicorn's own are
    # installed, it asks the server to stop as soon as it has started.
    def stop(signum: int, frame: FrameType | None) -> None:
        server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    asyncio.run(serve())
    cluster.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
