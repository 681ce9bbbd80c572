"""Two replicas (as the Deployment runs them): one leads, the standby takes over when the leader
goes, and no Trial is handled twice."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import JOBS, LEASES, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import is_true
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


def _leader(handles: list[ServiceProcess]) -> ServiceProcess | None:
    leaders = [h for h in handles if h.alive() and "became leader" in h.logs()]
    return leaders[-1] if leaders else None


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_standby_takes_over(kube: Kube, namespace: str, controller: Any, how: str) -> None:
    first = controller(leader_elect=True)
    second = controller(leader_elect=True)
    handles = [first, second]
    leader = wait_for("a leader", lambda: _leader(handles), 30)
    standby = second if leader is first else first
    assert "became leader" not in standby.logs()
    kube.create(TRIALS, trial("one", batch_job("sleep 600"), collector="Push"), namespace)
    wait_for("one Running", lambda: is_true(kube.get(TRIALS, "one", namespace), "Running"))
    uid = kube.get(JOBS, "one", namespace)["metadata"]["uid"]
    if how == "sigterm":
        assert leader.stop() == 0  # releases the Lease: the standby leads at once
    else:
        leader.kill()  # the Lease must expire first (15 s)
    wait_for("the standby to lead", lambda: "became leader" in standby.logs(), 45)
    kube.create(TRIALS, trial("two", batch_job("true"), collector="Push"), namespace)
    wait_for(
        "two MetricsUnavailable",
        lambda: is_true(kube.get(TRIALS, "two", namespace), "MetricsUnavailable"),
        90,
    )
    assert kube.get(JOBS, "one", namespace)["metadata"]["uid"] == uid
    lease = kube.get(LEASES, "kubetune-trial-controller", namespace)
    assert lease["spec"]["holderIdentity"]
