"""The shared flag vocabulary: each flag, its env fallback, and bad env values named."""

from __future__ import annotations

import argparse

import pytest

from kubetune import flags

SERVICE_ENVS = (
    "KUBECONFIG",
    "KUBETUNE_LOG_FORMAT",
    "KUBETUNE_LOG_LEVEL",
    flags.CONFIG_ENV,
    flags.DEPRECATED_CONFIG_ENV,
    flags.WATCH_NAMESPACE_ENV,
    flags.PROBE_ADDRESS_ENV,
    flags.PROBE_PORT_ENV,
    flags.LEADER_ELECT_ENV,
    flags.LEADER_ELECTION_ID_ENV,
    "POD_NAMESPACE",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SERVICE_ENVS:
        monkeypatch.delenv(name, raising=False)


def parser() -> argparse.ArgumentParser:
    """Built after the env is set: env fallbacks are read when the flags are added."""
    p = argparse.ArgumentParser(prog="svc")
    flags.add_connection_flags(p)
    flags.add_config_flag(p)
    flags.add_watch_namespace_flag(p)
    flags.add_probe_flags(p)
    flags.add_leader_election_flags(p, "svc")
    return p


def test_defaults() -> None:
    args = parser().parse_args([])
    assert args.kubeconfig is None
    assert (args.log_format, args.log_level) == ("text", "info")
    assert args.config is None
    assert args.watch_namespace is None
    assert (args.probe_address, args.probe_port) == ("0.0.0.0", 8080)
    assert args.leader_elect is True
    assert (args.leader_election_namespace, args.leader_election_id) == ("kubeflow", "kubetune-svc")


def test_each_flag_on_the_command_line() -> None:
    args = parser().parse_args(
        [
            "--kubeconfig=/k",
            "--log-format=json",
            "--log-level=debug",
            "--config=/c.yaml",
            "--watch-namespace=team-a",
            "--probe-address=127.0.0.1",
            "--probe-port=0",
            "--no-leader-elect",
            "--leader-election-namespace=ns",
            "--leader-election-id=lease",
        ]
    )
    assert args.kubeconfig == "/k"
    assert (args.log_format, args.log_level) == ("json", "debug")
    assert args.config == "/c.yaml"
    assert args.watch_namespace == "team-a"
    assert (args.probe_address, args.probe_port) == ("127.0.0.1", 0)
    assert args.leader_elect is False
    assert (args.leader_election_namespace, args.leader_election_id) == ("ns", "lease")


def test_katib_config_is_an_alias_of_config() -> None:
    assert parser().parse_args(["--katib-config", "/c.yaml"]).config == "/c.yaml"


@pytest.mark.parametrize(
    ("env", "value", "dest", "expected"),
    [
        ("KUBECONFIG", "/k", "kubeconfig", "/k"),
        ("KUBETUNE_LOG_FORMAT", "json", "log_format", "json"),
        ("KUBETUNE_LOG_LEVEL", "debug", "log_level", "debug"),
        (flags.CONFIG_ENV, "/c.yaml", "config", "/c.yaml"),
        (flags.DEPRECATED_CONFIG_ENV, "/old.yaml", "config", "/old.yaml"),
        (flags.WATCH_NAMESPACE_ENV, "team-a", "watch_namespace", "team-a"),
        (flags.PROBE_ADDRESS_ENV, "127.0.0.1", "probe_address", "127.0.0.1"),
        (flags.PROBE_PORT_ENV, "9090", "probe_port", 9090),
        (flags.LEADER_ELECT_ENV, "false", "leader_elect", False),
        ("POD_NAMESPACE", "ns", "leader_election_namespace", "ns"),
        (flags.LEADER_ELECTION_ID_ENV, "lease", "leader_election_id", "lease"),
    ],
)
def test_env_fallback(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, dest: str, expected: object
) -> None:
    monkeypatch.setenv(env, value)
    assert getattr(parser().parse_args([]), dest) == expected


def test_the_command_line_wins_over_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(flags.CONFIG_ENV, "/env.yaml")
    monkeypatch.setenv(flags.PROBE_PORT_ENV, "9090")
    monkeypatch.setenv(flags.LEADER_ELECT_ENV, "false")
    args = parser().parse_args(["--config=/flag.yaml", "--probe-port=1", "--leader-elect"])
    assert (args.config, args.probe_port, args.leader_elect) == ("/flag.yaml", 1, True)


def test_the_new_config_env_wins_over_the_deprecated_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(flags.CONFIG_ENV, "/new.yaml")
    monkeypatch.setenv(flags.DEPRECATED_CONFIG_ENV, "/old.yaml")
    assert parser().parse_args([]).config == "/new.yaml"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
    ],
)
def test_leader_elect_env_is_a_real_boolean(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv(flags.LEADER_ELECT_ENV, value)
    assert parser().parse_args([]).leader_elect is expected


@pytest.mark.parametrize("value", ["maybe", "", "off", "2", "ture"])
def test_a_bad_boolean_env_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv(flags.LEADER_ELECT_ENV, value)
    with pytest.raises(SystemExit) as exited:
        parser().parse_args([])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{flags.LEADER_ELECT_ENV}={value!r}" in err
    assert "true/false" in err


def test_old_leader_elect_spelling_with_a_value_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--leader-elect=false` would otherwise be easy to misread as accepted."""
    with pytest.raises(SystemExit):
        parser().parse_args(["--leader-elect=false"])
    assert "--leader-elect" in capsys.readouterr().err


def test_a_bad_typed_env_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(flags.PROBE_PORT_ENV, "eighty")
    with pytest.raises(SystemExit):
        parser().parse_args([])
    assert f"environment variable {flags.PROBE_PORT_ENV}='eighty'" in capsys.readouterr().err


def test_a_bad_typed_flag_is_the_usual_argparse_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(flags.PROBE_PORT_ENV, "9090")
    with pytest.raises(SystemExit):
        parser().parse_args(["--probe-port=eighty"])
    err = capsys.readouterr().err
    assert "--probe-port" in err and "environment variable" not in err


def test_help_names_every_env_var(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--help"])
    # argparse wraps help at the terminal width: compare without the line breaks.
    out = " ".join(capsys.readouterr().out.split())
    for env in set(SERVICE_ENVS) - {flags.DEPRECATED_CONFIG_ENV}:
        assert f"env {env}" in out, env
    assert "--no-leader-elect" in out and "--katib-config" in out


def test_parse_bool_names_what_is_wrong() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="X='maybe' is not a boolean"):
        flags.parse_bool("maybe", "X")


def _with_old_names() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="svc")
    flags.add_shutdown_grace_flag(p, default=10.0, what="work", deprecated_env="OLD_GRACE")
    flags.add_deprecated_alias(p, "--grace", "--shutdown-grace")
    flags.add_listen_flags(p, env_prefix="SVC", address="127.0.0.1", port=8080, what="server")
    return p


def test_an_old_flag_sets_the_new_one_with_its_type_and_warns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _with_old_names().parse_args(["--grace", "3"]).shutdown_grace == 3.0
    err = capsys.readouterr().err
    assert "--grace is deprecated" in err and "use --shutdown-grace" in err, err


def test_without_the_old_flag_the_new_default_stands_and_nothing_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _with_old_names().parse_args([]).shutdown_grace == 10.0
    assert _with_old_names().parse_args(["--shutdown-grace=4"]).shutdown_grace == 4.0
    assert capsys.readouterr().err == ""


def test_an_old_flag_with_a_bad_value_is_refused_like_the_new_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        _with_old_names().parse_args(["--grace", "soon"])
    assert "--grace" in capsys.readouterr().err


def test_an_old_env_var_still_works_and_warns_naming_the_new_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OLD_GRACE", "7")
    assert _with_old_names().parse_args([]).shutdown_grace == 7.0
    err = capsys.readouterr().err
    assert "OLD_GRACE is deprecated" in err and flags.SHUTDOWN_GRACE_ENV in err, err


@pytest.mark.parametrize(
    ("argv", "address", "port", "warned"),
    [
        (["--address=0.0.0.0"], "0.0.0.0", 8080, False),
        (["--address=::1", "--port=9"], "::1", 9, False),
        (["--address=0.0.0.0:7000"], "0.0.0.0", 7000, True),
        (["--address=[::]:7000"], "::", 7000, True),
        (["--address=:7000"], "", 7000, True),
    ],
)
def test_listen_address_and_port_and_the_old_host_port_shape(
    argv: list[str], address: str, port: int, warned: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _with_old_names().parse_args(argv)
    assert (args.address, args.port) == (address, port)
    err = capsys.readouterr().err
    assert ("use --address" in err) is warned, err


def test_a_port_out_of_range_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _with_old_names().parse_args(["--port=70000"])
    assert "0..65535" in capsys.readouterr().err


def test_host_port_brackets_ipv6() -> None:
    assert flags.host_port("0.0.0.0", 1) == "0.0.0.0:1"
    assert flags.host_port("::", 1) == "[::]:1"
