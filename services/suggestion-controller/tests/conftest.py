"""Fixtures of the integration tests: CRDs, the algorithm's ClusterRole, the suggestion-controller
as a real process (its console script, watching only the test namespace, with a katib-config whose
FromVolume PVs are hostPath directories under the test's tmp dir), and a stand-in for the
experiment-controller: the test writes the Experiment status and the Suggestion spec by hand, as
the contracts say the experiment-controller does, and Trials with finished status as the
trial-controller and collector would. The algorithm pods are real: the local node agent runs
`suggestion-algorithm` as a host process.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import config, errors, naming
from kubetune.kube import (
    CLUSTER_ROLES,
    CUSTOM_RESOURCE_DEFINITIONS,
    EXPERIMENTS,
    PODS,
    SUGGESTIONS,
    TRIALS,
    Kube,
    connect,
)

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "kustomize" / "base" / "crds"
ALGORITHM_ROLE = REPO / "kustomize" / "base" / "suggestion-algorithm" / "clusterrole.yaml"
SCRIPT = shutil.which("suggestion-controller") or str(
    Path(sys.executable).parent / "suggestion-controller"
)
STORAGE_CLASS = "kubetune-test-local"


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 90.0) -> Any:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def conditions_of(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def is_true(obj: dict[str, Any] | None, type_: str) -> bool:
    return conditions_of(obj).get(type_, {}).get("status") == "True"


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    return Kube(connect(cluster.kubeconfig))


@pytest.fixture(scope="session")
def installed(kube: Kube) -> Iterator[None]:
    """kubetune's CRDs (left installed: shared) and the algorithm ClusterRole (removed if ours)."""
    for path in sorted(CRDS.glob("*.kubeflow.org.yaml")):
        body = yaml.safe_load(path.read_text())
        with contextlib.suppress(errors.AlreadyExists):
            kube.create(CUSTOM_RESOURCE_DEFINITIONS, body)
    for kind in ("Experiment", "Suggestion", "Trial"):
        wait_for(f"{kind} served", lambda k=kind: _served(kube, k), 60)
    role = yaml.safe_load(ALGORITHM_ROLE.read_text())
    made = False
    if kube.get_or_none(CLUSTER_ROLES, role["metadata"]["name"]) is None:
        with contextlib.suppress(errors.AlreadyExists):
            kube.create(CLUSTER_ROLES, role)
            made = True
    yield
    if made:
        with contextlib.suppress(errors.NotFound):
            kube.delete(CLUSTER_ROLES, role["metadata"]["name"])


def _served(kube: Kube, kind: str) -> bool:
    try:
        kube.resource_for("kubeflow.org/v1beta1", kind)
        return True
    except errors.NotFound:
        return False


@dataclass
class ControllerProcess:
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(30)
        return int(self.proc.returncode)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-8000:]


@pytest.fixture
def host_prefix(tmp_path: Path) -> Path:
    prefix = tmp_path / "pv"
    prefix.mkdir()
    return prefix


@pytest.fixture
def controller(
    cluster: Any, namespace: str, installed: None, tmp_path: Path, host_prefix: Path
) -> Iterator[ControllerProcess]:
    """The suggestion-controller process; asserts a clean exit (0 on SIGTERM) at teardown."""
    cfg = config.default()
    for entry in cfg.runtime.suggestions:
        entry.persistent_volume_claim_spec = {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": STORAGE_CLASS,
            "resources": {"requests": {"storage": "1Gi"}},
        }
        entry.persistent_volume_spec = {
            "storageClassName": STORAGE_CLASS,
            "hostPath": {"path": str(host_prefix) + "/"},
        }
    path = tmp_path / "katib-config.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    log = tmp_path / "suggestion-controller.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                SCRIPT,
                "--kubeconfig",
                cluster.kubeconfig,
                "--watch-namespace",
                namespace,
                "--config",
                str(path),
                "--no-leader-elect",
                "--probe-port=0",
                "--log-level=debug",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    handle = ControllerProcess(proc, log)
    yield handle
    code = handle.stop()
    assert code == 0, handle.logs()
    assert "Traceback" not in log.read_text(errors="replace"), handle.logs()


