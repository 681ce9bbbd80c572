"""Random and grid without a study: points from the index alone, the same in every process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kubetune import algorithmsettings
from kubetune.api.experiment import ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import algorithms, indexed, studying


def _p(name: str, kind: str, **space: object) -> ParameterSpec:
    return ParameterSpec.model_validate(
        {"name": name, "parameterType": kind, "feasibleSpace": space}
    )


SPACE = [
    _p("lr", "double", min="0.001", max="0.1", distribution="logUniform"),
    _p("momentum", "double", min="0.5", max="0.9", step="0.1"),
    _p("layers", "int", min="2", max="8", step="2"),
    _p("width", "int", min="16", max="512", distribution="logUniform"),
    _p("dropout", "double", min="0.0", max="0.6", distribution="normal"),
    _p("opt", "categorical", list=["sgd", "adam", "ftrl"]),
]
GRID = [
    _p("lr", "double", min="0.1", max="0.4", step="0.1"),
    _p("opt", "categorical", list=["sgd", "adam", "ftrl"]),
]


def _build(
    algorithm: str,
    parameters: list[ParameterSpec],
    data_dir: Path | None,
    *,
    seed: str | None = None,
    uid: str = "uid-1",
    warm_start: bool = False,
) -> algorithms.Algorithm:
    listed = (
        []
        if seed is None
        else [algorithmsettings.AlgorithmSetting(name="random_state", value=seed)]
    )
    return algorithms.build(
        algorithm,
        algorithmsettings.parse(algorithm, listed, parameters),
        parameters,
        experiment="exp",
        uid=uid,
        maximize=False,
        data_dir=data_dir,
        study_name=f"ns.exp.{uid}",
        warm_start=warm_start,
    )


def _points(assignments: list[TrialAssignment]) -> list[dict[str, str]]:
    return [{p.name: p.value for p in a.parameter_assignments or []} for a in assignments]


def test_random_points_are_valid_and_honour_distribution_and_step(tmp_path: Path) -> None:
    search = _build("random", SPACE, tmp_path)
    assert isinstance(search, indexed.IndexedSearch)
    points = _points(search.next_assignments(0, 400))
    assert len(points) == 400 and not search.exhausted
    assert not (tmp_path / indexed.JOURNAL).exists(), "random keeps no study"
    lr = [float(p["lr"]) for p in points]
    assert all(0.001 <= v <= 0.1 for v in lr)
    below_a_hundredth = sum(v < 0.01 for v in lr) / len(lr)
    assert 0.35 < below_a_hundredth < 0.65, "log-uniform: half of the draws in each decade"
    assert {p["momentum"] for p in points} == {"0.5", "0.6", "0.7", "0.8", "0.9"}
    assert {p["layers"] for p in points} == {"2", "4", "6", "8"}
    assert all(16 <= int(p["width"]) <= 512 for p in points)
    dropout = [float(p["dropout"]) for p in points]
    assert all(0.0 <= v <= 0.6 for v in dropout)
    middle = sum(0.2 <= v <= 0.4 for v in dropout) / len(dropout)
    assert middle > 0.55, "normal around the middle (σ = range/6: 68 % within ±0.1)"
    assert {p["opt"] for p in points} == {"sgd", "adam", "ftrl"}


def test_random_gives_the_same_points_in_a_new_process_and_differs_by_seed(
    tmp_path: Path,
) -> None:
    first = _points(_build("random", SPACE, tmp_path).next_assignments(0, 6))
    again = _build("random", SPACE, None)  # another pod, without the volume
    assert _points(again.next_assignments(3, 3)) == first[3:]
    assert _points(_build("random", SPACE, None, uid="uid-2").next_assignments(0, 6)) != first
    fixed = _points(_build("random", SPACE, None, seed="7").next_assignments(0, 6))
    assert (
        _points(_build("random", SPACE, None, seed="7", uid="uid-2").next_assignments(0, 6))
        == fixed
    )


def test_grid_hands_out_every_point_once_then_is_exhausted(tmp_path: Path) -> None:
    search = _build("grid", GRID, tmp_path, seed="3")
    first = search.next_assignments(0, 5)
    assert len(first) == 5 and not search.exhausted
    rest = search.next_assignments(5, 10)
    assert len(rest) == 7 and search.exhausted
    points = {tuple(p.values()) for p in _points(first + rest)}
    assert points == {
        (lr, o) for lr in ("0.1", "0.2", "0.3", "0.4") for o in ("sgd", "adam", "ftrl")
    }
    restarted = _build("grid", GRID, tmp_path, seed="3")
    assert restarted.next_assignments(12, 1) == [] and restarted.exhausted
    assert _points(restarted.next_assignments(0, 12)) == _points(first + rest)


def test_grid_order_is_the_studys_for_the_same_seed(tmp_path: Path) -> None:
    """An Experiment moving from a study to the index keeps its order (same random_state)."""
    study = studying.open_study(tmp_path, "ns.exp.uid-1", False, 3)
    old = studying.Search(study, "grid", {"random_state": 3}, GRID, "exp")
    new = _build("grid", GRID, None, seed="3")
    assert _points(new.next_assignments(0, 12)) == _points(old.next_assignments(0, 12))


def test_a_volume_with_a_study_and_warm_start_keep_the_study(tmp_path: Path) -> None:
    old = _build("random", SPACE, tmp_path, warm_start=True)
    assert isinstance(old, studying.Search)
    written = old.next_assignments(0, 3)
    assert (tmp_path / indexed.JOURNAL).exists()
    resumed = _build("random", SPACE, tmp_path)  # same volume, a pod of the new version
    assert isinstance(resumed, studying.Search)
    assert _points(resumed.next_assignments(0, 3)) == _points(written)


def test_the_algorithm_starts_without_optuna_numpy_or_scikit_optimize() -> None:
    """Random and grid pay for no model: a pass of either loads none of the model libraries."""
    code = (
        "import json, sys\n"
        "from kubetune_suggestion_algorithm import algorithms, main\n"
        "from kubetune.api.experiment import ParameterSpec\n"
        "space = [ParameterSpec.model_validate({'name': 'x', 'parameterType': 'double',"
        " 'feasibleSpace': {'min': '0', 'max': '1', 'step': '0.5'}})]\n"
        "for name in ('random', 'grid'):\n"
        "    algorithms.build(name, {}, space, experiment='e', uid='u', maximize=False,"
        " data_dir=None, study_name='s').next_assignments(0, 3)\n"
        "print(json.dumps(sorted(m for m in ('optuna', 'numpy', 'scipy', 'skopt', 'sklearn')"
        " if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
