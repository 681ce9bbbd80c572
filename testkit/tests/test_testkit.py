"""The helpers themselves: a wait fails naming what it waited for, the builders make objects the
API models accept, and the examples and paths are found in this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetune import api
from kubetune_testkit import builders, conditions, paths
from kubetune_testkit.examples import examples
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.waiting import wait_for


def test_wait_for_returns_the_first_truthy_value() -> None:
    values: Iterator[object] = iter([0, None, [], "ready"])
    assert wait_for("ready", lambda: next(values), timeout=5, interval=0) == "ready"


def test_wait_for_names_what_and_the_last_value_at_the_deadline() -> None:
    with pytest.raises(AssertionError, match=r"waiting for the pod \(last: \[\]\)"):
        wait_for("the pod", list, timeout=0)


def test_a_bad_default_timeout_names_the_variable() -> None:
    env = {**os.environ, "KUBETUNE_TEST_TIMEOUT": "soon"}
    out = subprocess.run(
        [sys.executable, "-c", "import kubetune_testkit"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "KUBETUNE_TEST_TIMEOUT='soon' is not a number of seconds" in out.stderr


def test_builders_make_objects_the_models_accept() -> None:
    job = builders.trial_job(["echo", "${trialParameters.learningRate}"])
    experiment = builders.experiment(
        "e", "ns", trial_spec=job, conditions=builders.JOB_CONDITIONS, maxTrialCount=2
    )
    trial = builders.trial("e-1", builders.batch_job("true"), experiment="e")
    suggestion = builders.suggestion("e", "ns", requests=2)
    for body in (experiment, trial, suggestion):
        assert api.load(body).to_wire() == body
    assert experiment["spec"]["trialTemplate"]["successCondition"]
    assert trial["metadata"]["labels"] == {"katib.kubeflow.org/experiment": "e"}


def test_conditions_read_the_state() -> None:
    obj = builders.trial("t")
    obj["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TrialCreated"},
            {"type": "Running", "status": "False", "reason": "TrialRunning"},
        ]
    }
    assert conditions.is_true(obj, "Created") and not conditions.is_true(obj, "Running")
    assert conditions.true_condition(obj, "Running") is None
    assert conditions.last_condition(obj) == ("Running", "False", "TrialRunning")
    assert conditions.last_condition({}) is None


def test_examples_and_paths_are_of_this_checkout() -> None:
    assert (paths.REPO / "tox.ini").is_file() and (
        paths.CRDS / "trials.kubeflow.org.yaml"
    ).is_file()
    kinds = {doc["kind"] for _, doc in examples()}
    assert kinds == {"Experiment", "Suggestion", "Trial"}
    assert all(doc["kind"] == "Trial" for _, doc in examples("Trial"))


def test_a_process_that_outlives_its_sigterm_fails_with_its_threads_stacks(
    tmp_path: Path,
) -> None:
    """The stop's failure says where the process hung: SIGABRT makes the fault handler (on in
    every run) write each thread's stack into the log the error shows."""
    ignores_sigterm = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "def stuck_here():\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(120)\n"
        "stuck_here()\n"
    )
    process = ServiceProcess("python3", ["-c", ignores_sigterm], tmp_path).start()
    wait_for("the process to ignore SIGTERM", lambda: "ready" in process.output(), 30)
    with pytest.raises(AssertionError, match="still ran 1 s after SIGTERM") as failure:
        process.stop(timeout=1)
    assert "in stuck_here" in str(failure.value), failure.value
    assert not process.alive()
