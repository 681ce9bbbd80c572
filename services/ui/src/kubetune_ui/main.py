"""`kubetune-ui`: the web UI's server.

Every flag has an environment fallback (`KUBETUNE_*`); SIGTERM stops it (uvicorn's handler)
with exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType

import uvicorn

from kubetune import flags, logs
from kubetune.flags import EnvDefault
from kubetune.kube import Kube, connect
from kubetune_ui import app
from kubetune_ui.cache import Cluster
from kubetune_ui.writing import WriteMode, Writer

log = logging.getLogger("kubetune.ui")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a TCP port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0..65535, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="kubetune's web UI: Experiments, Trials, their metrics, live from the API.",
    )
    flags.add_connection_flags(parser)
    flags.add_watch_namespace_flag(parser)
    parser.add_argument(
        "--address", action=EnvDefault, env="KUBETUNE_UI_ADDRESS", default="127.0.0.1",
        help="address to listen on (0.0.0.0 in the image)",
    )  # fmt: skip
    parser.add_argument(
        "--port", action=EnvDefault, env="KUBETUNE_UI_PORT", type=_port, default=8080,
        help="port to listen on (0: any free port, printed)",
    )  # fmt: skip
    parser.add_argument(
        "--writes",
        action=EnvDefault,
        env="KUBETUNE_UI_WRITES",
        default=WriteMode.IMPERSONATE.value,
        choices=[m.value for m in WriteMode],
        help="create/delete/restart Experiments: 'impersonate' the user the proxy names "
        "(default), with the UI's 'own-credentials' (one user running it locally), or 'off'",
    )
    parser.add_argument(
        "--user-header",
        action=EnvDefault,
        env="KUBETUNE_UI_USER_HEADER",
        default="X-Forwarded-User",
        help="request header in which the authenticating proxy passes the user name",
    )
    parser.add_argument(
        "--groups-header",
        action=EnvDefault,
        env="KUBETUNE_UI_GROUPS_HEADER",
        default="X-Forwarded-Groups",
        help="request header with the user's groups, comma-separated",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_format, args.log_level)
    kube = Kube(connect(args.kubeconfig))
    cluster = Cluster(kube, args.watch_namespace)
    writer = Writer(kube, WriteMode(args.writes), args.user_header, args.groups_header)
    cluster.start()
    application = app.build(cluster, kube, writer)
    config = uvicorn.Config(
        application,
        host=args.address,
        port=args.port,
        log_level="warning",
        access_log=False,
        # Event streams never end by themselves: on SIGTERM give them a moment, then close them.
        timeout_graceful_shutdown=2,
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
