"""A reconcile costs the Trials of its own Experiment, not every Trial the controller caches.

Structural, not timed: two Experiments of different sizes share a namespace (and the one Trial
informer); every cached Trial a reconcile's `select` looks at is recorded with the Experiment
it was looking for. None may belong to the other Experiment, so the small one's reconcile stays
small however large its neighbour grows (one Experiment among 100,000 Trials).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

import pytest

from kubetune import naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube, Obj
from kubetune.runtime import watching
from kubetune_testkit.builders import owner_reference, trial
from kubetune_testkit.standins.services import trial_status
from kubetune_testkit.waiting import wait_for
from tests.standins import RunningController, experiment_manifest, experiment_status

pytestmark = pytest.mark.integration

SIZES = {"small": 3, "large": 30}


class Visits:
    """Trials `select` looked at, by the Experiment they belong to and the one it was asked
    for; recorded from the controller's worker threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.foreign: list[tuple[str, str]] = []
        self.own: dict[str, int] = {}

    def seen(self, obj: Obj, labels: Mapping[str, str]) -> None:
        wanted = labels.get(naming.LABEL_EXPERIMENT)
        if wanted is None:
            return
        have = ((obj.get("metadata") or {}).get("labels") or {}).get(naming.LABEL_EXPERIMENT)
        with self.lock:
            if have == wanted:
                self.own[wanted] = self.own.get(wanted, 0) + 1
            else:
                self.foreign.append((wanted, str(have)))


@pytest.fixture
def visits(monkeypatch: pytest.MonkeyPatch) -> Iterator[Visits]:
    record = Visits()
    matches = watching._matches

    def counted_matches(obj: Obj, namespace: str | None, labels: Mapping[str, str]) -> bool:
        record.seen(obj, labels)
        return matches(obj, namespace, labels)

    monkeypatch.setattr(watching, "_matches", counted_matches)
    yield record


def test_a_reconcile_visits_only_its_own_experiments_trials(
    kube: Kube, namespace: str, crds: None, visits: Visits
) -> None:
    for name, size in SIZES.items():
        created = kube.create(
            EXPERIMENTS, experiment_manifest(name, namespace, max_trials=100), namespace
        )
        for index in range(size):
            body = trial(f"{name}-{index}", experiment=name)
            body["metadata"]["ownerReferences"] = [owner_reference(created)]
            kube.create(TRIALS, body, namespace)
            kube.patch(
                TRIALS,
                f"{name}-{index}",
                {"status": trial_status("Succeeded", 0.5)},
                namespace,
                subresource="status",
            )
    controller = RunningController(kube, namespace).start()
    try:
        for name, size in SIZES.items():
            wait_for(
                f"{name}'s status counting {size} trials",
                lambda name=name, size=size: (
                    experiment_status(kube, namespace, name).get("trials") == size
                ),
            )
        # One more pass of the small one, now that every Trial is cached.
        before = visits.own.get("small", 0)
        kube.patch(EXPERIMENTS, "small", {"metadata": {"annotations": {"touch": "1"}}}, namespace)
        wait_for("a reconcile of small", lambda: visits.own.get("small", 0) > before)
    finally:
        controller.stop()
    assert visits.own.get("small", 0) >= SIZES["small"]
    assert visits.own.get("large", 0) >= SIZES["large"]
    assert visits.foreign == [], "a reconcile looked at another Experiment's Trials"
