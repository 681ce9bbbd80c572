"""Reports queued behind a Trial's write go into its next write together (issue 15: one write
per report was the bottleneck at 200 reports/s).

The Store runs in this process against the test cluster, through a client whose first status
write waits until every other report is queued: how many reports share a write then no longer
depends on how fast a loaded machine lets 48 threads arrive."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubetune_db_manager.storing import Store, StoreError

from kubetune import metrichistory
from kubetune.kube import TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

REPORTS = 48
T0 = "2026-12-01T15:00:00Z"


class HeldKube(Kube):
    """The test cluster's client; its first patch says it is `holding` and waits for
    `release`. Every patch it sends is recorded."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.holding = threading.Event()
        self.release = threading.Event()
        self.patches: list[dict[str, Any]] = []

    def patch(self, *args: Any, **kwargs: Any) -> Any:
        if not self.holding.is_set():
            self.holding.set()
            assert self.release.wait(60), "the held write was never released"
        self.patches.append(args[2])
        return super().patch(*args, **kwargs)


def test_reports_queued_behind_a_write_share_the_next_one(kube: Kube, namespace: str) -> None:
    kube.create(TRIALS, builders.trial("t1", objective_spec=builders.objective("loss")), namespace)
    held = HeldKube(kube)
    store = Store(held, namespace)
    errors: list[StoreError] = []

    def send(i: int) -> None:
        try:
            store.report("t1", [("loss", f"0.{i:03d}", T0)], time.monotonic() + 120)
        except StoreError as e:  # the test reports it below
            errors.append(e)

    first = threading.Thread(target=send, args=(0,))
    first.start()
    assert held.holding.wait(60), "the first report was never written"
    rest = [threading.Thread(target=send, args=(i,)) for i in range(1, REPORTS)]
    for thread in rest:
        thread.start()
    wait_for(
        "the other reports to queue behind it",
        lambda: len(store._queues["t1"].pending) == REPORTS - 1,
    )
    held.release.set()
    for thread in [first, *rest]:
        thread.join(60)
    assert not errors, errors
    assert len(held.patches) == 2  # the first report's own write, then all the others at once
    status = kube.get(TRIALS, "t1", namespace)["status"]
    assert metrichistory.reports(status, "loss") == REPORTS
    kept = sorted(v for _, v, _ in metrichistory.read(status)["loss"])
    assert kept == sorted(f"0.{i:03d}" for i in range(REPORTS))
