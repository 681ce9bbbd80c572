"""Table rendering, sorting, best-so-far and the no-cluster error, without a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubetune_cli import main, overview, reading, tables
from kubetune_cli.plotting import best_so_far
from kubetune_cli.reading import TrialRow

from kubetune.api.common import ObjectiveSpec, ObjectiveType
from kubetune.api.experiment import Experiment


def _row(name: str, value: float | None, state: str = "Succeeded") -> TrialRow:
    return TrialRow(name=name, state=state, parameters={"lr": "0.1"}, objective=value, created=name)


def test_table_columns_line_up() -> None:
    text = tables.trial_table([_row("a", 0.5), _row("bbbbbb", None, "Running")], "accuracy")
    lines = text.splitlines()
    assert lines[0].split() == ["TRIAL", "STATE", "LR", "ACCURACY"]
    assert lines[2].split() == ["bbbbbb", "Running", "0.1", "-"]
    assert lines[1].index("Succeeded") == lines[0].index("STATE")


def test_a_streamed_table_keeps_the_first_pages_columns() -> None:
    """`get --all` prints each page as it arrives; later pages line up under the first."""
    table = tables.StreamedTable("accuracy")
    first = table.lines([_row("a", 0.5), _row("bbbbbb", None, "Running")])
    later = table.lines([_row("cc", 0.25)])
    assert (
        first
        == tables.trial_table(
            [_row("a", 0.5), _row("bbbbbb", None, "Running")], "accuracy"
        ).splitlines()
    )
    assert later[0].split() == ["cc", "Succeeded", "0.1", "0.25"]
    assert later[0].index("Succeeded") == first[0].index("STATE")
    assert later[0].index("0.25") == first[0].index("ACCURACY")


def test_sort_by_metric_puts_missing_values_last() -> None:
    rows = [_row("a", 0.2), _row("b", None), _row("c", 0.9)]
    assert [r.name for r in tables.sort_rows(rows, "metric", True)] == ["c", "a", "b"]
    assert [r.name for r in tables.sort_rows(rows, "metric", False)] == ["a", "c", "b"]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (ObjectiveType.MAXIMIZE, [None, 0.3, 0.3, 0.7]),
        (ObjectiveType.MINIMIZE, [None, 0.3, 0.1, 0.1]),
    ],
)
def test_best_so_far(kind: ObjectiveType, expected: list[float | None]) -> None:
    objective = ObjectiveSpec(type=kind, objective_metric_name="m")
    assert best_so_far(objective, [None, 0.3, 0.1, 0.7]) == expected


def test_no_cluster_configured_is_said_plainly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main.main(["get"]) == 1
    assert capsys.readouterr().err.strip() == (
        "kubetune: no cluster configured: set KUBECONFIG or pass --kubeconfig"
    )


def test_bad_manifest_is_reported_with_field_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    manifest = tmp_path / "exp.yaml"
    manifest.write_text(
        "apiVersion: kubeflow.org/v1beta1\nkind: Experiment\nmetadata: {name: e}\n"
        "spec: {maxTrialCount: many}\n"
    )
    assert main.main(["--kubeconfig", str(kubeconfig), "run", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert "spec.maxTrialCount: Input should be a valid integer" in err


def test_a_name_that_is_no_object_name_is_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kubeconfig points where nothing listens: only a refusal before any request passes."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    assert main.main(["--kubeconfig", str(kubeconfig), "-n", "../kube-system", "get"]) == 1
    assert capsys.readouterr().err.strip() == (
        "kubetune: namespace '../kube-system' is not valid: it must be a DNS-1123 label "
        "(lowercase letters, digits and '-') of at most 63 characters; it was not sent to the "
        "API server"
    )


LONG = "0.7698433199853741"


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (LONG, "0.7698"),
        ("1.5e-07", "1.5e-07"),
        ("123456.789", "123457"),  # whole numbers in full, not 1.235e+05
        ("0.5", "0.5"),
        ("1024", "1024"),  # an integer parameter is exact
        ("12345678901234567", "12345678901234567"),
        ("adam", "adam"),
        ("unavailable", "unavailable"),
        ("nan", "nan"),
        ("-inf", "-inf"),
    ],
)
def test_a_table_shows_four_significant_digits(stored: str, shown: str) -> None:
    assert tables.readable(stored) == shown


def test_trial_and_history_tables_show_readable_numbers() -> None:
    row = TrialRow(
        name="t", state="Succeeded", parameters={"lr": LONG, "batch": "1024"},
        objective=0.912345678, created="t",
    )  # fmt: skip
    assert tables.trial_table([row], "accuracy").splitlines()[1].split() == [
        "t", "Succeeded", "0.7698", "1024", "0.9123",
    ]  # fmt: skip
    history = {"loss": [(0, "0.123456789", "2026-01-01T00:00:00Z")]}
    assert tables.history_table(history).splitlines()[1].split()[2] == "0.1235"


def test_the_overview_reads_short_and_its_json_keeps_every_digit() -> None:
    experiment = Experiment.model_validate(
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "metadata": {"name": "e", "namespace": "ns"},
            "spec": {"objective": {"type": "maximize", "objectiveMetricName": "accuracy"}},
            "status": {
                "trials": 1,
                "trialsSucceeded": 1,
                "currentOptimalTrial": {
                    "bestTrialName": "e-a",
                    "parameterAssignments": [{"name": "lr", "value": LONG}],
                    "observation": {
                        "metrics": [
                            {
                                "name": "accuracy",
                                "min": "0.1",
                                "max": "0.98765",
                                "latest": "0.98765",
                            }
                        ]
                    },
                },
            },
        }
    )
    row = TrialRow(
        name="e-a", state="Succeeded", parameters={"lr": LONG}, objective=0.98765, created="a"
    )
    view = overview.Overview(experiment, reading.counts(experiment), [row], whole=True)
    text = overview.text(view)
    assert "best: e-a  lr=0.7698  accuracy=0.9877 (min 0.1, max 0.9877)" in text
    assert LONG not in text
    as_json = json.loads(json.dumps(overview.as_json(view)))
    assert as_json["trials"][0]["parameters"]["lr"] == LONG
    assert as_json["best"]["parameterAssignments"][0]["value"] == LONG
