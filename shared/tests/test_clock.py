"""The one clock type: the system clock's readings, the manual clock tests drive, the stamps."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import pytest

from kubetune import conditions
from kubetune.clock import SYSTEM, Clock, ManualClock, rfc3339, rfc3339_micro


def test_the_system_clock_reads_aware_utc_and_a_monotonic_count() -> None:
    before = datetime.now(UTC)
    now = SYSTEM.now()
    assert now.tzinfo is not None and now.utcoffset() == UTC.utcoffset(None)
    assert before <= now <= datetime.now(UTC)
    first = SYSTEM.monotonic()
    assert first <= SYSTEM.monotonic() <= time.monotonic()


def test_a_manual_clock_moves_both_readings_only_when_told() -> None:
    clock: Clock = ManualClock(1_700_000_000.0)
    assert isinstance(clock, ManualClock)
    assert clock.now() == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert clock.monotonic() == 1_700_000_000.0
    clock.advance(2.5)
    assert clock.monotonic() == 1_700_000_002.5
    assert clock.now().timestamp() == 1_700_000_002.5


def test_a_manual_clock_refuses_to_go_back() -> None:
    with pytest.raises(ValueError, match="does not go back"):
        ManualClock().advance(-1)


def test_stamps_are_kubernetes_times() -> None:
    moment = ManualClock(1_700_000_000.25).now()
    assert rfc3339(moment) == "2023-11-14T22:13:20Z"
    assert rfc3339_micro(moment) == "2023-11-14T22:13:20.250000Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", conditions.rfc3339_now())
