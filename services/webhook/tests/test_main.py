"""The webhook's command line: the shared vocabulary of `kubetune.flags`, booleans that are
booleans."""

from __future__ import annotations

import pytest

from kubetune_webhook import main

REQUIRE = "KUBETUNE_WEBHOOK_REQUIRE_NAMESPACE_LABEL"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (REQUIRE, "KUBETUNE_CONFIG", "KUBETUNE_KATIB_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_require_namespace_label_is_a_boolean_flag() -> None:
    parse = main.build_parser().parse_args
    assert parse(["serve"]).require_namespace_label is False
    assert parse(["serve", "--require-namespace-label"]).require_namespace_label is True
    assert parse(["serve", "--no-require-namespace-label"]).require_namespace_label is False


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False), ("1", True)])
def test_require_namespace_label_env(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv(REQUIRE, value)
    assert main.build_parser().parse_args(["serve"]).require_namespace_label is expected


def test_a_bad_require_namespace_label_env_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(REQUIRE, "sometimes")
    with pytest.raises(SystemExit) as exited:
        main.build_parser().parse_args(["serve"])
    assert exited.value.code == 2
    assert f"{REQUIRE}='sometimes'" in capsys.readouterr().err


def test_config_and_its_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    parse = main.build_parser().parse_args
    assert parse(["serve", "--katib-config", "/c.yaml"]).config == "/c.yaml"
    monkeypatch.setenv("KUBETUNE_KATIB_CONFIG", "/old.yaml")
    assert main.build_parser().parse_args(["serve"]).config == "/old.yaml"
