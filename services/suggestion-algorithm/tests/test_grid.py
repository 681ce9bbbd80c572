"""The grid is taken point by point from its index: any size, nothing listed, nothing repeated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubetune.api.experiment import ParameterSpec
from kubetune_suggestion_algorithm import indexed, permuting, studying
from kubetune_testkit import capped


def _int(name: str, low: str, high: str, **space: str) -> ParameterSpec:
    return ParameterSpec.model_validate(
        {"name": name, "parameterType": "int", "feasibleSpace": {"min": low, "max": high, **space}}
    )


WIDE = [_int(f"p{i}", "0", "1000") for i in range(21)]
"""The attack: 21 parameters of 1,001 values, ~1e63 points (OverflowError, retried forever)."""


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 1000, 4097])
@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1])
def test_permute_is_a_bijection(size: int, seed: int) -> None:
    assert sorted(permuting.permute(i, size, seed) for i in range(size)) == list(range(size))


def test_permute_shuffles_by_the_seed_and_refuses_indexes_outside() -> None:
    orders = {tuple(permuting.permute(i, 50, seed) for i in range(50)) for seed in range(5)}
    assert len(orders) == 5
    assert tuple(range(50)) not in orders
    with pytest.raises(IndexError):
        permuting.permute(50, 50, 0)


def test_grid_of_21_parameters_of_1001_values_gives_distinct_valid_points() -> None:
    points = [indexed.grid_point(WIDE, 7, i) for i in range(200)]
    assert len({tuple(p.values()) for p in points}) == 200
    assert all(list(p) == [w.name for w in WIDE] for p in points)
    assert all(0 <= int(v) <= 1000 for p in points for v in p.values())
    assert points == [indexed.grid_point(WIDE, 7, i) for i in range(200)]  # a pure function
    assert points != [indexed.grid_point(WIDE, 8, i) for i in range(200)]


def test_grid_of_21_parameters_of_1001_values_is_searched(tmp_path: Path) -> None:
    """Past validation (a looser limit, an old Experiment): the study still hands out points."""
    study = studying.open_study(tmp_path, "ns.exp.uid", False, 3)
    search = studying.Search(study, "grid", {"random_state": 3}, WIDE, "exp")
    new = search.next_assignments(0, 3)
    assert len(new) == 3 and not search.exhausted
    assert all(len(a.parameter_assignments or []) == 21 for a in new)


@pytest.mark.timeout(300)
def test_grid_point_of_a_9e18_int_range_needs_no_memory() -> None:
    """One int parameter 0..9e18: its points are computed, never listed (capped child)."""
    setup = (
        "import json\nfrom kubetune.api.experiment import ParameterSpec\n"
        "from kubetune_suggestion_algorithm import indexed"
    )
    space = {"min": "0", "max": "9000000000000000000"}
    spec = {"name": "x", "parameterType": "int", "feasibleSpace": space}
    code = (
        f"p = [ParameterSpec.model_validate({spec!r})]\n"
        "print(json.dumps([indexed.grid_point(p, 1, i)['x'] for i in range(100)]))"
    )
    values = [int(v) for v in json.loads(capped.run(setup, code))]
    assert len(set(values)) == 100 and all(0 <= v <= 9 * 10**18 for v in values)


def test_the_last_point_then_exhausted() -> None:
    small = [_int("a", "0", "2"), _int("b", "0", "4", step="2")]
    points = {tuple(indexed.grid_point(small, 5, i).values()) for i in range(9)}
    assert points == {(str(a), str(b)) for a in range(3) for b in (0, 2, 4)}
    with pytest.raises(indexed.GridExhausted):
        indexed.grid_point(small, 5, 9)
