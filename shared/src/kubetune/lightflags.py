"""A small flag parser for processes that start often: the collector sidecar starts in every
trial pod, and importing argparse (with gettext, locale and textwrap) then building its
actions was about a tenth of that start (bench/collector_start.py).

The flags mean what `kubetune.flags` says, with the same rules: a flag on the command line wins
over its env var, which wins over the default; a value from the environment goes through the
flag's type and a bad one is an error naming the variable; `--help` lists each flag with its
env var. Accepted forms: `--name value` and `--name=value`, exact names only (argparse also
took unique prefixes). A bad command line prints usage and the error on stderr and exits 2, as
argparse does.
"""

from __future__ import annotations

import os
import sys

from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

HELP_INDENT = 30
HELP_WIDTH = 98


def wrapped(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken between words."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


class Flag:
    """One `--name` flag; `dest` is the name with `_` for `-`."""

    __slots__ = ("choices", "default", "dest", "env", "help", "name", "repeat", "required", "type")

    def __init__(
        self,
        name: str,
        *,
        help: str,  # noqa: A002 (argparse's names)
        default: Any = None,
        type: Callable[[str], Any] = str,  # noqa: A002
        choices: Sequence[str] | None = None,
        required: bool = False,
        repeat: bool = False,
        env: str | None = None,
    ) -> None:
        self.name = name
        self.dest = name.lstrip("-").replace("-", "_")
        self.help = help
        self.default = [] if repeat and default is None else default
        self.type = type
        self.choices = choices
        self.required = required
        self.repeat = repeat
        self.env = env


CONNECTION_FLAGS = (
    Flag(
        "--kubeconfig",
        env="KUBECONFIG",
        help="kubeconfig path (default: in-cluster, else ~/.kube/config)",
    ),
    Flag(
        "--log-format",
        env="KUBETUNE_LOG_FORMAT",
        default="text",
        choices=("text", "json"),
        help="log line format",
    ),
    Flag("--log-level", env="KUBETUNE_LOG_LEVEL", default="info", help="log level"),
)
"""Where the cluster is and how to log: every process has these (`kubetune.flags` adds the same
ones to an argparse parser)."""


class Values:
    """The parsed flags as attributes, as argparse's Namespace."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __repr__(self) -> str:
        return f"Values({', '.join(f'{k}={v!r}' for k, v in sorted(vars(self).items()))})"

    if TYPE_CHECKING:  # for the type checker only: each flag's `dest` is an attribute

        def __getattr__(self, name: str) -> Any: ...


class UsageError(Exception):
    """A command line or env var that cannot be parsed; the message names it."""


class Parser:
    """The flags of one program; `parse_args` as argparse's."""

    def __init__(self, prog: str, description: str, flags: Sequence[Flag] = ()) -> None:
        self.prog = prog
        self.description = description
        self.flags: dict[str, Flag] = {}
        for flag in flags:
            self.add(flag)

    def add(self, flag: Flag) -> None:
        if flag.name in self.flags:
            raise ValueError(f"flag {flag.name} added twice")
        self.flags[flag.name] = flag

    def usage(self) -> str:
        required = [f"{f.name} {f.dest.upper()}" for f in self.flags.values() if f.required]
        return f"usage: {self.prog} [-h] {' '.join(required)} [options]"

    def format_help(self) -> str:
        lines = [self.usage(), "", *wrapped(self.description, HELP_WIDTH), "", "options:"]
        rows = [("-h, --help", "show this help message and exit")]
        for flag in self.flags.values():
            text = flag.help
            if flag.choices is not None:
                text += f" (one of: {', '.join(repr(c) for c in flag.choices)})"
            if flag.repeat:
                text += " (repeatable)"
            if flag.env:
                text += f" (env {flag.env})"
            rows.append((f"{flag.name} {flag.dest.upper()}", text))
        for head, text in rows:
            body = wrapped(text, HELP_WIDTH - HELP_INDENT)
            if len(head) + 2 >= HELP_INDENT:
                lines.append(f"  {head}")
            else:
                lines.append(f"  {head:<{HELP_INDENT - 2}}{body.pop(0)}")
            lines += [" " * HELP_INDENT + line for line in body]
        return "\n".join(lines) + "\n"

    def parse_args(self, argv: Sequence[str] | None = None) -> Values:
        """The flags of `argv` (default: the command line); on `--help` the help on stdout and
        exit 0, on bad input usage and the error on stderr and exit 2."""
        args = list(sys.argv[1:] if argv is None else argv)
        if "-h" in args or "--help" in args:
            sys.stdout.write(self.format_help())
            raise SystemExit(0)
        try:
            return self.parse(args)
        except UsageError as e:
            self.exit_with(str(e))

    def exit_with(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.usage()}\n{self.prog}: error: {message}\n")
        raise SystemExit(2)

    def parse(self, args: Sequence[str]) -> Values:
        """Raises UsageError naming the flag (or env var) and what it wants."""
        given: dict[str, Any] = {}
        index = 0
        while index < len(args):
            arg = args[index]
            name, equals, value = arg.partition("=")
            flag = self.flags.get(name)
            if flag is None:
                raise UsageError(f"unrecognized arguments: {' '.join(args[index:])}")
            if not equals:
                index += 1
                if index >= len(args):
                    raise UsageError(f"argument {name}: expected one argument")
                value = args[index]
            index += 1
            converted = self.convert(flag, value, f"argument {name}")
            if flag.repeat:
                given.setdefault(flag.dest, []).append(converted)
            else:
                given[flag.dest] = converted
        values: dict[str, Any] = {}
        missing = []
        for flag in self.flags.values():
            if flag.dest in given:
                values[flag.dest] = given[flag.dest]
            elif flag.env and flag.env in os.environ:
                where = f"environment variable {flag.env}"
                env_value = self.convert(flag, os.environ[flag.env], where)
                values[flag.dest] = [env_value] if flag.repeat else env_value
            elif flag.required:
                missing.append(flag.name)
            else:
                values[flag.dest] = list(flag.default) if flag.repeat else flag.default
        if missing:
            raise UsageError(f"the following arguments are required: {', '.join(missing)}")
        return Values(**values)

    @staticmethod
    def convert(flag: Flag, value: str, where: str) -> Any:
        if flag.choices is not None and value not in flag.choices:
            wanted = ", ".join(repr(c) for c in flag.choices)
            raise UsageError(f"{where}: invalid choice: {value!r} (choose from {wanted})")
        try:
            return flag.type(value)
        except ValueError:
            kind = getattr(flag.type, "__name__", "value")
            raise UsageError(f"{where}: invalid {kind} value: {value!r}") from None
