"""Pareto dominance and the non-dominated front of points, every value to be minimised.

Pure arithmetic on tuples of floats (callers negate the values of maximised objectives, see
`kubetune.multiobjective`), so the front of 100,000 trials costs a sort and one pass:

- the points are sorted lexicographically: a point can only be dominated by one before it
  (a dominating point is no larger anywhere and smaller somewhere, so it sorts first);
- two objectives: one sweep keeping the smallest second value seen so far, O(n log n);
- three: taken by equal first value, each point is checked against a staircase of the front's
  other two values (bisection), O(n log n) plus the staircase's list moves;
- four or more: each point is compared with the front kept so far only (a point dominated by
  anything is dominated by some front point before it), O(n log n + n·f) for a front of f
  points. `bench/pareto_front.py` prints the figures.

Equal points do not dominate each other: both stay on the front.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

Point = Sequence[float]


def dominates(a: Point, b: Point) -> bool:
    """Whether `a` is no larger than `b` in every value and smaller in at least one."""
    smaller = False
    for x, y in zip(a, b, strict=True):
        if x > y:
            return False
        if x < y:
            smaller = True
    return smaller


def _front_of_two(points: Sequence[Point], order: list[int]) -> list[int]:
    kept: list[int] = []
    best_y = best_x = 0.0
    for i in order:
        x, y = points[i][0], points[i][1]
        if kept and (y > best_y or (y == best_y and x > best_x)):
            continue
        if not kept or y < best_y:
            best_x, best_y = x, y
        kept.append(i)
    return kept


def _front_of_three(points: Sequence[Point], order: list[int]) -> list[int]:
    """Points taken by equal first value: a point survives when no earlier group's front point
    is no larger in the other two values (a staircase of them, searched by bisection) and no
    point of its own group dominates it in the other two."""
    ys: list[float] = []  # the staircase: ys ascending, zs descending
    zs: list[float] = []
    kept: list[int] = []
    start = 0
    while start < len(order):
        end = start
        while end < len(order) and points[order[end]][0] == points[order[start]][0]:
            end += 1
        group = order[start:end]
        inside = set(
            _front_of_two([(points[i][1], points[i][2]) for i in group], list(range(len(group))))
        )
        survivors = []
        for position, i in enumerate(group):
            y, z = points[i][1], points[i][2]
            below = bisect.bisect_right(ys, y) - 1
            if position in inside and not (below >= 0 and zs[below] <= z):
                survivors.append(i)
        for i in survivors:
            y, z = points[i][1], points[i][2]
            below = bisect.bisect_right(ys, y) - 1
            if below >= 0 and zs[below] <= z:
                continue  # an equal point of the group is on the staircase already
            low = high = bisect.bisect_left(ys, y)
            while high < len(ys) and zs[high] >= z:
                high += 1
            ys[low:high] = [y]
            zs[low:high] = [z]
        kept += survivors
        start = end
    return kept


def _front_of_many(points: Sequence[Point], order: list[int]) -> list[int]:
    kept: list[int] = []
    for i in order:
        point = points[i]
        if not any(dominates(points[j], point) for j in kept):
            kept.append(i)
    return kept


def front(points: Sequence[Point]) -> list[int]:
    """The indices of the points no other point dominates, in lexicographic order of their
    values (equal points by index). Every point must have the same number of values."""
    if not points:
        return []
    width = len(points[0])
    if any(len(p) != width for p in points):
        raise ValueError("every point needs the same number of values")
    order = sorted(range(len(points)), key=lambda i: (*points[i], i))
    if width == 1:
        best = points[order[0]][0]
        return [i for i in order if points[i][0] == best]
    if width == 2:
        return _front_of_two(points, order)
    if width == 3:
        return _front_of_three(points, order)
    return _front_of_many(points, order)
