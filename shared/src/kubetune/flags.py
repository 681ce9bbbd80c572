"""The one flag vocabulary of every kubetune process, each flag with an env-var fallback.

A flag given on the command line wins over its env var, which wins over the default. Every
service builds its parser from these helpers, so each flag means one thing (and reads the same
env var) everywhere:

- `--watch-namespace`: the one namespace a process watches or serves (default: all);
- `--namespace`: the namespace of the one object named on the command line (the collector's
  Trial, the algorithm's Suggestion, the CLI's objects), as kubectl's `-n`;
- `--pod-namespace`: the namespace kubetune itself runs in;
- `--address`/`--port`: a service's own server; `--probe-address`/`--probe-port`: the probe
  server of a process that serves nothing else;
- `--resync-period`, `--shutdown-grace`: seconds, wherever a process has them.

Names used before this vocabulary stay as deprecated aliases for a release: they still work and
print a warning on stderr that names the flag to use (`add_deprecated_alias`).
This module sits below `kubetune.runtime`: the webhook and the collector use it without
importing the controller runtime.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

from kubetune import lightflags
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

CONFIG_ENV = "KUBETUNE_CONFIG"
DEPRECATED_CONFIG_ENV = "KUBETUNE_KATIB_CONFIG"
WATCH_NAMESPACE_ENV = "KUBETUNE_WATCH_NAMESPACE"
PROBE_ADDRESS_ENV = "KUBETUNE_PROBE_ADDRESS"
PROBE_PORT_ENV = "KUBETUNE_PROBE_PORT"
LEADER_ELECT_ENV = "KUBETUNE_LEADER_ELECT"
LEADER_ELECTION_ID_ENV = "KUBETUNE_LEADER_ELECTION_ID"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
RESYNC_PERIOD_ENV = "KUBETUNE_RESYNC_PERIOD"
SHUTDOWN_GRACE_ENV = "KUBETUNE_SHUTDOWN_GRACE"

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _from_env(names: Sequence[str]) -> tuple[str, str] | None:
    """The first of `names` that is set, and its value."""
    for name in names:
        if name in os.environ:
            return name, os.environ[name]
    return None


class EnvDefault(argparse.Action):
    """A flag whose default comes from an environment variable when that is set.

    `deprecated_env` names older variables still read when `env` is unset. A value from the
    environment goes through the flag's `type` like a command-line value; a bad one is an error
    that names the variable.
    """

    def __init__(
        self,
        env: str,
        deprecated_env: Sequence[str] = (),
        required: bool = False,
        default: object = None,
        **kw: Any,
    ):
        found = _from_env([env, *deprecated_env])
        if found is not None and found[0] != env:
            warn(f"environment variable {found[0]} is deprecated; set {env} instead")
        if found is not None:
            default = found[1]
            required = False
            kind = kw.get("type")
            if kind is not None:
                kw["type"] = _naming_env(kind, found[0], found[1])
        kw["help"] = f"{kw.get('help') or ''} (env {env})".lstrip()
        super().__init__(default=default, required=required, **kw)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)


def warn(message: str) -> None:
    """One deprecation line on stderr (before logging is set up, so not through it)."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


class DeprecatedAlias(argparse.Action):
    """An old flag name: stores into the new flag's destination and warns, naming the new flag."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kw: Any):
        self.new = new
        kw["default"] = argparse.SUPPRESS  # the new flag's default (or env) stays in force
        kw["help"] = f"deprecated: use {new}"
        super().__init__(option_strings, dest, **kw)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        warn(f"{option_string} is deprecated and will be removed; use {self.new}")
        setattr(namespace, self.dest, values)


def add_deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """`old` as a deprecated alias of the already added flag `new` (same value type)."""
    target = parser._option_string_actions[new]  # argparse has no public look-up
    same: dict[str, Any] = {"type": target.type} if target.type is not None else {}
    parser.add_argument(
        old,
        dest=target.dest,
        action=DeprecatedAlias,
        new=new,
        choices=target.choices,
        metavar=target.metavar or target.dest.upper(),
        **same,
    )


def _naming_env(kind: Any, env: str, value: str) -> Any:
    """`kind`, whose error on the env var's `value` says which variable to fix."""

    def convert(text: str) -> Any:
        if text is value:  # argparse converts the default object itself
            try:
                return kind(text)
            except (TypeError, ValueError, argparse.ArgumentTypeError) as e:
                raise argparse.ArgumentTypeError(
                    f"environment variable {env}={text!r} is invalid ({e}); fix or unset it"
                ) from None
        return kind(text)

    convert.__name__ = getattr(kind, "__name__", "value")
    return convert


def parse_bool(text: str, name: str) -> bool:
    """`text` as a boolean: true/false, 1/0, yes/no (any case); anything else names `name`."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(
        f"{name}={text!r} is not a boolean: use true/false, 1/0 or yes/no"
    )


class BoolEnv(argparse.BooleanOptionalAction):
    """`--x`/`--no-x` with an env-var fallback parsed strictly (see `parse_bool`).

    A bad env value is reported by the parser at parse time (exit 2, the variable named), not
    silently taken as false.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, env: str, **kw: Any):
        default = kw.pop("default", None)
        if env in os.environ:
            default = os.environ[env]  # a string: argparse converts it with `type` below
        kw["help"] = f"{kw.get('help') or ''} (env {env}: true/false)".lstrip()
        super().__init__(option_strings, dest, default=default, **kw)
        # Set after __init__: BooleanOptionalAction's `type` argument is deprecated, but
        # argparse still converts a string default through the action's type.
        self.type = lambda text: parse_bool(text, f"environment variable {env}")


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """Where the cluster is and how to log: every process has these."""
    for flag in lightflags.CONNECTION_FLAGS:
        parser.add_argument(
            flag.name, action=EnvDefault, env=flag.env, default=flag.default, help=flag.help,
            choices=flag.choices,
        )  # fmt: skip


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    """`--config` (alias `--katib-config`): the katib-config file, into `args.config`."""
    parser.add_argument(
        "--config",
        "--katib-config",
        dest="config",
        action=EnvDefault,
        env=CONFIG_ENV,
        deprecated_env=[DEPRECATED_CONFIG_ENV],
        default=None,
        help=f"katib-config file (default: kubetune's built-in configuration; "
        f"{DEPRECATED_CONFIG_ENV} is read too, deprecated)",
    )


