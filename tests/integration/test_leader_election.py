"""Leader election with clocks that disagree, on a real API server.

Two electors whose wall clocks are 15 s apart campaign for one Lease. Expiry is measured on
each candidate's own clock from when it saw the Lease change, so the skew must never give the
Lease to the standby while the leader renews, and a leader that stops still fails over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from kubetune.clock import SYSTEM
from kubetune.kube import LEASES, Kube
from kubetune.runtime.electing import LeaderElector
from kubetune.wakeups import Wakeup
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

SKEW = 15.0
LEASE, DEADLINE, RETRY = 3.0, 2.0, 0.3


class SkewedClock:
    """The system clock, with the wall clock `offset` seconds ahead (a badly synced machine)."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> datetime:
        return SYSTEM.now() + timedelta(seconds=self.offset)

    def monotonic(self) -> float:
        return SYSTEM.monotonic()


class Partitionable(Kube):
    """The real API server, until `cut` is set: then every request fails as on a lost network."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.cut = threading.Event()

    def _check(self) -> None:
        if self.cut.is_set():
            raise ConnectionRefusedError("partitioned from the API server (test)")

    def get_or_none(self, *args: Any, **kw: Any) -> Any:
        self._check()
        return super().get_or_none(*args, **kw)

    def create(self, *args: Any, **kw: Any) -> Any:
        self._check()
        return super().create(*args, **kw)

    def replace(self, *args: Any, **kw: Any) -> Any:
        self._check()
        return super().replace(*args, **kw)


class Watcher:
    """Samples which electors lead, as often as it can, and keeps every overlap it saw."""

    def __init__(self, electors: dict[str, LeaderElector]) -> None:
        self.electors = electors
        self.overlaps: list[list[str]] = []
        self.samples = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def leaders(self) -> list[str]:
        return [name for name, e in self.electors.items() if e.is_leader.is_set()]

    def _run(self) -> None:
        while not self.stop.is_set():
            now = self.leaders()
            if len(now) > 1:
                self.overlaps.append(now)
            self.samples += 1
            time.sleep(0.005)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def stops() -> Iterator[dict[str, Wakeup]]:
    events = {"slow": Wakeup(), "fast": Wakeup()}
    yield events
    for event in events.values():
        event.set()


def _holder(kube: Kube, namespace: str, name: str) -> str:
    lease = kube.get_or_none(LEASES, name, namespace)
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


@pytest.mark.parametrize("leader_first", ["slow", "fast"])
def test_one_leader_at_every_moment_with_clocks_15s_apart(
    kube: Kube, namespace: str, stops: dict[str, Wakeup], leader_first: str
) -> None:
    """The first elector leads; the other, its clock 15 s away, must wait through many renew
    periods (no overlap, no take-over), and take over once the leader is cut off."""
    lease = f"skew-{leader_first}"
    clients = {"slow": Partitionable(kube), "fast": Partitionable(kube)}
    clocks = {"slow": SkewedClock(0.0), "fast": SkewedClock(SKEW)}
    electors = {
        name: LeaderElector(
            clients[name],
            namespace,
            lease,
            name,
            lease_duration=LEASE,
            renew_deadline=DEADLINE,
            retry_period=RETRY,
            clock=clocks[name],
        )
        for name in ("slow", "fast")
    }
    standby = "fast" if leader_first == "slow" else "slow"
    watcher = Watcher(electors)
    try:
        electors[leader_first].start(stops[leader_first])
        wait_for(f"{leader_first} to lead", electors[leader_first].is_leader.is_set)
        electors[standby].start(stops[standby])
        # Wait on the standby having read the Lease, then through several lease durations: the
        # standby must not take a Lease whose holder keeps renewing.
        wait_for("the standby's first read", lambda: electors[standby].observed is not None)
        renewals = 4 * int(LEASE / RETRY)
        transitions_before = _transitions(kube, namespace, lease)
        seen = _renewals(kube, namespace, lease, renewals)
        assert seen >= renewals
        assert watcher.leaders() == [leader_first]
        assert _holder(kube, namespace, lease) == leader_first
        assert _transitions(kube, namespace, lease) == transitions_before
        assert watcher.overlaps == [], f"two leaders at once: {watcher.overlaps[:3]}"

        # The leader loses the API server: it steps down at its renew deadline, and the
        # standby takes over once the Lease has gone unrenewed for its duration.
        clients[leader_first].cut.set()
        wait_for(f"{leader_first} to step down", electors[leader_first].lost.is_set)
        wait_for(f"{standby} to take over", electors[standby].is_leader.is_set)
        assert _holder(kube, namespace, lease) == standby
        assert watcher.overlaps == [], f"two leaders at once: {watcher.overlaps[:3]}"
        assert watcher.samples > 100
    finally:
        watcher.close()


def _transitions(kube: Kube, namespace: str, name: str) -> int:
    return int(kube.get(LEASES, name, namespace)["spec"].get("leaseTransitions") or 0)


def _renewals(kube: Kube, namespace: str, name: str, count: int) -> int:
    """Watch the Lease until it has been renewed `count` times; the renewals seen."""
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        seen.add(kube.get(LEASES, name, namespace)["spec"].get("renewTime") or "")
        time.sleep(RETRY / 3)
    return len(seen)
