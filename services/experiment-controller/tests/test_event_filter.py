"""The Trial event filter against a real API server: interim reports on running Trials never
cost their Experiment a reconcile, and the Experiment still ends right."""

from __future__ import annotations

import pytest

from kubetune.kube import EXPERIMENTS, Kube
from kubetune_experiment_controller import main
from kubetune_testkit.standins.interim import reconciles, run_trials
from kubetune_testkit.waiting import wait_for
from tests.standins import RunningController, experiment_manifest, experiment_status, last_condition

pytestmark = pytest.mark.integration

TRIALS = 20
REPORTS = 20
PASSES_PER_TRIAL = 6
"""What a Trial may cost its Experiment without interim reports: its three changes a plan
reads (created, Running, Succeeded), and the Experiment status and Suggestion writes that each
of them causes (the pass after a status write, the assignments that replace it)."""


def test_interim_reports_cost_the_experiment_no_reconcile(
    kube: Kube, namespace: str, controller: RunningController
) -> None:
    before = reconciles(main.SERVICE)
    kube.create(
        EXPERIMENTS,
        experiment_manifest("busy", namespace, max_trials=TRIALS, parallel=4),
        namespace,
    )
    finished = run_trials(kube, namespace, "busy", TRIALS, REPORTS)
    done = ("Succeeded", "True", "ExperimentMaxTrialsReached")
    wait_for("the Experiment to succeed", lambda: last_condition(kube, namespace, "busy") == done)
    passes = reconciles(main.SERVICE) - before
    print(f"experiment reconciles: {passes} for {TRIALS} trials x {REPORTS} interim reports")

    status = experiment_status(kube, namespace, "busy")
    assert status["trials"] == TRIALS and status["trialsSucceeded"] == TRIALS
    assert not status.get("trialsRunning")
    best = status["currentOptimalTrial"]
    # The last Trial to finish has the highest final value; interim values never rank.
    assert best["bestTrialName"] == finished[-1]
    assert best["observation"]["metrics"][0]["latest"] == f"{0.5 + (TRIALS - 1) / 100:g}"
    # Without the filter each of the 400 reports woke the Experiment (208 passes with 200).
    assert passes <= PASSES_PER_TRIAL * TRIALS, passes
