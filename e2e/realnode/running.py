"""Experiments on the real node, as a user runs them: apply, wait for success, read the trials,
their pods and metrics; and what a failure needs shown (the namespace's pods, events and
kubetune's logs)."""

from __future__ import annotations

import json
from typing import Any

from kubetune_testkit import kubectl
from kubetune_testkit.conditions import is_true
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

Obj = dict[str, Any]


def describe(cluster: ClusterHandle, namespace: str) -> str:
    """The namespace's pods, their containers' states and events, and kubetune's logs: what
    a failure on the real node needs to be understood."""
    parts = []
    for args in (
        ("get", "pods", "-n", namespace, "-o", "wide"),
        ("describe", "pods", "-n", namespace),
        ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp"),
    ):
        out = cluster.kubectl(*args, check=False)
        parts.append(f"$ kubectl {' '.join(args)}\n{out.stdout[-6000:]}{out.stderr}")
    for deployment in (
        "kubetune-webhook",
        "kubetune-experiment-controller",
        "kubetune-suggestion-controller",
        "kubetune-trial-controller",
        "kubetune-db-manager",
        "kubetune-ui",
    ):
        out = cluster.kubectl(
            "logs", "-n", "kubeflow", f"deployment/{deployment}", "--tail=30", check=False
        )
        parts.append(f"$ kubectl logs deployment/{deployment}\n{out.stdout}{out.stderr}")
    return "\n".join(parts)


def run(cluster: ClusterHandle, exp: Obj, timeout: float = 600) -> Obj:
    """Apply the Experiment and wait for it to succeed."""
    kubectl.apply(cluster, exp, check=True)
    return wait_succeeded(cluster, exp["metadata"]["name"], exp["metadata"]["namespace"], timeout)


def wait_succeeded(cluster: ClusterHandle, name: str, ns: str, timeout: float = 600) -> Obj:
    """The Experiment once it succeeded; a failure shows the namespace."""

    def succeeded() -> Obj | None:
        found: Obj = get_json(cluster, "experiment", name, "-n", ns)
        if is_true(found, "Failed"):
            raise AssertionError(f"{name} failed: {json.dumps(found['status'])}")
        return found if is_true(found, "Succeeded") else None

    try:
        return wait_for(f"Experiment {name} Succeeded", succeeded, timeout, interval=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(cluster, ns)}") from None


def trials_of(cluster: ClusterHandle, ns: str, name: str) -> list[Obj]:
    selector = f"katib.kubeflow.org/experiment={name}"
    items: list[Obj] = get_json(cluster, "trials", "-n", ns, "-l", selector)["items"]
    return items


def pods_of(cluster: ClusterHandle, ns: str, selector: str) -> list[Obj]:
    items: list[Obj] = get_json(cluster, "pods", "-n", ns, "-l", selector)["items"]
    return items


def metric(observation: Obj, name: str, field: str = "latest") -> float:
    """One metric's value of an observation (a Trial's status.observation, or the
    Experiment's currentOptimalTrial.observation)."""
    (found,) = [m for m in observation["metrics"] if m["name"] == name]
    return float(found[field])
