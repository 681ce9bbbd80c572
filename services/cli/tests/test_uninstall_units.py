"""`kubetune uninstall`'s rules that need no cluster: flag combinations and bounded waits."""

from __future__ import annotations

import pytest
from kubetune_cli import main, uninstalling
from kubetune_cli.reading import UserError


def test_delete_crds_alone_is_refused_before_anything_is_read() -> None:
    with pytest.raises(UserError, match="pass --delete-experiments too"):
        uninstalling.plan(None, delete_experiments=False, delete_crds=True)  # type: ignore[arg-type]


def test_keep_and_delete_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.parser().parse_args(["uninstall", "--keep-experiments", "--delete-experiments"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main.parser().parse_args(["uninstall"]).delete_experiments is False


def test_a_wait_past_its_deadline_names_what_is_left_and_the_fix() -> None:
    left = [f"Suggestion ns/s{i}" for i in range(12)]
    with pytest.raises(UserError) as caught:
        uninstalling.wait_gone("deleting", lambda: left, 0, "Look at the Events", interval=0)
    message = str(caught.value)
    assert "Suggestion ns/s0" in message and "Suggestion ns/s9" in message
    assert "s10" not in message and "..." in message
    assert "Look at the Events" in message and "kubetune uninstall again" in message
