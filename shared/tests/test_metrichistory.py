"""The metric history keeps the first 100 values, thins the rest, and stays under 64 KiB."""

from __future__ import annotations

import json
from typing import Any

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
