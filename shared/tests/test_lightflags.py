"""The light flag parser: the same precedence and errors as `kubetune.flags`, without argparse."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubetune import lightflags
from kubetune.lightflags import Flag, Parser


def parser() -> Parser:
    return Parser(
        "prog",
        "What prog does.",
        [
            *lightflags.CONNECTION_FLAGS,
            Flag("--name", required=True, env="PROG_NAME", help="the name"),
            Flag("--count", type=int, default=1, env="PROG_COUNT", help="how many"),
            Flag("--kind", default="a", choices=("a", "b"), env="PROG_KIND", help="which"),
            Flag("--filter", repeat=True, help="a pattern"),
        ],
    )


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("PROG_NAME", "PROG_COUNT", "PROG_KIND", "KUBECONFIG", "KUBETUNE_LOG_FORMAT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_defaults_and_both_forms_of_a_value() -> None:
    args = parser().parse_args(["--name", "x", "--filter=a=b", "--filter", "c"])
    assert (args.name, args.count, args.kind, args.filter) == ("x", 1, "a", ["a=b", "c"])
    assert (args.kubeconfig, args.log_format, args.log_level) == (None, "text", "info")


def test_the_command_line_wins_over_the_env_which_wins_over_the_default(
    no_env: pytest.MonkeyPatch,
) -> None:
    no_env.setenv("PROG_COUNT", "5")
    no_env.setenv("PROG_NAME", "from-env")  # a required flag the env satisfies
    assert parser().parse_args([]).count == 5
    args = parser().parse_args(["--count=7"])
    assert (args.count, args.name) == (7, "from-env")


def test_a_repeated_flag_keeps_the_last_value() -> None:
    assert parser().parse_args(["--name=a", "--name=b"]).name == "b"


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {}, "the following arguments are required: --name"),
        (["--name=x", "--count=two"], {}, "argument --count: invalid int value: 'two'"),
        (["--name=x"], {"PROG_COUNT": "two"}, "environment variable PROG_COUNT: invalid int"),
        (["--name=x", "--kind=c"], {}, "argument --kind: invalid choice: 'c' (choose from"),
        (
            ["--name=x"],
            {"KUBETUNE_LOG_FORMAT": "xml"},
            "variable KUBETUNE_LOG_FORMAT: invalid choice",
        ),
        (["--name=x", "--bogus", "1"], {}, "unrecognized arguments: --bogus 1"),
        (["--name=x", "extra"], {}, "unrecognized arguments: extra"),
        (["--name"], {}, "argument --name: expected one argument"),
    ],
    ids=["required", "type", "env-type", "choice", "env-choice", "unknown", "positional", "last"],
)
def test_bad_input_prints_usage_and_the_error_and_exits_2(
    argv: list[str],
    env: dict[str, str],
    message: str,
    no_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        no_env.setenv(name, value)
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: prog [-h] --name NAME [options]\n"), err
    assert "prog: error: " in err and message in err, err


def test_help_lists_every_flag_with_its_env_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["--name=x", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for text in ("--kubeconfig KUBECONFIG", "(env PROG_COUNT)", "(one of: 'a', 'b')", "What"):
        assert text in out, out
    assert max(len(line) for line in out.splitlines()) <= lightflags.HELP_WIDTH


def test_a_flag_added_twice_is_a_wiring_error() -> None:
    with pytest.raises(ValueError, match="--name added twice"):
        parser().add(Flag("--name", help="again"))


def test_it_imports_no_argparse() -> None:
    """What it is for: the collector's start without argparse, gettext, locale, textwrap."""
    probe = "import sys, kubetune.lightflags; print(*sorted(set(sys.modules) & {m!r}))".format(
        m={"argparse", "gettext", "locale", "textwrap"}
    )
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == [], out
