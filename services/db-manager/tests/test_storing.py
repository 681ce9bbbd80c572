"""The checks and the observation merge of a report, without a cluster."""

from __future__ import annotations

import pytest
from kubetune_db_manager.storing import Code, StoreError, checked_logs, merged_observation

from kubetune import metrichistory
from kubetune.api.common import ObjectiveSpec, ObjectiveType

OBJECTIVE = ObjectiveSpec(type=ObjectiveType.MINIMIZE, objective_metric_name="loss")


def test_values_must_be_numbers_or_unavailable() -> None:
    logs = checked_logs(
        "t", [("loss", "0.5", ""), ("loss", "unavailable", ""), ("x", "1e3", "")], 0
    )
    assert [log.value for log in logs] == ["0.5", "unavailable", "1e3"]
    assert logs[0].time == "1970-01-01T00:00:00Z" or logs[0].time  # empty time: now
    with pytest.raises(StoreError) as bad:
        checked_logs("t", [("loss", "0.5", ""), ("acc", "n/a", "")], 0)
    assert bad.value.code is Code.INVALID
    assert str(bad.value).startswith("observation_log.metric_logs[1] of trial t: value 'n/a'")


@pytest.mark.parametrize(
    ("logs", "says"),
    [
        ([("", "1", "")], "metric name is empty"),
        ([("loss", "1_0", "")], "value '1_0' of metric 'loss' is not a number"),
        ([("loss", "\uff11\uff10", "")], "is not a number"),  # full-width digits
        ([("n" * 1_000_000, "1", "")], "more than 256: use a shorter name"),
        ([("loss", "1" * 129, "")], "more than 128: report the number itself"),
        ([("loss", "1", "2026-13-01T00:00:00Z")], "time_stamp '2026-13-01T00:00:00Z'"),
        ([("loss", "1", "2026-12-01T00:00:00")], "not an RFC3339 time"),  # no zone
        ([("loss", "1", "")] * 10_001, "report in smaller batches"),
    ],
)
def test_malformed_reports_name_the_field(logs: list[tuple[str, str, str]], says: str) -> None:
    with pytest.raises(StoreError) as bad:
        checked_logs("t", logs, 0)
    assert bad.value.code is Code.INVALID and says in str(bad.value)


def test_empty_trial_name_is_invalid() -> None:
    with pytest.raises(StoreError, match="trial_name is empty"):
        checked_logs("", [("loss", "1", "")], 0)


def test_merge_keeps_min_and_max_of_values_the_history_thinned_away() -> None:
    """The stored observation stands for every older value, kept in the history or not."""
    status = {
        "observation": {"metrics": [{"name": "loss", "min": "0.1", "max": "9", "latest": "0.5"}]}
    }
    history = metrichistory.History()
    history.append("loss", "0.5", "2026-12-01T15:00:00Z")
    new = checked_logs("t", [("loss", "0.3", "2026-12-01T15:00:01Z")], 0)
    merged = merged_observation(OBJECTIVE, status, {metrichistory.FIELD: history.to_wire()}, new)
    assert merged == {"metrics": [{"name": "loss", "min": "0.1", "max": "9", "latest": "0.3"}]}
    older = checked_logs("t", [("loss", "0.05", "2026-12-01T14:00:00Z")], 0)
    merged = merged_observation(OBJECTIVE, status, {metrichistory.FIELD: history.to_wire()}, older)
    # A value stamped before the stored latest is a new minimum but not the latest (upstream).
    assert merged == {"metrics": [{"name": "loss", "min": "0.05", "max": "9", "latest": "0.5"}]}


def test_one_report_of_more_metrics_than_a_trial_keeps_is_invalid() -> None:
    """Each metric keeps at least its latest value, so only their number bounds the history."""
    logs = [(f"m{i}", "0.5", "") for i in range(101)]
    with pytest.raises(StoreError) as many:
        checked_logs("t1", logs, 0.0)
    assert many.value.code == Code.INVALID
    assert "101 metrics, more than 100" in str(many.value)
    assert len(checked_logs("t1", logs[:100], 0.0)) == 100
