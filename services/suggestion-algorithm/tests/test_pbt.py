"""PBT: generations, exploit/explore, labels and checkpoint directories, restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetune import algorithmsettings
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import algorithms, pbt
from kubetune_suggestion_algorithm.outcomes import Outcome


def _p(name: str, kind: str, **space: object) -> ParameterSpec:
    return ParameterSpec.model_validate(
        {"name": name, "parameterType": kind, "feasibleSpace": space}
    )


PARAMETERS = [
    _p("lr", "double", min="0.0001", max="0.02", step="0.0001"),
    _p("layers", "int", min="1", max="9"),
    _p("opt", "categorical", list=["sgd", "adam", "ftrl"]),
]


def _algorithm(tmp: Path | None, seed: int = 5, **settings: str) -> pbt.Pbt:
    base = {"suggestion_trial_dir": "/ckpt", "n_population": "6", "truncation_threshold": "0.34"}
    listed = [AlgorithmSetting(name=k, value=v) for k, v in {**base, **settings}.items()]
    parsed = algorithmsettings.parse("pbt", listed, PARAMETERS)
    built = algorithms.build(
        "pbt",
        {**parsed, "random_state": seed},
        PARAMETERS,
        experiment="exp",
        uid="uid",
        maximize=True,
        data_dir=tmp,
        study_name="unused",
    )
    assert isinstance(built, pbt.Pbt)
    return built


def _point(a: TrialAssignment) -> dict[str, str]:
    return {p.name: p.value for p in a.parameter_assignments or []}


def _score(point: dict[str, str]) -> float:
    return float(point["lr"]) * 100 + int(point["layers"]) / 10


def test_quantile_is_numpys_linear_one() -> None:
    assert pbt.quantile([1.0, 2.0, 3.0, 4.0], 0.25) == 1.75  # numpy.quantile gives 1.75
    assert pbt.quantile([5.0], 0.2) == 5.0
    assert pbt.quantile([3.0, 1.0, 2.0], 0.5) == 2.0


def test_generations_exploit_and_explore(tmp_path: Path) -> None:
    algorithm = _algorithm(tmp_path)
    algorithm.catch_up([], {})
    gen0 = algorithm.next_assignments(0, 10)
    assert len(gen0) == 6  # generation 1 waits for generation 0
    assert all(a.labels == {pbt.GENERATION_LABEL: "0"} for a in gen0)
    for a in gen0:
        assert (tmp_path / "exp" / a.name).is_dir()
        (tmp_path / "exp" / a.name / "ckpt.txt").write_text(a.name)
    outcomes = {a.name: Outcome(_score(_point(a))) for a in gen0}
    algorithm.catch_up(gen0, dict(list(outcomes.items())[:5]))
    assert algorithm.next_assignments(6, 6) == []
    algorithm.catch_up(gen0, outcomes)
    gen1 = algorithm.next_assignments(6, 6)
    # 6 scores cut at the 0.34 and 0.66 quantiles: 2 below (exploited, int(6*0.34) = 2),
    # 4 explored; exploited successors copy a top member's point and checkpoint.
    assert len(gen1) == 6
    ranked = sorted(gen0, key=lambda a: outcomes[a.name].value or 0)
    bottom, top = {a.name for a in ranked[:2]}, {a.name for a in ranked[-2:]}
    by_name = {a.name: a for a in gen0}
    parents = []
    for child in gen1:
        assert child.labels is not None
        assert child.labels[pbt.GENERATION_LABEL] == "1"
        parent = child.labels[pbt.PARENT_LABEL]
        parents.append(parent)
        copied = (tmp_path / "exp" / child.name / "ckpt.txt").read_text()
        assert copied == parent  # the parent's checkpoint, copied
        if _point(child) == _point(by_name[parent]):
            assert parent in top  # exploit: the better member's point and checkpoint
    assert not bottom & set(parents)  # nobody continues from an exploited member
    assert sum(p in top for p in parents) >= 4  # the 2 exploiting + the top 2 exploring


def test_perturbation_follows_upstream() -> None:
    import random

    rng = random.Random(1)
    layers, lr, opt = PARAMETERS[1], PARAMETERS[0], PARAMETERS[2]
    assert {pbt.perturb(layers, "5", rng) for _ in range(40)} == {"4", "6"}  # int(5*0.8), 6
    assert {pbt.perturb(layers, "9", rng) for _ in range(40)} == {"7", "9"}  # clamped at max
    assert {pbt.perturb(lr, "0.01", rng) for _ in range(40)} == {"0.008", "0.012"}
    assert {pbt.perturb(opt, "sgd", rng) for _ in range(40)} == {"ftrl", "adam"}


def test_resample_probability_one_redraws_every_value(tmp_path: Path) -> None:
    algorithm = _algorithm(tmp_path, resample_probability="1", truncation_threshold="0")
    algorithm.catch_up([], {})
    gen0 = algorithm.next_assignments(0, 6)
    algorithm.catch_up(gen0, {a.name: Outcome(_score(_point(a))) for a in gen0})
    gen1 = algorithm.next_assignments(6, 6)
    assert len(gen1) == 6
    assert all(c.labels and c.labels[pbt.PARENT_LABEL] for c in gen1)
    assert [_point(c) for c in gen1] != [_point(a) for a in gen0]


@pytest.mark.parametrize("restart_every_pass", [False, True])
def test_a_new_process_continues_the_same_run(tmp_path: Path, restart_every_pass: bool) -> None:
    def run(directory: Path, restart: bool) -> list[TrialAssignment]:
        written: list[TrialAssignment] = []
        outcomes: dict[str, Outcome] = {}
        algorithm = _algorithm(directory)
        while len(written) < 24:
            if restart:
                algorithm = _algorithm(directory)
            algorithm.catch_up(written, outcomes)
            new = algorithm.next_assignments(len(written), 4)
            assert new, "stalled"
            written += new
            for a in new:
                failed = a.name.endswith("0")
                outcomes[a.name] = Outcome(None if failed else _score(_point(a)))
        return written

    steady = run(tmp_path / "a", False)
    again = run(tmp_path / "b", restart_every_pass)
    assert [(_point(a), a.labels) for a in again] == [(_point(a), a.labels) for a in steady]
    generations = [int((a.labels or {})[pbt.GENERATION_LABEL]) for a in steady]
    assert generations == sorted(generations) and generations[-1] >= 3
