"""A trial pod built the way the webhook builds it, on a real cluster (localcluster).

The pod shares its process namespace and has: the training container with its command wrapped
by `kubetune.wrapperscript.sh_wrap` (StdOut: tee to the metrics log; every `$` escaped as `$$` for
Kubernetes' `$(VAR)` expansion), an Argo-style `wait` container that never exits unless killed,
and the collector sidecar running this package's console script (on the local cluster pods run
their `command` on the host). The pod's service account may only get and patch trials/status.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from kubetune import metrichistory, statusbounds, wrapperscript
from kubetune.kube import PODS, ROLES, TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.accounts import bind_role
from kubetune_testkit.processes import console_script
from kubetune_testkit.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

COLLECTOR = console_script("pns-collector")
LOG_DIR = "/var/log/katib"

TRAIN = """
import sys, time
for epoch in range(4):
    print(f"epoch {epoch}: loss={1 - epoch / 10:.2f} accuracy={epoch / 5:.2f}", flush=True)
    time.sleep(0.2)
print("training done", file=sys.stderr)
"""


def collector_rbac(kube: Kube, namespace: str) -> None:
    """What the trial-controller grants (contracts): get and patch trials/status, nothing else."""
    kube.create(
        ROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "kubetune-pns-collector"},
            "rules": [
                {
                    "apiGroups": ["kubeflow.org"],
                    "resources": ["trials/status"],
                    "verbs": ["get", "patch"],
                }
            ],
        },
        namespace,
    )
    bind_role(kube, namespace, "kubetune-pns-collector", ("Role", "kubetune-pns-collector"))


def trial(name: str) -> dict[str, Any]:
    objective = builders.objective("loss", "minimize", additional=["accuracy"])
    objective["metricStrategies"].append({"name": "accuracy", "value": "max"})
    run = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}}
    return builders.trial(name, run, objective_spec=objective, primary_container="main")


def wrapped_command(argv: list[str]) -> list[str]:
    """The webhook's wrapping of the primary container (StdOut collector); `argv` is read as
    Katib reads it, one shell line, so code passed with `-c` is shell-quoted."""
    sh, c, script, *rest = wrapperscript.wrap_argv(
        argv, LOG_DIR, metrics_file=f"{LOG_DIR}/metrics.log"
    )
    return [sh, c, script.replace("$", "$$"), *rest]


def trial_pod(
    name: str, trial_name: str, train: str = TRAIN, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    mount = [{"name": "metrics-volume", "mountPath": LOG_DIR}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"katib.kubeflow.org/trial": trial_name},
            "annotations": {"sidecar.istio.io/inject": "false"},
        },
        "spec": {
            "restartPolicy": "Never",
            "shareProcessNamespace": True,
            "terminationGracePeriodSeconds": 2,
            "volumes": [{"name": "metrics-volume", "emptyDir": {}}],
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "command": wrapped_command(["python3", "-c", shlex.quote(train)]),
                    "env": [{"name": "KATIB_TRIAL_NAME", "value": trial_name}],
                    "volumeMounts": mount,
                },
                {
                    # Argo's `wait`: nobody registers it, and it only ends when killed.
                    "name": "wait",
                    "image": "python:3.11",
                    "command": ["sleep", "100000"],
                },
                {
                    "name": "metrics-logger-and-collector",
                    "image": "ghcr.io/kubetune/pns-collector:0.1.0",
                    "command": [
                        COLLECTOR,
                        "--trial-name",
                        trial_name,
                        "--namespace",
                        "$(POD_NAMESPACE)",
                        "--objective-metric",
                        "loss",
                        "--objective-type",
                        "minimize",
                        "--additional-metrics",
                        "accuracy",
                        "--metric-strategies",
                        "loss=min;accuracy=max",
                        "--collector-kind",
                        "StdOut",
                        "--format",
                        "TEXT",
                        "--metrics-path",
                        f"{LOG_DIR}/metrics.log",
                        "--log-dir",
                        LOG_DIR,
                        "--expected-processes",
                        "1",
                        "--log-format",
                        "json",
                        *extra,
                    ],
                    "env": [
                        {
                            "name": "POD_NAMESPACE",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                        }
                    ],
                    "volumeMounts": mount,
                },
            ],
        },
    }


def container_state(pod: dict[str, Any], name: str) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status["name"] == name:
            return dict(status.get("state") or {})
    return {}


def collector_ended(cluster: Any, kube: Kube, namespace: str, pod: str) -> tuple[Any, str]:
    """Wait for the collector container of `pod` to end: its terminated state and its log."""

    def collector_done() -> dict[str, Any] | None:
        found = kube.get(PODS, pod, namespace)
        return container_state(found, "metrics-logger-and-collector").get("terminated")

    done = wait_for("the collector to end", collector_done)
    logs = cluster.kubectl(
        "logs", "-n", namespace, pod, "-c", "metrics-logger-and-collector", check=False
    ).stdout
    return done, str(logs)


def test_collector_reports_metrics_to_the_trial_and_exits_0(
    cluster: Any, kube: Kube, namespace: str
) -> None:
    collector_rbac(kube, namespace)
    kube.create(TRIALS, trial("trial-1"), namespace)
    kube.create(PODS, trial_pod("trial-1-pod", "trial-1"), namespace)
    done, logs = collector_ended(cluster, kube, namespace, "trial-1-pod")
    assert done["exitCode"] == 0, logs
    messages = [json.loads(line)["message"] for line in logs.splitlines() if line.startswith("{")]
    assert any("completed; observation reported" in m for m in messages), messages
    # StdOut collection: the sidecar's log carries the training output (Katib's SDK reads it).
    assert "epoch 3: loss=0.70" in logs and "training done" in logs, logs

    status = kube.get(TRIALS, "trial-1", namespace)["status"]
    # The final report carries the whole history (the CRD's schema keeps the field).
    history = metrichistory.read(status)
    assert {name: [v for _, v, _ in points] for name, points in history.items()} == {
        "loss": ["1.00", "0.90", "0.80", "0.70"],
        "accuracy": ["0.00", "0.20", "0.40", "0.60"],
    }
    assert [step for step, _, _ in history["loss"]] == [0, 1, 2, 3]
    assert metrichistory.reports(status, "loss") == 4
    observation = status["observation"]
    assert observation == {
        "metrics": [
            {"name": "loss", "min": "0.70", "max": "1.00", "latest": "0.70"},
            {"name": "accuracy", "min": "0.00", "max": "0.60", "latest": "0.60"},
        ]
    }
    pod = kube.get(PODS, "trial-1-pod", namespace)
    assert container_state(pod, "main")["terminated"]["exitCode"] == 0
    assert "running" in container_state(pod, "wait"), "the unregistered sidecar was not waited for"
    main_logs = cluster.kubectl("logs", "-n", namespace, "trial-1-pod", "-c", "main").stdout
    assert "epoch 3: loss=0.70" in main_logs and "training done" in main_logs

    # The pod completes once the `wait` container is killed, as Argo's controller would.
    kube.delete(PODS, "trial-1-pod", namespace, grace_seconds=1)
    wait_for("the pod to go", lambda: kube.get_or_none(PODS, "trial-1-pod", namespace) is None)


def test_intermediate_reports_while_training_runs(
    cluster: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """Pods run on the host here, so the training process can wait for a host file."""
    go = tmp_path / "go"
    train = (
        "import os, time\n"
        "print('loss=0.9', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "print('loss=0.4', flush=True)\n"
    )
    collector_rbac(kube, namespace)
    kube.create(TRIALS, trial("trial-2"), namespace)
    pod = trial_pod("trial-2-pod", "trial-2", train, ("--report-interval", "0.2"))
    kube.create(PODS, pod, namespace)

    def loss() -> dict[str, Any] | None:
        status = kube.get(TRIALS, "trial-2", namespace).get("status") or {}
        metrics = (status.get("observation") or {}).get("metrics") or []
        return next((m for m in metrics if m["name"] == "loss"), None)

    first = wait_for("an intermediate report", loss)
    assert first == {"name": "loss", "min": "0.9", "max": "0.9", "latest": "0.9"}
    assert "running" in container_state(kube.get(PODS, "trial-2-pod", namespace), "main")
    # The history is written as the collector collects, not only at the end.
    running = kube.get(TRIALS, "trial-2", namespace).get("status")
    assert [v for _, v, _ in metrichistory.read(running)["loss"]] == ["0.9"]
    go.touch()
    wait_for("the final report", lambda: (loss() or {}).get("latest") == "0.4")
    assert loss() == {"name": "loss", "min": "0.4", "max": "0.9", "latest": "0.4"}
    kube.delete(PODS, "trial-2-pod", namespace, grace_seconds=1)


def test_every_watched_training_container_is_waited_for_and_one_failure_fails(
    cluster: Any, kube: Kube, namespace: str
) -> None:
    """Two training containers ending at different times (the later one failing) and an
    unwatched sidecar that never exits, as the webhook builds it for a pod annotated
    `kubetune.kubeflow.org/training-containers: evaluator` (`--expected-processes 2`)."""
    collector_rbac(kube, namespace)
    kube.create(TRIALS, trial("trial-3"), namespace)
    pod = trial_pod("trial-3-pod", "trial-3", extra=("--expected-processes", "2"))
    sh, c, script, *rest = wrapperscript.wrap_argv(
        ["python3", "-c", shlex.quote("import time, sys; time.sleep(3); sys.exit(3)")], LOG_DIR
    )
    pod["spec"]["containers"].insert(
        1,
        {
            "name": "evaluator",
            "image": "python:3.11",
            "command": [sh, c, script.replace("$", "$$"), *rest],
            "volumeMounts": [{"name": "metrics-volume", "mountPath": LOG_DIR}],
        },
    )
    kube.create(PODS, pod, namespace)

    def collector_done() -> dict[str, Any] | None:
        return container_state(
            kube.get(PODS, "trial-3-pod", namespace), "metrics-logger-and-collector"
        ).get("terminated")

    done = wait_for("the collector to end", collector_done)
    pod = kube.get(PODS, "trial-3-pod", namespace)
    main, evaluator = (container_state(pod, n)["terminated"] for n in ("main", "evaluator"))
    assert (main["exitCode"], evaluator["exitCode"]) == (0, 3)
    assert done["finishedAt"] >= evaluator["finishedAt"] >= main["finishedAt"]
    assert done["exitCode"] == 1, "a failed training container fails the collection"
    assert "running" in container_state(pod, "wait")
    metrics = kube.get(TRIALS, "trial-3", namespace)["status"]["observation"]["metrics"]
    assert {"name": "loss", "min": "0.70", "max": "1.00", "latest": "0.70"} in metrics
    kube.delete(PODS, "trial-3-pod", namespace, grace_seconds=1)
    wait_for("the pod to go", lambda: kube.get_or_none(PODS, "trial-3-pod", namespace) is None)


def test_a_fired_rule_stops_the_training_and_marks_the_trial_early_stopped(
    cluster: Any, kube: Kube, namespace: str
) -> None:
    """Issue 15 item 4: the collector evaluates the Trial's rule on every report, stops the
    wrapped training process (which would run 300 epochs, 30 s), reports, then adds EarlyStopped to
    its own Trial's conditions, leaving the trial-controller's conditions as they were."""
    train = (
        "import time\n"
        "for epoch in range(300):\n"
        "    print(f'epoch {epoch}: loss={0.9 + epoch / 1000:.3f} accuracy=0.1', flush=True)\n"
        "    time.sleep(0.1)\n"
    )
    collector_rbac(kube, namespace)
    kube.create(TRIALS, trial("trial-4"), namespace)
    running = {
        "type": "Running",
        "status": "True",
        "reason": "TrialRunning",
        "message": "Trial is running",
        "lastUpdateTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    kube.patch(
        TRIALS, "trial-4", {"status": {"conditions": [running]}}, namespace, subresource="status"
    )
    pod = trial_pod("trial-4-pod", "trial-4", train, ("--early-stop-rule", "loss;0.5;greater;3"))
    kube.create(PODS, pod, namespace)

    def collector_done() -> dict[str, Any] | None:
        return container_state(
            kube.get(PODS, "trial-4-pod", namespace), "metrics-logger-and-collector"
        ).get("terminated")

    done = wait_for("the collector to end", collector_done)
    logs = cluster.kubectl(
        "logs", "-n", namespace, "trial-4-pod", "-c", "metrics-logger-and-collector", check=False
    ).stdout
    assert done["exitCode"] == 0, logs
    main = container_state(kube.get(PODS, "trial-4-pod", namespace), "main")["terminated"]
    assert main["exitCode"] == 0, "an early-stopped container ends with 0 (no job retry)"
    main_logs = cluster.kubectl("logs", "-n", namespace, "trial-4-pod", "-c", "main").stdout
    epochs = [line for line in main_logs.splitlines() if line.startswith("epoch ")]
    assert 3 <= len(epochs) < 300, main_logs
    status = kube.get(TRIALS, "trial-4", namespace)["status"]
    assert status["conditions"][0] == running
    (stopped,) = status["conditions"][1:]
    assert (stopped["type"], stopped["status"], stopped["reason"]) == (
        "EarlyStopped",
        "True",
        "TrialEarlyStopped",
    )
    assert stopped["message"] == "Trial is early stopped"
    loss = next(m for m in status["observation"]["metrics"] if m["name"] == "loss")
    assert loss["min"] == "0.900" and len(epochs) >= 3
    kube.delete(PODS, "trial-4-pod", namespace, grace_seconds=1)


ODD_TRAIN = """
print("epoch 0: loss=0.9 accuracy=0.1", flush=True)
print("epoch 1: loss=0." + "0" * 400_000 + "1 accuracy=0.2", flush=True)
print("epoch 2: loss=\\uff10.05 accuracy=\\u0663", flush=True)
print("epoch 3: loss=0.7 accuracy=0.3", flush=True)
print("epoch 4: loss=1_0 accuracy=0.25", flush=True)
"""


def test_a_400_kb_number_and_odd_digits_never_fail_or_rank(
    cluster: Any, kube: Kube, namespace: str
) -> None:
    """A printed 400 KB number is skipped with a warning naming the limit (on main it became a
    1.2 MB Trial, or failed it after 60 s of retries once refused); `１` and `٣` are no digits,
    and `loss=1_0` is read as upstream's regex reads it, `1` (Python's float() said 10)."""
    collector_rbac(kube, namespace)
    kube.create(TRIALS, trial("odd"), namespace)
    kube.create(PODS, trial_pod("odd-pod", "odd", train=ODD_TRAIN), namespace)
    done, logs = collector_ended(cluster, kube, namespace, "odd-pod")
    assert done["exitCode"] == 0, logs[-2000:]
    messages = [json.loads(line)["message"] for line in logs.splitlines() if line.startswith("{")]
    skipped = [m for m in messages if m.startswith("skipping a value of metric 'loss'")]
    assert len(skipped) == 1 and "more than 128" in skipped[0], messages
    status = kube.get(TRIALS, "odd", namespace)["status"]
    assert status["observation"] == {
        "metrics": [
            {"name": "loss", "min": "0.7", "max": "1", "latest": "1"},
            {"name": "accuracy", "min": "0.1", "max": "0.3", "latest": "0.25"},
        ]
    }
    history = metrichistory.read(status)
    assert [v for _, v, _ in history["loss"]] == ["0.9", "0.7", "1"]
    assert statusbounds.status_error(status) is None  # what the authorizer admits
    kube.delete(PODS, "odd-pod", namespace, grace_seconds=1)
    wait_for("the pod to go", lambda: kube.get_or_none(PODS, "odd-pod", namespace) is None)
