"""Against a real API server: the webhook registered through its real configurations.

The configurations are those of kustomize/base/webhook with two changes a test needs: the
clientConfig is `url: https://127.0.0.1:<port>/...` with the caBundle of a CA made by
`webhook certs`, and every webhook's namespaceSelector is narrowed to the test's namespace, so
other users of a shared cluster are never affected. Each test registers them under a unique
name and deletes them afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import errors, naming
from kubetune.kube import (
    EXPERIMENTS,
    JOBS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PERSISTENT_VOLUMES,
    PODS,
    TRIALS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
    Resource,
)
from kubetune_webhook import certificates, injecting

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
WEBHOOK_BASE = REPO / "kustomize" / "base" / "webhook"
CRDS = REPO / "kustomize" / "base" / "crds"
DEADLINE = 60.0


def _wait(check: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@dataclass(frozen=True)
class Webhook:
    url: str
    ca_pem: bytes
    log: Path


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    return Kube(cluster.api_client())


@pytest.fixture(scope="session")
def crds(cluster: Any) -> None:
    cluster.kubectl("apply", "-f", str(CRDS / "experiments.kubeflow.org.yaml"))
    cluster.kubectl("apply", "-f", str(CRDS / "trials.kubeflow.org.yaml"))
    cluster.kubectl("apply", "-f", str(CRDS / "suggestions.kubeflow.org.yaml"))
    for crd in ("experiments", "trials"):
        cluster.kubectl(
            "wait", "--for=condition=Established", f"crd/{crd}.kubeflow.org", "--timeout=60s"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def webhook(
    cluster: Any, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """`webhook serve` as its own process on loopback, with certificates from `webhook certs`."""
    d = tmp_path_factory.mktemp("webhook")
    files = certificates.issue(d, ["localhost"], ["127.0.0.1"])
    port = _free_port()
    log = d / "webhook.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("webhook")),
                "serve",
                "--address",
                "127.0.0.1",
                "--port",
                str(port),
                "--cert-file",
                str(files.cert),
                "--key-file",
                str(files.key),
                "--kubeconfig",
                cluster.kubeconfig,
                "--log-level",
                "debug",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBETUNE_WEBHOOK_REQUIRE_NAMESPACE_LABEL": "true"},
        )
    try:
        _wait(
            lambda: "serving admission" in log.read_text() or proc.poll() is not None,
            "webhook start",
        )
        assert proc.poll() is None, log.read_text()
        yield Webhook(f"https://127.0.0.1:{port}", files.ca_cert.read_bytes(), log)
    finally:
        proc.terminate()
        try:
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def _configurations(
    webhook: Webhook, namespace: str, name: str
) -> list[tuple[Resource, dict[str, Any]]]:
    """The kustomize configurations, pointed at the test server and scoped to `namespace`."""
    out = []
    for resource, file in (
        (MUTATING_WEBHOOK_CONFIGURATIONS, "mutatingwebhookconfiguration.yaml"),
        (VALIDATING_WEBHOOK_CONFIGURATIONS, "validatingwebhookconfiguration.yaml"),
    ):
        config = yaml.safe_load((WEBHOOK_BASE / file).read_text())
        config = copy.deepcopy(config)
        config["metadata"] = {"name": name, "labels": {"kubetune.test/webhook": "true"}}
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": webhook.url + path,
                "caBundle": base64.b64encode(webhook.ca_pem).decode(),
            }
            selector = hook.setdefault("namespaceSelector", {})
            selector.setdefault("matchLabels", {})["kubernetes.io/metadata.name"] = namespace
        out.append((resource, config))
    return out


@pytest.fixture
def registered(cluster: Any, kube: Kube, webhook: Webhook, namespace: str) -> Iterator[str]:
    """The namespace, labelled for injection, with the webhook registered for it only."""
    cluster.kubectl(
        "label", "namespace", namespace, f"{naming.LABEL_INJECTION}={naming.INJECTION_ENABLED}"
    )
    name = f"kubetune-webhook-test-{uuid.uuid4().hex[:8]}"
    configs = _configurations(webhook, namespace, name)
    try:
        for resource, body in configs:
            kube.create(resource, body)
        # The configuration reaches the admission plugin asynchronously: wait until a server-side
        # dry run of an invalid Experiment is refused by us.
        probe = _experiment("probe", namespace, maxTrialCount=0)
        _wait(
            lambda: "must be greater than 0" in _apply(cluster, probe, "--dry-run=server").stderr,
            "the webhook configuration to take effect",
        )
        yield namespace
    finally:
        for resource, _ in configs:
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, name)


def _apply(cluster: Any, manifest: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    result: subprocess.CompletedProcess[str] = cluster.kubectl(
        "apply", *extra, "-f", "-", check=False, stdin=json.dumps(manifest)
    )
    return result


def _experiment(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A valid Experiment without the fields the defaulter fills in."""
    manifest: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "objective": {
                "type": "minimize",
                "objectiveMetricName": "loss",
                "additionalMetricNames": ["accuracy"],
            },
            "algorithm": {"algorithmName": "random"},
            "maxTrialCount": 4,
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.01", "max": "0.1"},
                }
            ],
            "trialTemplate": {
                "primaryContainerName": "training-container",
                "trialParameters": [{"name": "learningRate", "reference": "lr"}],
                "trialSpec": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "training-container",
                                        "image": "python:3.12",
                                        "command": [
                                            "python3",
                                            "-c",
                                            "print('loss=${trialParameters.learningRate}')",
                                        ],
                                    }
                                ],
                            }
                        }
                    },
                },
            },
        },
    }
    manifest["spec"].update(spec)
    return manifest


