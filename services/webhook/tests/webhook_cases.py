"""Manifests and small stand-ins shared by the webhook's tests."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kubetune import naming
from kubetune.kube import Resource
from kubetune_testkit import builders
from kubetune_webhook.permissions import Permission
from kubetune_webhook.validating import KindNotInstalled

NS = "team-a"
LABELLED = {naming.LABEL_INJECTION: naming.INJECTION_ENABLED}
TRIAL_LABEL = naming.LABEL_TRIAL


TRAIN = ["python3", "train.py", "--lr=${trialParameters.learningRate}"]


def experiment(**spec_overrides: Any) -> dict[str, Any]:
    """A valid, already-defaulted random-search Experiment (batch Job, StdOut)."""
    exp = builders.experiment(
        "random",
        NS,
        objective_spec=builders.objective(strategies=False, additional=["loss"], goal=0.99),
        parameters=[builders.LR, builders.categorical("opt", ["sgd", "adam"])],
        trial_parameters=builders.references(learningRate="lr", optimizer="opt"),
        trial_spec=builders.trial_job(
            [*TRAIN, "--optimizer=${trialParameters.optimizer}"], image="python:3.12"
        ),
        conditions=builders.JOB_CONDITIONS,
        parallelTrialCount=2,
        maxTrialCount=6,
        maxFailedTrialCount=2,
        resumePolicy="Never",
    )
    exp["spec"].update(copy.deepcopy(spec_overrides))
    return exp


def undefaulted_experiment(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A valid Experiment without the fields the defaulter fills in (for a real API server)."""
    return builders.experiment(
        name,
        namespace,
        objective_spec=builders.objective(
            "loss", "minimize", strategies=False, additional=["accuracy"]
        ),
        collector=None,
        trial_spec=builders.trial_job(
            ["python3", "-c", "\"print('loss=${trialParameters.learningRate}')\""],
            image="python:3.12",
        ),
        **{"maxTrialCount": 4, **spec},
    )


@dataclass
class StaticCluster:
    """In-memory answers for the pure rules (`validating.Cluster`, `injecting.Owners`).

    Not a Kubernetes API double: the real lookups (`lookups.KubeCluster`) are exercised by the
    integration tests against a real API server.
    """

    namespaces: dict[str, dict[str, str]] = field(default_factory=lambda: {NS: dict(LABELLED)})
    config_maps: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    pvs: dict[str, dict[str, Any]] = field(default_factory=dict)
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    forbidden: set[Permission] = field(default_factory=set)
    """What `may` refuses (every other permission is granted)."""
    uninstalled: set[str] = field(default_factory=set)
    """Kinds discovery does not know (their CRD is not installed)."""
    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    service_accounts: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    reads: list[tuple[str, str, str]] = field(default_factory=list)
    """Every Secret and ServiceAccount read, as (kind, namespace, name)."""
    error: Exception | None = None

    def _fail(self) -> None:
        if self.error is not None:
            raise self.error

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        self._fail()
        return self.namespaces.get(name)

    def config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        self._fail()
        return self.config_maps.get((namespace, name))

    def persistent_volume(self, name: str) -> dict[str, Any] | None:
        self._fail()
        return self.pvs.get(name)

    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str | None = None
    ) -> dict[str, Any] | None:
        self._fail()
        return self.objects.get((kind, namespace, name))

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._fail()
        self.reads.append(("Secret", namespace, name))
        return self.secrets.get((namespace, name))

    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._fail()
        self.reads.append(("ServiceAccount", namespace, name))
        return self.service_accounts.get((namespace, name))

    def may(self, user: dict[str, Any], permission: Permission) -> bool:
        self._fail()
        return permission not in self.forbidden

    def resource(self, api_version: str, kind: str) -> Resource:
        self._fail()
        if kind in self.uninstalled:
            raise KindNotInstalled(f"kind {kind} is not served by {api_version}")
        group, _, version = api_version.rpartition("/")
        return Resource(group, version, kind.lower() + "s", kind)


def trial(name: str = "random-abc", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": {
            "type": "maximize",
            "objectiveMetricName": "accuracy",
            "additionalMetricNames": ["loss"],
            "metricStrategies": [
                {"name": "accuracy", "value": "max"},
                {"name": "loss", "value": "max"},
            ],
        },
        "primaryContainerName": "training-container",
        "metricsCollector": {"collector": {"kind": "StdOut"}},
        "runSpec": {"apiVersion": "batch/v1", "kind": "Job"},
    }
    body.update(spec)
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": "trial-uid",
            "labels": {naming.LABEL_EXPERIMENT: "random"},
        },
        "spec": body,
    }


def pod(*containers: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "random-abc-",
            "namespace": NS,
            # The trial-controller labels every pod template of the trial's job.
            "labels": dict(
                labels
                if labels is not None
                else {"job-name": "random-abc", TRIAL_LABEL: "random-abc"}
            ),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "random-abc",
                    "uid": "j",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "containers": list(containers)
            or [
                {
                    "name": "training-container",
                    "image": "python:3.12",
                    "command": ["python3", "train.py"],
                    "args": ["--lr=0.1"],
                }
            ],
            "restartPolicy": "Never",
        },
    }


def job(name: str = "random-abc") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": "j",
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1beta1",
                    "kind": "Trial",
                    "name": name,
                    "uid": "trial-uid",
                    "controller": True,
                }
            ],
        },
    }


def review(
    obj: Any,
    kind: str,
    operation: str = "CREATE",
    old: Any = None,
    uid: str = "u-1",
    user: dict[str, Any] | None = None,
) -> dict[str, Any]:
    group = "kubeflow.org" if kind == "Experiment" else ""
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": "v1beta1" if group else "v1", "kind": kind},
        "operation": operation,
        "namespace": NS,
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    if user is not None:
        request["userInfo"] = user
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