def add_watch_namespace_flag(
    parser: argparse.ArgumentParser, *, deprecated_env: str = "", what: str = "watch"
) -> None:
    """`--watch-namespace`: one namespace to watch, into `args.watch_namespace` (None = all)."""
    parser.add_argument(
        "--watch-namespace",
        action=EnvDefault,
        env=WATCH_NAMESPACE_ENV,
        deprecated_env=[deprecated_env] if deprecated_env else [],
        default=None,
        help=f"{what} this namespace only (default: all namespaces)",
    )


def add_probe_flags(parser: argparse.ArgumentParser, *, port: int = 8080) -> None:
    """`--probe-address` and `--probe-port` of /healthz and /readyz (and /metrics)."""
    parser.add_argument(
        "--probe-address",
        action=EnvDefault,
        env=PROBE_ADDRESS_ENV,
        default="0.0.0.0",
        help="address of the probe server",
    )
    parser.add_argument(
        "--probe-port",
        action=EnvDefault,
        env=PROBE_PORT_ENV,
        type=int,
        default=port,
        help="port of the probe server (0 = any free port)",
    )


def add_leader_election_flags(parser: argparse.ArgumentParser, service: str) -> None:
    """`--leader-elect`/`--no-leader-elect` (a boolean, default on) and the Lease's place."""
    parser.add_argument(
        "--leader-elect",
        action=BoolEnv,
        env=LEADER_ELECT_ENV,
        default=True,
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
        env=LEADER_ELECTION_ID_ENV,
        default=f"kubetune-{service}",
        help="name of the Lease",
    )


def add_pod_namespace_flag(parser: argparse.ArgumentParser, *, deprecated_env: str = "") -> None:
    """`--pod-namespace`: the namespace kubetune runs in (downward API), into `args.pod_namespace`;
    default the service account's namespace, else kubeflow."""
    parser.add_argument(
        "--pod-namespace",
        action=EnvDefault,
        env=POD_NAMESPACE_ENV,
        deprecated_env=[deprecated_env] if deprecated_env else [],
        default=_service_account_namespace(),
        help="the namespace kubetune runs in (default: the pod's, else kubeflow)",
    )


def _service_account_namespace() -> str:
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip() or "kubeflow"
    except OSError:
        return "kubeflow"


_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]*\]|[^:\[\]]*):(\d{1,5})$")


class ListenAddress(EnvDefault):
    """`--address HOST`; the old shape `--address HOST:PORT` still works: it sets `--port` too,
    with a deprecation warning."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        match = _HOST_PORT.match(str(values))
        if match is None:
            setattr(namespace, self.dest, values)
            return
        host, port = match.group(1).strip("[]"), match.group(2)
        warn(
            f"{option_string} {values} (HOST:PORT) is deprecated and will be removed; use "
            f"--address {host} --port {port}"
        )
        setattr(namespace, self.dest, host)
        namespace.port = int(port)


def add_listen_flags(
    parser: argparse.ArgumentParser, *, env_prefix: str, address: str, port: int, what: str
) -> None:
    """`--address` and `--port` of a service's own server (`what` it serves), env
    `<env_prefix>_ADDRESS` and `<env_prefix>_PORT`."""
    parser.add_argument(
        "--address",
        action=ListenAddress,
        env=f"{env_prefix}_ADDRESS",
        default=address,
        help=f"address the {what} listens on",
    )
    parser.add_argument(
        "--port",
        action=EnvDefault,
        env=f"{env_prefix}_PORT",
        type=port_number,
        default=port,
        help=f"port of the {what} (0 = any free port, printed in the log)",
    )


def port_number(text: str) -> int:
    """A TCP port number (0..65535) for argparse's `type`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a TCP port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port number is 0..65535, got {value}")
    return value


def host_port(host: str, port: int) -> str:
    """`HOST:PORT` for a listener (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _add_seconds_flag(
    parser: argparse.ArgumentParser, flag: str, env: str, default: float, help_: str, old_env: str
) -> None:
    """A float of seconds read from `flag`, else `env` (else the deprecated `old_env`)."""
    parser.add_argument(
        flag,
        action=EnvDefault,
        env=env,
        deprecated_env=[old_env] if old_env else [],
        type=float,
        default=default,
        help=help_,
    )


def add_resync_period_flag(
    parser: argparse.ArgumentParser, *, default: float, what: str, deprecated_env: str = ""
) -> None:
    """`--resync-period` (seconds): how often `what` happens although nothing changed."""
    _add_seconds_flag(
        parser,
        "--resync-period",
        RESYNC_PERIOD_ENV,
        default,
        f"seconds between {what}",
        deprecated_env,
    )


def add_shutdown_grace_flag(
    parser: argparse.ArgumentParser, *, default: float, what: str, deprecated_env: str = ""
) -> None:
    """`--shutdown-grace` (seconds): how long `what` may go on after SIGTERM."""
    _add_seconds_flag(
        parser,
        "--shutdown-grace",
        SHUTDOWN_GRACE_ENV,
        default,
        f"seconds to let {what} finish on SIGTERM",
        deprecated_env,
    )
