"""Pricing a request before it is parsed, and the byte budget, without a cluster."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubeflow.katib import katib_api_pb2 as pb
from kubetune_db_manager import admission
from kubetune_db_manager.storing import MAX_LOGS

LOG = st.builds(
    lambda t, n, v: pb.MetricLog(time_stamp=t, metric=pb.Metric(name=n, value=v)),
    st.text(max_size=5),
    st.text(max_size=5),
    st.text(max_size=5),
)


@settings(max_examples=200)
@given(
    trial=st.text(max_size=20),
    parts=st.lists(st.lists(LOG, max_size=20), max_size=4),
    bare=st.booleans(),
)
def test_the_scan_counts_what_the_parser_finds(
    trial: str, parts: list[list[pb.MetricLog]], bare: bool
) -> None:
    """Repeated observation_log fields are merged by the parser; the scan adds them up."""
    raw = pb.ReportObservationLogRequest(trial_name=trial).SerializeToString()
    for logs in parts:
        raw += pb.ReportObservationLogRequest(
            observation_log=pb.ObservationLog(metric_logs=logs)
        ).SerializeToString()
    if bare:
        raw += b"\x18\x05"  # an unknown varint field 3: skipped by both
    parsed = pb.ReportObservationLogRequest.FromString(raw)
    assert admission.count_metric_logs(raw, MAX_LOGS) == len(parsed.observation_log.metric_logs)


def test_too_many_logs_or_fields_stop_the_scan_early() -> None:
    empty_logs = b"\n\x00" * (MAX_LOGS + 1)  # MetricLog{} is two bytes
    raw = b"\x12" + _varint(len(empty_logs)) + empty_logs
    assert admission.count_metric_logs(raw, MAX_LOGS) is None
    assert admission.count_metric_logs(b"\x18\x01" * (MAX_LOGS + 17), MAX_LOGS) is None
    assert admission.count_metric_logs(raw, 2 * MAX_LOGS) == MAX_LOGS + 1


@pytest.mark.parametrize("raw", [b"\x12\x05ab", b"\x12", b"\x0b", b"\x08\xff"])
def test_malformed_bytes_are_refused(raw: bytes) -> None:
    with pytest.raises(admission.Malformed):
        admission.count_metric_logs(raw, MAX_LOGS)


def _varint(n: int) -> bytes:
    out = b""
    while n > 0x7F:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def test_the_budget_holds_at_most_its_limit_and_records_its_peak() -> None:
    budget = admission.Budget(100)
    assert budget.acquire(60, 0)
    assert not budget.acquire(50, 0.01)  # no room, and none comes
    assert not budget.acquire(101, 10)  # never fits: refused without waiting
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(budget.acquire(50, 60)))
    waiter.start()
    budget.release(60)  # room: the waiter gets it
    waiter.join(60)
    assert got == [True] and budget.used == 50 and budget.peak == 60
    budget.release(50)
    assert budget.used == 0 and budget.acquire(100, 0)


def test_price_grows_with_bytes_and_logs() -> None:
    assert admission.cost(1_000, 0) == admission.BASE_COST + 4_000
    assert admission.cost(1_000, 10) == admission.cost(1_000, 0) + 10 * admission.LOG_COST