@dataclass
class StandIn:
    """Writes what the experiment-controller, trial-controller and collector would write."""

    kube: Kube
    namespace: str
    name: str

    def experiment(self) -> dict[str, Any]:
        return self.kube.get(EXPERIMENTS, self.name, self.namespace)

    def suggestion(self) -> dict[str, Any]:
        return self.kube.get(SUGGESTIONS, self.name, self.namespace)

    def create(
        self,
        algorithm: str,
        policy: str,
        parameters: list[dict[str, Any]],
        settings: dict[str, str] | None = None,
        requests: int = 0,
    ) -> None:
        settings_list = [{"name": k, "value": v} for k, v in (settings or {}).items()]
        body = {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "parameters": parameters,
                "objective": {
                    "type": "minimize",
                    "objectiveMetricName": "loss",
                    "metricStrategies": [{"name": "loss", "value": "min"}],
                },
                "algorithm": {"algorithmName": algorithm, "algorithmSettings": settings_list},
                "resumePolicy": policy,
                "parallelTrialCount": 3,
                "maxTrialCount": 10,
                "trialTemplate": {
                    "primaryContainerName": "main",
                    "trialSpec": {"apiVersion": "batch/v1", "kind": "Job"},
                },
            },
        }
        exp = self.kube.create(EXPERIMENTS, body, self.namespace)
        self.set_experiment([("Created", "True", "ExperimentCreated")])
        self.set_experiment([("Running", "True", "ExperimentRunning")])
        self.kube.create(
            SUGGESTIONS,
            {
                "apiVersion": "kubeflow.org/v1beta1",
                "kind": "Suggestion",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "labels": naming.experiment_labels(self.name),
                    "ownerReferences": [
                        {
                            "apiVersion": "kubeflow.org/v1beta1",
                            "kind": "Experiment",
                            "name": self.name,
                            "uid": exp["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {
                    "algorithm": {"algorithmName": algorithm, "algorithmSettings": settings_list},
                    "requests": requests,
                    "resumePolicy": policy,
                },
            },
            self.namespace,
        )

    def set_experiment(self, changes: list[tuple[str, str, str]]) -> None:
        """Append/replace conditions in order (the last one is the Experiment's state)."""
        current = (self.experiment().get("status") or {}).get("conditions") or []
        for type_, status, reason in changes:
            current = [c for c in current if c["type"] != type_]
            current.append({"type": type_, "status": status, "reason": reason, "message": reason})
        self.kube.patch(
            EXPERIMENTS,
            self.name,
            {"status": {"conditions": current}},
            self.namespace,
            subresource="status",
        )

    def restart_experiment(self) -> None:
        """What the experiment-controller does on a restart: Restarting in, Succeeded/Failed out."""
        current = (self.experiment().get("status") or {}).get("conditions") or []
        kept = [c for c in current if c["type"] not in ("Succeeded", "Failed", "Restarting")]
        kept.append(
            {
                "type": "Restarting",
                "status": "True",
                "reason": "ExperimentRestarting",
                "message": "Experiment is restarted",
            }
        )
        self.kube.patch(
            EXPERIMENTS,
            self.name,
            {"status": {"conditions": kept}},
            self.namespace,
            subresource="status",
        )

    def request(self, count: int) -> None:
        self.kube.patch(SUGGESTIONS, self.name, {"spec": {"requests": count}}, self.namespace)

    def assignments(self) -> list[dict[str, Any]]:
        """Whole assignments: one whose Trial exists keeps only its name in the Suggestion (the
        object stays small), so its parameters come from the Trial, as the algorithm does."""
        stored = list((self.suggestion().get("status") or {}).get("suggestions") or [])
        if all("parameterAssignments" in a for a in stored):
            return stored
        trials = {
            t["metadata"]["name"]: t["spec"] for t in self.kube.list_all(TRIALS, self.namespace)
        }
        return [
            a if "parameterAssignments" in a else {**a, **trials.get(a["name"], {})} for a in stored
        ]

    def wait_assignments(self, count: int, timeout: float = 120.0) -> list[dict[str, Any]]:
        return wait_for(  # type: ignore[no-any-return]
            f"{count} assignments",
            lambda: (a := self.assignments()) and len(a) >= count and a,
            timeout,
        )

    def finish(self, assignment: dict[str, Any], loss: float) -> None:
        """A Trial of the assignment that succeeded with this loss."""
        name = assignment["name"]
        if self.kube.get_or_none(TRIALS, name, self.namespace) is None:
            self.kube.create(
                TRIALS,
                {
                    "apiVersion": "kubeflow.org/v1beta1",
                    "kind": "Trial",
                    "metadata": {
                        "name": name,
                        "namespace": self.namespace,
                        "labels": naming.trial_labels(self.name, name),
                    },
                    "spec": {"parameterAssignments": assignment["parameterAssignments"]},
                },
                self.namespace,
            )
        self.kube.patch(
            TRIALS,
            name,
            {
                "status": {
                    "conditions": [
                        {"type": "Created", "status": "True", "reason": "TrialCreated"},
                        {"type": "Succeeded", "status": "True", "reason": "TrialSucceeded"},
                    ],
                    "observation": {
                        "metrics": [
                            {
                                "name": "loss",
                                "min": str(loss),
                                "max": str(loss),
                                "latest": str(loss),
                            }
                        ]
                    },
                }
            },
            self.namespace,
            subresource="status",
        )

    def algorithm_pods(self) -> list[dict[str, Any]]:
        return [
            p
            for p in self.kube.list_all(
                PODS, self.namespace, label_selector=f"{naming.LABEL_SUGGESTION}={self.name}"
            )
            if not (p.get("metadata") or {}).get("deletionTimestamp")
        ]


@pytest.fixture
def standin(kube: Kube, namespace: str) -> StandIn:
    return StandIn(kube, namespace, "exp")
