"""The entrypoint: --help, env-var fallbacks, a bad configuration is a clean non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetune_experiment_controller import main


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main.main(["--help"])
    assert exited.value.code == 0
    assert "--max-listed-trials" in capsys.readouterr().out


def test_flags_fall_back_to_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETUNE_MAX_LISTED_TRIALS", "50")
    monkeypatch.setenv("KUBETUNE_WATCH_NAMESPACE", "team-a")
    args = main.parser().parse_args([])
    assert int(args.max_listed_trials) == 50 and args.watch_namespace == "team-a"


def test_bad_config_exits_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "katib-config.yaml"
    path.write_text("init: [not, a, mapping]\n")
    assert main.main(["--config", str(path)]) == 2
    assert "katib-config" in capsys.readouterr().err