def test_invalid_experiment_is_refused_with_the_message(cluster: Any, registered: str) -> None:
    bad = _experiment("bad", registered, parallelTrialCount=9, algorithm={"algorithmName": "enas"})
    result = _apply(cluster, bad)
    assert result.returncode != 0
    assert "denied the request" in result.stderr
    assert "spec.parallelTrialCount: 9 is greater than spec.maxTrialCount 4" in result.stderr
    assert "failed to find suggestion config for algorithm enas" in result.stderr
    assert (
        cluster.kubectl("get", "experiment", "bad", "-n", registered, check=False).returncode != 0
    )


def test_valid_experiment_is_stored_with_its_defaults(
    cluster: Any, kube: Kube, registered: str
) -> None:
    result = _apply(cluster, _experiment("good", registered))
    assert result.returncode == 0, result.stderr
    spec = kube.get(EXPERIMENTS, "good", registered)["spec"]
    assert spec["parallelTrialCount"] == 3
    assert spec["resumePolicy"] == "Never"
    assert spec["objective"]["metricStrategies"] == [
        {"name": "loss", "value": "min"},
        {"name": "accuracy", "value": "min"},
    ]
    template = spec["trialTemplate"]
    assert (
        template["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    )
    assert template["failureCondition"] == 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    assert spec["metricsCollectorSpec"] == {"collector": {"kind": "StdOut"}}
    assert spec["parameters"][0]["feasibleSpace"]["distribution"] == "uniform"
    # An update that changes an immutable field is refused, naming the editable ones.
    changed = _experiment("good", registered, algorithm={"algorithmName": "grid"})
    result = _apply(cluster, changed)
    assert result.returncode != 0
    assert "spec.algorithm cannot change after creation" in result.stderr


def test_trial_pod_arrives_with_sidecar_wrapped_command_and_annotation(
    cluster: Any, kube: Kube, registered: str
) -> None:
    ns = registered
    trial_name = "good-trial-1"
    trial = kube.create(
        TRIALS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Trial",
            "metadata": {"name": trial_name, "labels": {naming.LABEL_EXPERIMENT: "good"}},
            "spec": {
                "objective": {
                    "type": "minimize",
                    "objectiveMetricName": "loss",
                    "metricStrategies": [{"name": "loss", "value": "min"}],
                },
                "primaryContainerName": "training-container",
                "metricsCollector": {"collector": {"kind": "StdOut"}},
                "runSpec": {"apiVersion": "batch/v1", "kind": "Job"},
            },
        },
        ns,
    )
    user_argv = ["python3", "-c", "import os; print('loss=0.25', os.environ['KATIB_TRIAL_NAME'])"]
    kube.create(
        JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": trial_name,
                "ownerReferences": [
                    {
                        "apiVersion": "kubeflow.org/v1beta1",
                        "kind": "Trial",
                        "name": trial_name,
                        "uid": trial["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "backoffLimit": 0,
                "template": {
                    # As the trial-controller labels every pod template of a trial's job.
                    "metadata": {"labels": {naming.LABEL_TRIAL: trial_name}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "training-container",
                                "image": "python:3.12",
                                "command": user_argv,
                            }
                        ],
                    },
                },
            },
        },
        ns,
    )

    def pod() -> dict[str, Any] | None:
        items = kube.list(PODS, ns, label_selector=f"job-name={trial_name}").get("items") or []
        return items[0] if items else None

    created = _wait(pod, "the job controller to create the trial pod")
    meta, spec = created["metadata"], created["spec"]
    assert meta["annotations"][naming.ISTIO_INJECT] == "false"
    assert meta["labels"][naming.LABEL_TRIAL] == trial_name
    assert meta["labels"][naming.LABEL_EXPERIMENT] == "good"
    assert spec["shareProcessNamespace"] is True
    names = [c["name"] for c in spec["containers"]]
    assert names == ["training-container", injecting.SIDECAR_NAME]
    training, sidecar = spec["containers"]
    assert training["command"] == injecting.wrapped_command(user_argv, "StdOut")
    assert {"name": "KATIB_TRIAL_NAME", "value": trial_name} in training["env"]
    args = sidecar["args"]
    assert args[:4] == ["--trial-name", trial_name, "--namespace", ns]
    assert args[args.index("--expected-processes") + 1] == "1"
    assert {"name": "metrics-volume", "emptyDir": {}} in spec["volumes"]


