"""The one flag vocabulary of every kubetune process, each flag with an env-var fallback.

A flag given on the command line wins over its env var, which wins over the default. Every
service builds its parser from these helpers, so `--config`, `--watch-namespace`,
`--probe-port` and `--leader-elect` mean the same thing (and read the same env var) everywhere.
This module sits below `kubetune.runtime`: the webhook and the collector use it without
importing the controller runtime.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

CONFIG_ENV = "KUBETUNE_CONFIG"
DEPRECATED_CONFIG_ENV = "KUBETUNE_KATIB_CONFIG"
WATCH_NAMESPACE_ENV = "KUBETUNE_WATCH_NAMESPACE"
PROBE_ADDRESS_ENV = "KUBETUNE_PROBE_ADDRESS"
PROBE_PORT_ENV = "KUBETUNE_PROBE_PORT"
LEADER_ELECT_ENV = "KUBETUNE_LEADER_ELECT"
LEADER_ELECTION_ID_ENV = "KUBETUNE_LEADER_ELECTION_ID"

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
    parser.add_argument(
        "--kubeconfig",
        action=EnvDefault,
        env="KUBECONFIG",
        help="kubeconfig path (default: in-cluster, else ~/.kube/config)",
    )
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


def add_watch_namespace_flag(parser: argparse.ArgumentParser) -> None:
    """`--watch-namespace`: one namespace to watch, into `args.watch_namespace` (None = all)."""
    parser.add_argument(
        "--watch-namespace",
        action=EnvDefault,
        env=WATCH_NAMESPACE_ENV,
        default=None,
        help="watch this namespace only (default: all namespaces)",
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
