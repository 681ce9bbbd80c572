"""The algorithm process attaches early-stopping rules to new assignments once enough Trials
succeeded (issue 15 item 4), computed from their metric histories; the test plays the
experiment-controller on a real API server."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration
STAMP = "2026-01-01T00:00:00Z"


def _suggestions(kube: Kube, namespace: str, count: int) -> list[dict[str, Any]] | None:
    status = kube.get(SUGGESTIONS, "exp", namespace).get("status") or {}
    entries: list[dict[str, Any]] = status.get("suggestions") or []
    return entries if len(entries) >= count else None


def _seen(process: ServiceProcess) -> int:
    """How many finished Trials the algorithm process's last passes have seen."""
    found = re.findall(r"the algorithm has seen (\d+) finished trials", process.output())
    return max((int(n) for n in found), default=0)


def _succeed(kube: Kube, namespace: str, entry: dict[str, Any], accs: list[float]) -> None:
    """Its Trial, Succeeded, with the history the collector would have written."""
    kube.create(
        TRIALS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": entry["name"], "labels": {"katib.kubeflow.org/experiment": "exp"}},
            "spec": {"parameterAssignments": entry["parameterAssignments"]},
        },
        namespace,
    )
    values = [str(a) for a in accs]
    status = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TrialCreated"},
            {"type": "Succeeded", "status": "True", "reason": "TrialSucceeded"},
        ],
        "observation": {
            "metrics": [
                {"name": "acc", "min": min(values), "max": max(values), "latest": values[-1]}
            ]
        },
        "metricHistory": {
            "metrics": [
                {
                    "name": "acc",
                    "reports": len(values),
                    "steps": list(range(len(values))),
                    "values": values,
                    "times": [STAMP] * len(values),
                }
            ]
        },
    }
    kube.patch(TRIALS, entry["name"], {"status": status}, namespace, subresource="status")


def test_rules_come_with_the_assignments_after_min_trials_required(
    kube: Kube, namespace: str, crds: None, algorithm: Callable[..., ServiceProcess]
) -> None:
    spec = builders.algorithm_spec("random", {"random_state": "3"})
    experiment = builders.experiment(
        "exp",
        namespace,
        objective_spec=builders.objective("acc", strategies=False),
        algorithm=spec,
        earlyStopping={
            "algorithmName": "medianstop",
            "algorithmSettings": [
                {"name": "min_trials_required", "value": "2"},
                {"name": "start_step", "value": "2"},
            ],
        },
    )
    kube.create(EXPERIMENTS, experiment, namespace)
    kube.create(
        SUGGESTIONS, builders.suggestion("exp", namespace, algorithm=spec, requests=2), namespace
    )
    process = algorithm()
    try:
        first = wait_for("two assignments", lambda: _suggestions(kube, namespace, 2), 60)
        assert all("earlyStoppingRules" not in e for e in first), first
        _succeed(kube, namespace, first[0], [0.2, 0.4, 0.9])  # average of the first 2: 0.3
        _succeed(kube, namespace, first[1], [0.6, 0.8, 0.9])  # 0.7
        # The rules come from the Trials the algorithm has seen: ask for more only once its
        # cache has both (a pass says how many finished Trials it saw when that grows).
        wait_for("both Trials seen by the algorithm", lambda: _seen(process) >= 2, 60)
        kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": 3}}, namespace)
        entries = wait_for("a third assignment", lambda: _suggestions(kube, namespace, 3), 60)
        rules = entries[2].get("earlyStoppingRules")
        assert rules, process.output()[-3000:]
        (rule,) = rules
        assert rule["name"] == "acc" and rule["comparison"] == "less"
        assert rule["startStep"] == 2
        assert float(rule["value"]) == pytest.approx(0.5)
    finally:
        process.kill()