def test_second_from_volume_experiment_is_refused_while_its_pv_exists(
    cluster: Any, kube: Kube, registered: str
) -> None:
    ns = registered
    name = "resume"
    first = _experiment(name, ns, resumePolicy="FromVolume")
    assert _apply(cluster, first).returncode == 0
    pv = naming.suggestion_pv_name(naming.suggestion_name(name), "random", ns)
    # The suggestion-controller's PV, left behind when the first experiment goes.
    kube.create(
        PERSISTENT_VOLUMES,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv, "labels": {"kubetune.test/webhook": "true"}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": f"/tmp/kubetune-webhook-test/{pv}"},
            },
        },
    )
    try:
        kube.delete(EXPERIMENTS, name, ns)
        # Another engineer's controller on a shared cluster may hold a finalizer: drop it.
        with contextlib.suppress(errors.NotFound):
            kube.patch(EXPERIMENTS, name, {"metadata": {"finalizers": None}}, ns)
        _wait(lambda: kube.get_or_none(EXPERIMENTS, name, ns) is None, "the first experiment to go")
        result = _apply(cluster, first)
        assert result.returncode != 0
        assert f"PV: {pv} is not deleted" in result.stderr
        assert f"kubectl delete pv {pv}" in result.stderr
        kube.delete(PERSISTENT_VOLUMES, pv)
        _wait(lambda: kube.get_or_none(PERSISTENT_VOLUMES, pv) is None, "the PV to go")
        result = _apply(cluster, first)
        assert result.returncode == 0, result.stderr
    finally:
        with contextlib.suppress(errors.NotFound):
            kube.delete(PERSISTENT_VOLUMES, pv)


def test_an_author_without_the_rights_kubetune_would_use_is_refused(
    cluster: Any, registered: str
) -> None:
    """A user who may create Experiments but not Jobs cannot have kubetune create them."""
    user = f"author-{uuid.uuid4().hex[:6]}"
    role = f"experiments-only-{user}"
    cluster.kubectl(
        "create", "role", role, "-n", registered,
        "--verb=create,get,patch", "--resource=experiments.kubeflow.org",
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", role, "-n", registered, f"--role={role}", f"--user={user}"
    )
    manifest = _experiment("deputy", registered)
    refused = _apply(cluster, manifest, f"--as={user}")
    assert refused.returncode != 0
    assert f"{user} may not create jobs.batch in namespace {registered}" in refused.stderr
    cluster.kubectl(
        "create", "role", f"{role}-jobs", "-n", registered, "--verb=create", "--resource=jobs"
    )
    cluster.kubectl(
        "create", "rolebinding", f"{role}-jobs", "-n", registered,
        f"--role={role}-jobs", f"--user={user}",
    )  # fmt: skip
    allowed = _wait(
        lambda: (r := _apply(cluster, manifest, f"--as={user}")).returncode == 0 and r,
        "the author's new right to count",
        timeout=30,
    )
    assert allowed.returncode == 0
