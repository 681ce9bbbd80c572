"""`kubetune get EXPERIMENT` answers from the Experiment's status and its active Trials.

At 10,000 Trials, listing every Trial took 28 s (70 s at 30,000), so the default view reads the
Experiment (counts, condition, best trial) and GETs only the Trials its status names as running
or pending; the whole table is there on request (`--all`, `--sort-by`). The reader here may
`get` Trials but not `list` them: the default view working for it shows it lists nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubetune_cli import main

from kubetune import errors
from kubetune.kube import EXPERIMENTS, ROLES, SERVICE_ACCOUNTS, TRIALS, Kube, connect
from kubetune_testkit.accounts import bind_role, service_account_token, token_kubeconfig
from kubetune_testkit.builders import experiment, trial
from kubetune_testkit.standins.services import trial_status
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

# name, lr, state, accuracy
TRIALS_OF_BIG = [
    ("big-a", "0.01", "Succeeded", 0.5),
    ("big-b", "0.05", "Succeeded", 0.9),
    ("big-c", "0.02", "Failed", None),
    ("big-p", "0.08", "Created", None),
    ("big-r", "0.07", "Running", 0.3),
]

STATUS = {
    "conditions": [
        {
            "type": "Running",
            "status": "True",
            "reason": "ExperimentRunning",
            "message": "Experiment is running",
        }
    ],
    "currentOptimalTrial": {
        "bestTrialName": "big-b",
        "parameterAssignments": [{"name": "lr", "value": "0.05"}],
        "observation": {
            "metrics": [{"name": "accuracy", "min": "0.8", "max": "0.9", "latest": "0.9"}]
        },
    },
    "trials": 5,
    "trialsSucceeded": 2,
    "trialsFailed": 1,
    "trialsRunning": 1,
    "trialsPending": 1,
    "succeededTrialList": ["big-a", "big-b"],
    "failedTrialList": ["big-c"],
    "runningTrialList": ["big-r"],
    "pendingTrialList": ["big-p"],
}


@pytest.fixture
def big(kube: Kube, namespace: str) -> str:
    """Experiment `big` with five Trials and the status the experiment-controller writes."""
    kube.create(EXPERIMENTS, experiment("big", maxTrialCount=100), namespace)
    for name, lr, state, accuracy in TRIALS_OF_BIG:
        body = trial(name, experiment="big", assignments={"lr": lr})
        kube.create(TRIALS, body, namespace)
        status = trial_status(state, accuracy)
        kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")
    kube.patch(EXPERIMENTS, "big", {"status": STATUS}, namespace, subresource="status")
    return "big"


@pytest.fixture
def reader(big: str, cluster: ClusterHandle, kube: Kube, namespace: str, tmp_path: Path) -> str:
    """A kubeconfig that may read Experiments and get single Trials, never list Trials."""
    kube.create(
        ROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "get-only"},
            "rules": [
                {
                    "apiGroups": ["kubeflow.org"],
                    "resources": ["experiments"],
                    "verbs": ["get", "list"],
                },
                {"apiGroups": ["kubeflow.org"], "resources": ["trials"], "verbs": ["get"]},
            ],
        },
        namespace,
    )
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}
    kube.create(SERVICE_ACCOUNTS, account, namespace)
    bind_role(kube, namespace, "get-only", ("Role", "get-only"), ("reader",))
    token = service_account_token(cluster, "reader", namespace)
    path = token_kubeconfig(cluster.kubeconfig, token, tmp_path / "reader")
    as_reader = Kube(connect(path))

    def granted() -> bool:
        try:
            return as_reader.get(TRIALS, "big-a", namespace) is not None
        except errors.Forbidden:
            return False  # the authorizer's cache has not seen the binding yet

    wait_for("the reader's Role to apply", granted)
    return path


def _get(kubeconfig: str, namespace: str, *args: str) -> list[str]:
    return ["--kubeconfig", kubeconfig, "-n", namespace, "get", *args]


def test_default_view_reads_the_status_and_the_active_trials_only(
    big: str, reader: str, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main(_get(reader, namespace, big, "--limit", "3")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"experiment {namespace}/big: Running (Experiment is running)"
    assert out[1] == "trials: 5 (2 succeeded, 1 failed, 1 running, 1 pending)"
    assert out[2] == "best: big-b  lr=0.05  accuracy=0.9 (min 0.8, max 0.9)"
    table = out[3:-1]
    assert table[0].split() == ["TRIAL", "STATE", "LR", "ACCURACY"]
    assert [row.split() for row in table[1:]] == [
        ["big-p", "Pending", "0.08", "-"],
        ["big-r", "Running", "0.07", "0.3"],
    ]
    assert out[-1] == (
        "3 finished trials not listed: --all lists every trial, "
        "--sort-by metric --descending --limit 10 the ten best"
    )


def test_the_whole_table_is_on_request_and_needs_list(
    big: str,
    reader: str,
    cluster: ClusterHandle,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main.main(_get(reader, namespace, big, "--all")) == 1
    assert "403 Forbidden" in capsys.readouterr().err

    admin = cluster.kubeconfig
    assert main.main(_get(admin, namespace, big, "--all", "--limit", "2")) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:3]] == ["big-a", "big-b"]
    assert out[3:] == ["(the first 2 of 5 trials: --limit to show more)"]

    assert (
        main.main(
            _get(admin, namespace, big, "--sort-by", "metric", "--descending", "--limit", "1")
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert [line.split() for line in out[1:2]] == [["big-b", "Succeeded", "0.05", "0.9"]]
    assert out[2:] == ["(the first 1 of 5 trials: --limit to show more)"]

    assert main.main(_get(admin, namespace, big, "--all")) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names == [name for name, *_ in TRIALS_OF_BIG]


def test_a_small_experiment_shows_every_trial(
    big: str, cluster: ClusterHandle, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Up to `--limit` trials (default 50) the default view lists them all, as it always did:
    one page, worth it for the live table of a small experiment."""
    assert main.main(_get(cluster.kubeconfig, namespace, big)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "trials: 5 (2 succeeded, 1 failed, 1 running, 1 pending)"
    assert out[3].split() == ["TRIAL", "STATE", "LR", "ACCURACY"]
    assert [line.split()[:2] for line in out[4:]] == [
        ["big-a", "Succeeded"],
        ["big-b", "Succeeded"],
        ["big-c", "Failed"],
        ["big-p", "Pending"],
        ["big-r", "Running"],
    ]


def test_json_of_the_default_view(
    big: str, cluster: ClusterHandle, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main(_get(cluster.kubeconfig, namespace, big, "-o", "json")) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert summary["state"] == "Running"
    assert summary["counts"] == {
        "trials": 5,
        "succeeded": 2,
        "earlyStopped": 0,
        "failed": 1,
        "killed": 0,
        "metricsUnavailable": 0,
        "running": 1,
        "pending": 1,
    }
    assert summary["best"]["bestTrialName"] == "big-b"
    assert [t["name"] for t in summary["trials"]] == [name for name, *_ in TRIALS_OF_BIG]
    assert summary["unlisted"] == 0

    assert main.main(_get(cluster.kubeconfig, namespace, big, "-o", "json", "--limit", "2")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in summary["trials"]] == ["big-p", "big-r"]
    assert summary["unlisted"] == 3
