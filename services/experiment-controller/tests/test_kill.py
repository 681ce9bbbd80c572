"""The real `experiment-controller` process SIGKILLed at random points, then started again.

Stand-ins run in a thread: the algorithm hands out what is requested (and a few more), the
"trial-controller" finishes every trial some time after it appears. Whatever the kill points,
the Experiment ends with exactly maxTrialCount Trials, and a final SIGTERM exits 0.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

import pytest

from kubetune import errors
from kubetune.kube import EXPERIMENTS, Kube
from kubetune_testkit.standins.services import StandInAlgorithm, set_trial
from kubetune_testkit.waiting import wait_for
from tests.standins import experiment_manifest, experiment_status, last_condition, trials_of

pytestmark = pytest.mark.integration

KILLS = int(os.environ.get("KUBETUNE_KILL_ROUNDS", "10"))
MAX_TRIALS = 30
PARALLEL = 5


def _stand_ins(kube: Kube, namespace: str, name: str, stop: threading.Event) -> None:
    algorithm = StandInAlgorithm(kube, namespace, name)
    first_seen: dict[str, float] = {}
    while not stop.wait(0.05):
        try:
            algorithm.fulfil(extra=3)
            for trial in trials_of(kube, namespace, name):
                trial_name = trial["metadata"]["name"]
                if (trial.get("status") or {}).get("conditions"):
                    continue
                seen = first_seen.setdefault(trial_name, time.monotonic())
                if time.monotonic() - seen > 2.0:
                    set_trial(kube, namespace, trial_name, "Succeeded", random.random())
        except errors.ApiError:
            continue


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _start(cluster: Any, namespace: str, port: int = 0) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubetune_experiment_controller.main",
            "--kubeconfig",
            cluster.kubeconfig,
            "--watch-namespace",
            namespace,
            "--no-leader-elect",
            f"--probe-port={port}",
            "--probe-address=127.0.0.1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_sigkill_at_random_points_never_duplicates_or_exceeds(
    kube: Kube, cluster: Any, namespace: str, crds: None
) -> None:
    kube.create(
        EXPERIMENTS,
        experiment_manifest("killed", namespace, max_trials=MAX_TRIALS, parallel=PARALLEL),
        namespace,
    )
    stop = threading.Event()
    helper = threading.Thread(target=_stand_ins, args=(kube, namespace, "killed", stop))
    helper.start()
    rng = random.Random(os.environ.get("KUBETUNE_KILL_SEED", "8"))
    at_kill: list[int] = []
    try:
        for _ in range(KILLS):
            # Kill points are drawn from the time the controller is ready (caches synced), not
            # from its start: a loaded machine's slow start must not turn every kill into one
            # before any work.
            port = _free_port()
            process = _start(cluster, namespace, port)
            wait_for("the controller ready", lambda port=port: _ready(port), timeout=60)
            time.sleep(rng.uniform(0.0, 1.5))
            process.send_signal(signal.SIGKILL)
            process.wait(10)
            at_kill.append(len(trials_of(kube, namespace, "killed")))
            assert at_kill[-1] <= MAX_TRIALS
        port = _free_port()
        process = _start(cluster, namespace, port)
        wait_for("the controller ready", lambda: _ready(port), timeout=30)
        wait_for(
            "MaxTrialsReached",
            lambda: (
                last_condition(kube, namespace, "killed")
                == ("Succeeded", "True", "ExperimentMaxTrialsReached")
            ),
            timeout=120,
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        stop.set()
        helper.join(10)
    assert sum(0 < n < MAX_TRIALS for n in at_kill) >= KILLS // 2, at_kill  # mid-experiment
    trials = trials_of(kube, namespace, "killed")
    assert len(trials) == MAX_TRIALS
    status = experiment_status(kube, namespace, "killed")
    assert status["trials"] == MAX_TRIALS and status["trialsSucceeded"] == MAX_TRIALS
