"""Polling with one default timeout, so a loaded machine is accommodated in one place."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _default_timeout() -> float:
    raw = os.environ.get("KUBETUNE_TEST_TIMEOUT", "90")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"KUBETUNE_TEST_TIMEOUT={raw!r} is not a number of seconds: set e.g. 90"
        ) from None
    if value <= 0:
        raise ValueError(f"KUBETUNE_TEST_TIMEOUT={raw!r} must be positive: set e.g. 90")
    return value


DEFAULT_TIMEOUT = _default_timeout()
"""Seconds a wait gives up after unless told otherwise (env `KUBETUNE_TEST_TIMEOUT`, 90)."""


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float | None = None,
    interval: float = 0.1,
) -> T:
    """Poll `probe` until it returns something truthy and return that; at the deadline fail
    naming `what` and the last value seen, so a timeout says what was missing."""
    limit = DEFAULT_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + limit
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {limit:.0f}s waiting for {what} (last: {last!r})")
