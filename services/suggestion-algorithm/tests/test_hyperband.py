"""Hyperband: upstream's bracket math against hand-computed numbers, then the algorithm driven
as the cluster drives it (batches of parallelTrialCount, Trials finishing), restarts included."""

from __future__ import annotations

import pytest

from kubetune import algorithmsettings, naming
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import algorithms, hyperband
from kubetune_suggestion_algorithm.outcomes import Outcome


def _p(name: str, kind: str, **space: object) -> ParameterSpec:
    return ParameterSpec.model_validate(
        {"name": name, "parameterType": kind, "feasibleSpace": space}
    )


PARAMETERS = [
    _p("lr", "double", min="0.01", max="0.03"),
    _p("num-layers", "int", min="2", max="5"),
    _p("optimizer", "categorical", list=["sgd", "adam", "ftrl"]),
    _p("num-epochs", "int", min="1", max="1"),
]


def _rungs(eta: float, r_l: float) -> list[tuple[int, int, int, int]]:
    return [(r.bracket, r.rung, r.size, r.resource) for r in hyperband.schedule(eta, r_l)]


# Each expectation worked by hand from upstream's formulas (hyperband/service.py):
#   s_max = int(log(r_l)/log(eta)); bracket s: n = ceil((s_max+1) * eta**s / (s+1)),
#   r = r_l * eta**-s, rung 0 = n at int(r); rung i = ceil(ceil(n*eta**-(i-1)) / eta) at
#   int(int(r) * eta**i).
@pytest.mark.parametrize(
    ("eta", "r_l", "expected"),
    [
        # Katib's hp-tuning/hyperband.yaml. s_max = 1.
        # s=1: n = ceil(2*2/2) = 2 at int(2/2) = 1; rung 1: ceil(ceil(2)/2) = 1 at 1*2 = 2.
        # s=0: n = ceil(2*1/1) = 2 at 2.
        (2, 2, [(1, 0, 2, 1), (1, 1, 1, 2), (0, 0, 2, 2)]),
        # s_max = 2. s=2: n = ceil(3*9/3) = 9 at 1; 3 at 3; 1 at 9.
        # s=1: n = ceil(3*3/2) = ceil(4.5) = 5 at 3; ceil(5/3) = 2 at 9. s=0: ceil(3/1) = 3 at 9.
        (
            3,
            9,
            [(2, 0, 9, 1), (2, 1, 3, 3), (2, 2, 1, 9), (1, 0, 5, 3), (1, 1, 2, 9), (0, 0, 3, 9)],
        ),
        # r_l not a power of eta: s_max = int(2.0959) = 2, r = 10/9 -> int 1, so rungs at 3 and 9
        # (not 10/3, 10); s=1: r = int(3.33) = 3, rung 1 at 9; s=0: r = 10.
        (
            3,
            10,
            [(2, 0, 9, 1), (2, 1, 3, 3), (2, 2, 1, 9), (1, 0, 5, 3), (1, 1, 2, 9), (0, 0, 3, 10)],
        ),
        # log(1000)/log(10) = 2.9999999999999996 -> s_max = 2 (upstream's float rounding).
        # s=2: n = ceil(3*100/3) = 100 at int(1000/100) = 10; ceil(100/10) = 10 at 100;
        #   ceil(ceil(100/10)/10) = 1 at 1000. s=1: n = ceil(3*10/2) = 15 at 100; 2 at 1000.
        # s=0: n = 3 at 1000.
        (
            10,
            1000,
            [
                (2, 0, 100, 10),
                (2, 1, 10, 100),
                (2, 2, 1, 1000),
                (1, 0, 15, 100),
                (1, 1, 2, 1000),
                (0, 0, 3, 1000),
            ],
        ),
        # s_max = 4. s=3: n = ceil(5*27/4) = ceil(33.75) = 34 at 3; ceil(34/3) = 12 at 9;
        #   ceil(ceil(34/3)/3) = ceil(12/3) = 4 at 27; ceil(ceil(34/9)/3) = ceil(4/3) = 2 at 81.
        (
            3,
            81,
            [
                (4, 0, 81, 1),
                (4, 1, 27, 3),
                (4, 2, 9, 9),
                (4, 3, 3, 27),
                (4, 4, 1, 81),
                (3, 0, 34, 3),
                (3, 1, 12, 9),
                (3, 2, 4, 27),
                (3, 3, 2, 81),
                (2, 0, 15, 9),
                (2, 1, 5, 27),
                (2, 2, 2, 81),
                (1, 0, 8, 27),
                (1, 1, 3, 81),
                (0, 0, 5, 81),
            ],
        ),
    ],
    ids=["katib-example", "eta3-R9", "eta3-R10", "eta10-R1000", "eta3-R81"],
)
def test_schedule_is_upstreams(
    eta: float, r_l: float, expected: list[tuple[int, int, int, int]]
) -> None:
    assert _rungs(float(eta), float(r_l)) == expected
    first = [r.first for r in hyperband.schedule(float(eta), float(r_l))]
    sizes = [r[2] for r in expected]
    assert first == [sum(sizes[:k]) for k in range(len(sizes))]


def _algorithm(seed: int = 7, maximize: bool = True, **settings: str) -> hyperband.Hyperband:
    listed = [AlgorithmSetting(name=k, value=v) for k, v in settings.items()]
    parsed = algorithmsettings.parse("hyperband", listed, PARAMETERS)
    built = algorithms.build(
        "hyperband",
        {**parsed, "random_state": seed},
        PARAMETERS,
        experiment="exp",
        uid="uid-1",
        maximize=maximize,
        data_dir=None,
        study_name="unused",
    )
    assert isinstance(built, hyperband.Hyperband)
    return built


