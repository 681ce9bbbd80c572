"""The entrypoint: flags, the allow-list sources, fatal configuration errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kubetune.kube import TRIALS
from kubetune_testkit.processes import console_script
from kubetune_trial_controller import main
from kubetune_trial_controller.kinds import JobKind


def test_help_exits_zero() -> None:
    out = subprocess.run(
        [console_script("trial-controller"), "--help"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert "--trial-resources" in out.stdout and "--metrics-timeout" in out.stdout


def test_default_allow_list_is_the_configs() -> None:
    allowed = main.allowed_kinds(main.parser().parse_args([]))
    assert JobKind("Job", "v1", "batch") in allowed
    assert JobKind("Workflow", "v1alpha1", "argoproj.io") in allowed


def test_flag_overrides_config(tmp_path: Path) -> None:
    cfg = tmp_path / "katib-config.yaml"
    cfg.write_text("init:\n  controller:\n    trialResources: [TFJob.v1.kubeflow.org]\n")
    args = main.parser().parse_args(["--config", str(cfg)])
    assert main.allowed_kinds(args) == {JobKind("TFJob", "v1", "kubeflow.org")}
    args = main.parser().parse_args(["--config", str(cfg), "--trial-resources", "Job.v1.batch"])
    assert main.allowed_kinds(args) == {JobKind("Job", "v1", "batch")}


def test_env_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETUNE_TRIAL_RESOURCES", "Widget.v1.example.com")
    allowed = main.allowed_kinds(main.parser().parse_args([]))
    assert allowed == {JobKind("Widget", "v1", "example.com")}


@pytest.mark.parametrize(
    "argv", [["--trial-resources", "Job"], ["--config", "/nonexistent/katib-config.yaml"]]
)
def test_bad_configuration_is_fatal_with_a_message(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main(argv) == 2
    assert "trial-controller:" in capsys.readouterr().err


def test_the_trial_cache_holds_no_metric_history() -> None:
    """Up to 64 KiB per Trial is the collector's; the controller's memory must not grow by it."""
    controller = main.build(main.parser().parse_args([]))
    (trials,) = [w for w in controller.watches if w.resource == TRIALS]
    assert trials.object_hook is not None
    # dropped while each Trial is parsed, from a list page or a watch event
    text = json.dumps({"items": [{"metadata": {}, "status": {"metricHistory": {"metrics": []}}}]})
    assert json.loads(text, object_hook=trials.object_hook) == {
        "items": [{"metadata": {}, "status": {}}]
    }
