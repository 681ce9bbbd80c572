"""The one clock type: what time it is (wall clock) and how much time passed (monotonic).

Controllers stamp conditions with the wall clock, and measure timeouts, delays, TTLs and Lease
expiries with the monotonic one (a wall clock can jump, and another machine's runs apart).
Everything that takes a clock takes a `Clock`, so a test drives both readings with one
`ManualClock`.
"""

from __future__ import annotations

import time

from kubetune.typenames import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from datetime import datetime

# `datetime` is imported where a time is made or written: the metrics collector imports this
# module in every trial pod and writes a time only after an early stop.


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall-clock time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go back (for durations only)."""
        ...


class SystemClock:
    """The process's clocks."""

    def now(self) -> datetime:
        from datetime import UTC, datetime

        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM: Clock = SystemClock()


class ManualClock:
    """A clock that moves only when told (tests): both readings are `seconds` (since the epoch)."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds

    def now(self) -> datetime:
        from datetime import UTC, datetime

        return datetime.fromtimestamp(self.seconds, UTC)

    def monotonic(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock does not go back: advance({seconds})")
        self.seconds += seconds


def rfc3339(moment: datetime) -> str:
    """A Kubernetes timestamp (`metav1.Time`: whole seconds, `Z`)."""
    from datetime import UTC

    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(moment: datetime) -> str:
    """A Kubernetes `MicroTime` (a Lease's acquire and renew times)."""
    from datetime import UTC

    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