def _point(assignment: TrialAssignment) -> dict[str, str]:
    return {p.name: p.value for p in assignment.parameter_assignments or []}


def _score(point: dict[str, str]) -> float:
    return float(point["lr"]) * 10 + int(point["num-layers"]) + float(point["num-epochs"]) / 100


class Cluster:
    """What the experiment-controller and the Trials do, without a cluster: ask for
    `parallel` assignments while fewer are running, run each to its score."""

    def __init__(self, parallel: int, fail: set[int] | None = None) -> None:
        self.parallel = parallel
        self.written: list[TrialAssignment] = []
        self.outcomes: dict[str, Outcome] = {}
        self.fail = fail or set()
        self.waits = 0

    def step(self, algorithm: hyperband.Hyperband) -> bool:
        algorithm.catch_up(self.written, self.outcomes)
        running = [a for a in self.written if a.name not in self.outcomes]
        new = algorithm.next_assignments(len(self.written), self.parallel - len(running))
        self.written += new
        if not new and not running:
            return False
        if not new:
            self.waits += 1
        for index, assignment in enumerate(self.written):
            if assignment.name not in self.outcomes:
                value = None if index in self.fail else _score(_point(assignment))
                self.outcomes[assignment.name] = Outcome(value)
                break  # one Trial ends per step
        return True


def test_a_whole_run_follows_the_brackets_and_promotes_the_best() -> None:
    algorithm = _algorithm(resource_name="num-epochs", eta="3", r_l="9")
    cluster = Cluster(parallel=9)
    while cluster.step(algorithm):
        pass
    assert algorithm.exhausted
    assert len(cluster.written) == 23  # 9+3+1 + 5+2 + 3
    assert cluster.waits > 0  # rung 1 waited for rung 0 to finish
    points = [_point(a) for a in cluster.written]
    assert [a.name for a in cluster.written] == [
        naming.trial_name("exp", str(i)) for i in range(23)
    ]
    epochs = [p["num-epochs"] for p in points]
    assert epochs == ["1"] * 9 + ["3"] * 3 + ["9"] + ["3"] * 5 + ["9"] * 2 + ["9"] * 3

    def config(p: dict[str, str]) -> tuple[str, ...]:
        return (p["lr"], p["num-layers"], p["optimizer"])

    def best(first: int, size: int, keep: int) -> list[tuple[str, ...]]:
        rung = points[first : first + size]
        return [config(p) for p in sorted(rung, key=_score, reverse=True)[:keep]]

    assert [config(p) for p in points[9:12]] == best(0, 9, 3)
    assert [config(p) for p in points[12:13]] == best(9, 3, 1)
    assert [config(p) for p in points[18:20]] == best(13, 5, 2)
    assert len({config(p) for p in points[:9] + points[13:18] + points[20:]}) == 17  # new ones


def test_minimize_promotes_the_lowest() -> None:
    algorithm = _algorithm(maximize=False, resource_name="num-epochs", eta="2", r_l="2")
    cluster = Cluster(parallel=2)
    while cluster.step(algorithm):
        pass
    points = [_point(a) for a in cluster.written]
    assert len(points) == 5
    lowest = min(points[:2], key=_score)
    assert (points[2]["lr"], points[2]["num-layers"]) == (lowest["lr"], lowest["num-layers"])
    assert [p["num-epochs"] for p in points] == ["1", "1", "2", "2", "2"]


def test_failed_trials_rank_last_instead_of_blocking() -> None:
    algorithm = _algorithm(resource_name="num-epochs", eta="3", r_l="9")
    cluster = Cluster(parallel=9, fail={0, 1, 2, 3, 4, 5, 6})
    while cluster.step(algorithm):
        pass
    points = [_point(a) for a in cluster.written]
    assert len(points) == 23
    survivors = sorted(points[7:9], key=_score, reverse=True)
    assert [p["lr"] for p in points[9:11]] == [p["lr"] for p in survivors]
    assert points[11]["lr"] == points[0]["lr"]  # then failures, in order


def test_a_new_process_continues_exactly_where_the_old_one_stopped() -> None:
    """The state is the Suggestion's status and the Trials: replaying them into a fresh
    instance at every step gives the same run as one long-lived instance."""
    steady = Cluster(parallel=5)
    restarted = Cluster(parallel=5)
    kept = _algorithm(resource_name="num-epochs", eta="2", r_l="4")
    while steady.step(kept):
        restarted.step(_algorithm(resource_name="num-epochs", eta="2", r_l="4"))
    assert [_point(a) for a in restarted.written] == [_point(a) for a in steady.written]
    assert len(steady.written) == sum(r.size for r in hyperband.schedule(2.0, 4.0))


def test_nothing_new_while_a_rung_runs_and_a_seed_fixes_the_points() -> None:
    first = _algorithm(seed=3, resource_name="num-epochs", eta="2", r_l="2")
    first.catch_up([], {})
    rung0 = first.next_assignments(0, 5)
    assert len(rung0) == 2  # rung 1 needs rung 0's outcomes
    first.catch_up(rung0, {rung0[0].name: Outcome(0.5)})
    assert first.next_assignments(2, 3) == []
    assert not first.exhausted
    again = _algorithm(seed=3, resource_name="num-epochs", eta="2", r_l="2")
    again.catch_up([], {})
    assert again.next_assignments(0, 2) == rung0
    other = _algorithm(seed=4, resource_name="num-epochs", eta="2", r_l="2")
    other.catch_up([], {})
    assert other.next_assignments(0, 2) != rung0
