"""Dominance and the Pareto front against brute force, on generated points (few distinct
values, so ties and equal points are common)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubetune import pareto

VALUES = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0]) | st.floats(-1e6, 1e6)


def points(width: int) -> st.SearchStrategy[list[tuple[float, ...]]]:
    return st.lists(st.tuples(*[VALUES] * width), max_size=60)


def brute_dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def brute_front(pts: list[tuple[float, ...]]) -> set[int]:
    return {
        i for i, p in enumerate(pts) if not any(brute_dominates(q, p) for q in pts if q is not p)
    }


@given(st.integers(1, 4).flatmap(lambda w: st.tuples(*[st.tuples(*[VALUES] * w)] * 2)))
def test_dominates_as_defined(pair: tuple[tuple[float, ...], tuple[float, ...]]) -> None:
    a, b = pair
    assert pareto.dominates(a, b) == brute_dominates(a, b)
    assert not (pareto.dominates(a, b) and pareto.dominates(b, a))
    assert not pareto.dominates(a, a)


@settings(max_examples=300)
@given(st.integers(1, 5).flatmap(points))
def test_front_is_the_brute_force_front(pts: list[tuple[float, ...]]) -> None:
    found = pareto.front(pts)
    assert len(found) == len(set(found))
    assert set(found) == brute_front(pts)


@given(st.integers(1, 4).flatmap(points))
def test_front_is_sorted_lexicographically_then_by_index(pts: list[tuple[float, ...]]) -> None:
    found = pareto.front(pts)
    assert found == sorted(found, key=lambda i: (*pts[i], i))


def test_equal_points_are_both_on_the_front() -> None:
    assert pareto.front([(1.0, 2.0), (1.0, 2.0), (2.0, 3.0)]) == [0, 1]


def test_empty_and_mixed_widths() -> None:
    assert pareto.front([]) == []
    try:
        pareto.front([(1.0, 2.0), (1.0,)])
    except ValueError as e:
        assert "same number of values" in str(e)
    else:
        raise AssertionError("mixed widths were accepted")


@settings(max_examples=400)
@given(st.lists(st.tuples(*[st.sampled_from([0.0, 1.0, 2.0, 3.0])] * 3), max_size=50))
def test_three_objectives_with_many_ties_is_the_brute_force_front(
    pts: list[tuple[float, ...]],
) -> None:
    """Three values have their own sweep (a staircase); few distinct values make ties."""
    assert pareto.front(pts) == sorted(brute_front(pts), key=lambda i: (*pts[i], i))
