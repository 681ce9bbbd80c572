"""`kubetune best` and `kubetune plot` of a multi-objective Experiment, without a cluster: the
front table and JSON from the status, and the plots (2 objectives: scatter; 3: parallel
coordinates) with the front computed by the controller's rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubetune_cli import fronts
from kubetune_cli.plotting import front_of, plot_front
from kubetune_cli.reading import TrialRow

from kubetune.api.common import ObjectiveSpec
from kubetune.api.experiment import Experiment


def _objective(width: int) -> ObjectiveSpec:
    targets = [{"metricName": "accuracy", "type": "maximize"}] + [
        {"metricName": f"cost{i}", "type": "minimize"} for i in range(1, width)
    ]
    return ObjectiveSpec.model_validate(
        {"type": "maximize", "objectiveMetricName": "accuracy", "objectives": targets}
    )


def _entry(name: str, accuracy: str, seconds: str) -> dict[str, object]:
    return {
        "trialName": name,
        "parameterAssignments": [{"name": "lr", "value": "0.012345678"}],
        "observation": {
            "metrics": [
                {"name": "accuracy", "min": "0.1", "max": accuracy, "latest": accuracy},
                {"name": "cost1", "min": seconds, "max": "99", "latest": "99"},
            ]
        },
    }


EXPERIMENT = Experiment.model_validate(
    {
        "metadata": {"name": "mo", "namespace": "ns"},
        "spec": {
            "objective": _objective(2).to_wire(),
            "parameters": [
                {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
            ],
        },
        "status": {
            "paretoFront": [_entry("mo-a", "0.9", "30"), _entry("mo-b", "0.8", "10")],
            "paretoFrontSize": 3,
            "currentOptimalTrial": {"bestTrialName": "mo-a"},
        },
    }
)


def test_best_prints_the_front_with_each_objective_by_its_strategy() -> None:
    lines = fronts.text(EXPERIMENT).splitlines()
    assert lines[0].startswith("Pareto front: 3 trial(s), 2 listed, best accuracy first")
    assert lines[1].split() == ["TRIAL", "accuracy", "(maximize)", "cost1", "(minimize)", "lr"]
    assert lines[2].split()[:3] == ["mo-a", "0.9", "30"]  # max of accuracy, min of cost1
    assert lines[3].split()[:3] == ["mo-b", "0.8", "10"]
    assert lines[2].split()[3] == "0.01235"  # readable, as every table


def test_best_json_has_the_front_its_size_and_katibs_optimum() -> None:
    out = fronts.as_json(EXPERIMENT)
    assert [e["trialName"] for e in out["paretoFront"]] == ["mo-a", "mo-b"]
    assert out["paretoFrontSize"] == 3
    assert out["currentOptimalTrial"]["bestTrialName"] == "mo-a"


def _rows(width: int) -> list[TrialRow]:
    values = [
        (0.9, 30.0, 1.0),
        (0.8, 10.0, 2.0),
        (0.7, 20.0, 0.1),  # beaten by t1 in the first two objectives, the best in the third
        (0.95, 50.0, 0.5),
    ]
    rows = [
        TrialRow(f"t{i}", "Succeeded", {"lr": "0.1"}, v[0], f"{i}", values=v[:width])
        for i, v in enumerate(values)
    ]
    rows.append(TrialRow("failed", "Failed", {}, None, "9", values=(None,) * width))
    return rows


def test_the_plots_front_is_the_controllers() -> None:
    scored, front = front_of(_rows(2), _objective(2))
    assert len(scored) == 4
    assert front == {"t0", "t1", "t3"}
    _, front3 = front_of(_rows(3), _objective(3))
    assert front3 == {"t0", "t1", "t2", "t3"}


@pytest.mark.parametrize("width", [2, 3])
def test_plot_front_writes_a_png(tmp_path: Path, width: int) -> None:
    path = tmp_path / "front.png"
    plot_front(_rows(width), _objective(width), "ns/mo", path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
