"""The metric history keeps the first 100 values, thins the rest, and stays under 64 KiB."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetune import metrichistory as mh

T = "2026-12-01T15:00:00Z"


def _status(history: mh.History) -> dict[str, Any]:
    return {mh.FIELD: history.to_wire()}


def test_first_hundred_kept_then_thinned_and_latest_always_kept() -> None:
    h = mh.History()
    for i in range(10_000):
        h.append("loss", f"{1 / (i + 1):.12f}", T)
    wire = h.to_wire()["metrics"][0]
    assert wire["reports"] == 10_000
    assert wire["steps"][:100] == list(range(100))
    assert wire["steps"][-1] == 9_999  # the latest
    assert wire["values"][-1] == f"{1 / 10_000:.12f}"
    assert wire["steps"] == sorted(set(wire["steps"]))
    assert len(wire["steps"]) == len(wire["values"]) == len(wire["times"])
    gaps = {b - a for a, b in zip(wire["steps"][100:-2], wire["steps"][101:-1], strict=True)}
    assert len(gaps) == 1  # one stride past the prefix
    assert h.size() <= mh.MAX_BYTES


def test_ten_thousand_reports_of_several_metrics_stay_under_the_bound() -> None:
    h = mh.History()
    for i in range(10_000):
        for name in ("loss", "accuracy", "val-loss", "val-accuracy", "lr"):
            h.append(name, repr(0.1 + i * 1e-7), mh.rfc3339(1_800_000_000 + i))
    size = h.size()
    assert size <= mh.MAX_BYTES
    assert size > mh.MAX_BYTES // 2  # it uses the room it has
    for metric in h.to_wire()["metrics"]:
        assert metric["steps"][:100] == list(range(100))
        assert metric["reports"] == 10_000


def test_extend_keeps_what_appending_one_by_one_keeps() -> None:
    one, many = mh.History(max_bytes=8_000), mh.History(max_bytes=8_000)
    values = [str(i) for i in range(5_000)]
    for v in values:
        one.append("m", v, T)
    for start in range(0, 5_000, 333):
        many.extend("m", values[start : start + 333], T)
    assert one.to_wire() == many.to_wire()


def test_extend_of_a_million_values_is_bounded() -> None:
    h = mh.History()
    h.extend("m", ["0.5"] * 1_000_000, T)
    assert h.size() <= mh.MAX_BYTES
    assert h.to_wire()["metrics"][0]["reports"] == 1_000_000


def test_too_many_metrics_for_their_prefixes_still_fit() -> None:
    """300 metrics x 100 values do not fit 64 KiB: the prefix gives way, the bound holds."""
    h = mh.History()
    for i in range(100):
        for m in range(300):
            h.append(f"metric-{m}", str(i), T)
    assert h.size() <= mh.MAX_BYTES
    assert all(m["steps"][-1] == 99 for m in h.to_wire()["metrics"])


def test_long_values_are_cut() -> None:
    h = mh.History()
    h.append("m", "9" * 10_000, T)
    assert len(h.to_wire()["metrics"][0]["values"][0]) == mh.MAX_VALUE_CHARS


def test_read_gives_points_per_metric() -> None:
    h = mh.History()
    h.append("loss", "0.5", T)
    h.append("acc", "0.1", T)
    h.append("loss", "0.4", "2026-12-01T15:00:01Z")
    assert mh.read(_status(h)) == {
        "loss": [(0, "0.5", T), (1, "0.4", "2026-12-01T15:00:01Z")],
        "acc": [(0, "0.1", T)],
    }
    assert mh.reports(_status(h), "loss") == 2
    assert mh.read({}) == {} and mh.read(None) == {}


def test_continuing_a_stored_history_matches_one_kept_in_memory() -> None:
    """db-manager holds no state: it reloads the stored history for every report."""
    kept = mh.History(max_bytes=6_000)
    reloaded = mh.History(max_bytes=6_000)
    for i in range(3_000):
        kept.append("m", str(i), T)
        reloaded = mh.History.from_status(_status(reloaded), max_bytes=6_000)
        reloaded.append("m", str(i), T)
    assert reloaded.to_wire() == kept.to_wire()


@settings(max_examples=60, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 400)), min_size=1, max_size=30
    ),
    max_bytes=st.integers(600, 20_000),
)
def test_any_sequence_stays_bounded_ascending_and_ends_on_the_latest(
    runs: list[tuple[str, int]], max_bytes: int
) -> None:
    h = mh.History(max_bytes=max_bytes)
    counts: dict[str, int] = {}
    for name, n in runs:
        h.extend(name, [f"{name}{counts.get(name, 0) + i}" for i in range(n)], T)
        counts[name] = counts.get(name, 0) + n
    assert h.size() <= max_bytes
    for name, points in mh.read(_status(h)).items():
        steps = [p[0] for p in points]
        assert steps == sorted(set(steps))
        assert steps[-1] == counts[name] - 1
        assert points[-1][1] == f"{name}{counts[name] - 1}"
        assert all(value == f"{name}{step}" for step, value, _ in points)


@given(st.text())
def test_json_length_is_the_serialized_length(text: str) -> None:
    assert mh.json_length(text) == len(json.dumps(text).encode())


def test_json_length_of_quotes_escapes_and_non_ascii() -> None:
    for text in ('a"b', "a\\b", "tab\there", "\x7f", "é", "💡", "2026-12-01T15:00:00Z", "0.25"):
        assert mh.json_length(text) == len(json.dumps(text).encode()), text


def test_drop_history_removes_the_history_while_a_list_is_parsed() -> None:
    """The informers of Trials parse with this hook: no page is held with its histories."""
    full = mh.History()
    full.extend("loss", [str(i) for i in range(5_000)], T)
    trial = {
        "metadata": {"name": "t", "labels": {mh.FIELD: "a-label"}},
        "spec": {"runSpec": {"metadata": {}, "status": {mh.FIELD: "a job's own field"}}},
        "status": {"observation": {"metrics": []}, mh.FIELD: full.to_wire()},
    }
    text = json.dumps({"items": [trial, trial], "metadata": {"continue": ""}})
    parsed = json.loads(text, object_hook=mh.drop_history)
    for item in parsed["items"]:
        assert item["status"] == {"observation": {"metrics": []}}
        assert item["metadata"]["labels"] == {mh.FIELD: "a-label"}
        assert item["spec"]["runSpec"]["status"] == {mh.FIELD: "a job's own field"}
    watch_event = json.loads(
        json.dumps({"type": "MODIFIED", "object": trial}), object_hook=mh.drop_history
    )
    assert mh.FIELD not in watch_event["object"]["status"]


class ReferenceSeries(mh.Series):
    """A metric as thinned before the shortcuts (a copy of the old `thin`)."""

    def _refilter(self) -> None:
        last = len(self.points) - 1
        self.points = [p for i, p in enumerate(self.points) if i == last or self.on_grid(p.step)]
        self.bytes = sum(p.cost for p in self.points)

    def thin(self) -> bool:
        if len(self.points) <= 1:
            return False
        before = len(self.points)
        while len(self.points) == before:
            if self.first + self.stride < self.reports:
                self.stride *= 2
            elif self.first > 1:
                self.first //= 2
            else:
                self.first = 0
                self.stride = max(self.stride, self.reports + 1) * 2
            self._refilter()
            if self.first == 0 and len(self.points) == before:
                self.points = self.points[-1:]
                self.bytes = sum(p.cost for p in self.points)
        return True


class Reference:
    """The trimming as it was before it was made linear (a copy, kept as the model): the
    estimate summed over every metric, every metric sorted by size on every append, and each
    halving of the prefix refiltered."""

    def __init__(self, max_bytes: int = mh.MAX_BYTES, series: dict[str, mh.Series] | None = None):
        self.max_bytes = max_bytes
        self.series: dict[str, mh.Series] = series or {}
        for s in self.series.values():
            s.__class__ = ReferenceSeries

    def _series(self, name: str) -> mh.Series:
        found = self.series.get(name)
        if found is None:
            found = self.series[name] = ReferenceSeries(name, first=mh.KEEP_FIRST)
        return found

    def estimate(self) -> int:
        return 16 + sum(
            s.bytes + 64 + s.name_bytes + len(str(s.reports)) for s in self.series.values()
        )

    def _fit(self) -> None:
        while self.estimate() > self.max_bytes:
            for s in sorted(self.series.values(), key=lambda s: s.bytes, reverse=True):
                if s.thin():
                    break
            else:
                return

    def append(self, name: str, value: str, time: str) -> None:
        s = self._series(name)
        step = s.reports
        s.reports += 1
        s._add(step, value, time)
        self._fit()

    def extend(self, name: str, values: list[str], time: str) -> None:
        if not values:
            return
        s = self._series(name)
        base = s.reports
        last = len(values) - 1
        i = 0
        while True:
            s.reports = base + i + 1
            s._add(base + i, values[i], time)
            self._fit()
            if i == last:
                break
            i = min(s.next_grid(base + i) - base, last)

    def to_wire(self) -> dict[str, Any]:
        return {"metrics": [s.to_wire() for s in self.series.values()]}


NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=12)
VALUES = st.text(alphabet="0123456789.e-", min_size=1, max_size=30)
STEPS = st.lists(
    st.tuples(st.booleans(), NAMES, st.lists(VALUES, min_size=1, max_size=60)),
    min_size=1,
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(steps=STEPS, max_bytes=st.integers(200, 12_000), reload_at=st.integers(0, 80))
def test_trimming_keeps_what_the_sorting_algorithm_kept(
    steps: list[tuple[bool, str, list[str]]], max_bytes: int, reload_at: int
) -> None:
    """Same appends and extends, same bound: the same history as the reference model, and the
    same estimate, also across a reload from the stored form halfway (as db-manager does)."""
    new, old = mh.History(max_bytes=max_bytes), Reference(max_bytes)
    for i, (one_by_one, name, values) in enumerate(steps):
        if i == reload_at:
            wire = {mh.FIELD: new.to_wire()}
            new = mh.History.from_status(wire, max_bytes=max_bytes)
            # The reference continues from the same parsed metrics, trimmed its own way.
            old = Reference(max_bytes, mh.History.from_status(wire, max_bytes=10**9).series)
            old._fit()
            assert new.to_wire() == old.to_wire()
        times = [mh.rfc3339(1_800_000_000 + i)] * len(values)
        if one_by_one:
            for value, time in zip(values, times, strict=True):
                new.append(name, value, time)
                old.append(name, value, time)
        else:
            new.extend(name, values, times[0])
            old.extend(name, values, times[0])
        assert new.estimate() == old.estimate()
    assert new.to_wire() == old.to_wire()


class TooMuchWork(Exception):
    pass


def count_calls(limit: int) -> tuple[Callable[[], int], Callable[..., None]]:
    """A profile hook counting Python and builtin calls (a sort's key function, each resumed
    generator, each heap operation), raising once there are more than `limit`: work counted
    without a clock, and a quadratic algorithm stops early instead of running for minutes."""
    calls = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1
            if calls > limit:
                sys.setprofile(None)
                raise TooMuchWork(f"more than {limit} calls")

    return lambda: calls, hook


@pytest.mark.parametrize("per_name", [1, 3])
def test_ten_thousand_distinct_names_take_linear_work(per_name: int) -> None:
    """One report of 10,000 metric names (each its own series): no re-sort of every series per
    append, so the calls made stay a constant per append."""
    n = 10_000
    h = mh.History()
    done, hook = count_calls(limit=100 * n * per_name)
    sys.setprofile(hook)
    try:
        for round_ in range(per_name):
            for i in range(n):
                h.append(f"metric-{i:05d}", str(round_), T)
    finally:
        sys.setprofile(None)
    assert len(h.series) == n
    assert done() > n  # the hook saw the appends
