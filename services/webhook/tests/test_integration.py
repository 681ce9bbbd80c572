"""Against a real API server: the webhook registered through its real configurations.

The configurations are those of kustomize/base/webhook with two changes a test needs: the
clientConfig is `url: https://127.0.0.1:<port>/...` with the caBundle of a CA made by
`webhook certs`, and every webhook's namespaceSelector is narrowed to the test's namespace, so
other users of a shared cluster are never affected. Each test registers them under a unique
name and deletes them afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from webhook_cases import undefaulted_experiment

from kubetune import errors, naming
from kubetune.kube import (
    EXPERIMENTS,
    JOBS,
    PERSISTENT_VOLUMES,
    PODS,
    TRIALS,
    Kube,
)
from kubetune_testkit.builders import objective
from kubetune_testkit.builders import trial as build_trial
from kubetune_testkit.kubectl import apply as _apply
from kubetune_testkit.waiting import wait_for
from kubetune_testkit.webhook import Webhook, configurations, serving, wait_effective
from kubetune_testkit.webhook import registered as registered_configurations
from kubetune_webhook import injecting

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def webhook(
    cluster: Any, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """`webhook serve` as its own process on loopback, with certificates from `webhook certs`."""
    directory = tmp_path_factory.mktemp("webhook")
    env = {**os.environ, "KUBETUNE_WEBHOOK_REQUIRE_NAMESPACE_LABEL": "true"}
    with serving(cluster.kubeconfig, directory, "--log-level=debug", env=env) as running:
        yield running


@contextlib.contextmanager
def _registering(cluster: Any, kube: Kube, webhook: Webhook, namespace: str) -> Iterator[str]:
    cluster.kubectl(
        "label", "namespace", namespace, f"{naming.LABEL_INJECTION}={naming.INJECTION_ENABLED}"
    )
    name = f"kubetune-webhook-test-{uuid.uuid4().hex[:8]}"
    with registered_configurations(kube, configurations(webhook, namespace, name)):
        wait_effective(cluster, namespace)
        yield namespace


@pytest.fixture
def registered(cluster: Any, kube: Kube, webhook: Webhook, namespace: str) -> Iterator[str]:
    """The namespace, labelled for injection, with the webhook registered for it only."""
    with _registering(cluster, kube, webhook, namespace) as registered_namespace:
        yield registered_namespace


CAP = 1 << 30
"""Virtual memory of the capped webhook: serving needs a fraction of it; a check listing a grid
of 9e18 points dies of MemoryError there instead of eating the machine."""


@pytest.fixture(scope="module")
def capped_webhook(
    cluster: Any, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """`webhook serve` with at most CAP bytes of address space."""
    env = {
        **os.environ,
        "KUBETUNE_WEBHOOK_REQUIRE_NAMESPACE_LABEL": "true",
        "MALLOC_ARENA_MAX": "2",
    }
    directory = tmp_path_factory.mktemp("capped-webhook")
    with serving(cluster.kubeconfig, directory, env=env, address_space=CAP) as running:
        yield running


@pytest.fixture
def capped(cluster: Any, kube: Kube, capped_webhook: Webhook, namespace: str) -> Iterator[str]:
    """The namespace with the capped webhook registered for it only."""
    with _registering(cluster, kube, capped_webhook, namespace) as registered_namespace:
        yield registered_namespace


@pytest.mark.parametrize("high", ["9e18", "9000000000000000000"])
def test_grid_of_9e18_ints_is_refused_at_a_server_side_dry_run(
    cluster: Any, capped: str, high: str
) -> None:
    """The attack that made the webhook allocate 9.1 GB in 90 s, even for a dry run."""
    space = {"min": "0", "max": high}
    experiment = undefaulted_experiment(
        "grid",
        capped,
        algorithm="grid",
        parameters=[{"name": "lr", "parameterType": "int", "feasibleSpace": space}],
    )
    result = _apply(cluster, experiment, "--dry-run=server")
    assert result.returncode != 0
    assert "denied the request" in result.stderr, result.stderr
    assert (
        "spec.algorithm.algorithmSettings: parameter lr: the grid has about 9.0e18 "
        "points, more than the limit of 1000000 per parameter; set a larger feasibleSpace.step, "
        "narrow min..max, or use another algorithm (e.g. random)"
    ) in result.stderr


def test_invalid_experiment_is_refused_with_the_message(cluster: Any, registered: str) -> None:
    bad = undefaulted_experiment(
        "bad", registered, parallelTrialCount=9, algorithm={"algorithmName": "enas"}
    )
    result = _apply(cluster, bad)
    assert result.returncode != 0
    assert "denied the request" in result.stderr
    assert "spec.parallelTrialCount: 9 is greater than spec.maxTrialCount 4" in result.stderr
    assert "spec.nasConfig: required by algorithm enas" in result.stderr
    assert (
        cluster.kubectl("get", "experiment", "bad", "-n", registered, check=False).returncode != 0
    )


def test_katib_nas_example_is_admitted_and_a_bad_setting_refused_with_upstreams_message(
    cluster: Any, registered: str
) -> None:
    from kubetune_testkit.examples import examples

    doc = next(d for name, d in examples("Experiment") if name.startswith("katib-enas-cpu:"))
    doc["metadata"]["namespace"] = registered
    doc["spec"]["algorithm"]["algorithmSettings"] = [
        {"name": "controller_train_steps", "value": "0"}
    ]
    result = _apply(cluster, doc)
    assert result.returncode != 0
    assert (
        "spec.algorithm.algorithmSettings: Algorithm Setting controller_train_steps: 0 with int "
        "type must be in range [1, inf)" in result.stderr
    )
    del doc["spec"]["algorithm"]["algorithmSettings"]
    result = _apply(cluster, doc)
    assert result.returncode == 0, result.stderr


def test_valid_experiment_is_stored_with_its_defaults(
    cluster: Any, kube: Kube, registered: str
) -> None:
    result = _apply(cluster, undefaulted_experiment("good", registered))
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
    changed = undefaulted_experiment("good", registered, algorithm={"algorithmName": "grid"})
    result = _apply(cluster, changed)
    assert result.returncode != 0
    assert "spec.algorithm cannot change after creation" in result.stderr


def test_trial_pod_arrives_with_sidecar_wrapped_command_and_annotation(
    cluster: Any, kube: Kube, registered: str
) -> None:
    ns = registered
    trial_name = "good-trial-1"
    loss = objective("loss", "minimize")
    trial = kube.create(TRIALS, build_trial(trial_name, experiment="good", objective_spec=loss), ns)
    code = "import os; print('loss=0.25', os.environ['KATIB_TRIAL_NAME'])"
    user_argv = ["python3", "-c", shlex.quote(code)]  # one shell line, as Katib runs it
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

    created = wait_for("the job controller to create the trial pod", pod)
    meta, spec = created["metadata"], created["spec"]
    assert meta["annotations"][naming.ISTIO_INJECT] == "false"
    assert meta["labels"][naming.LABEL_TRIAL] == trial_name
    assert meta["labels"][naming.LABEL_EXPERIMENT] == "good"
    assert spec["shareProcessNamespace"] is True
    names = [c["name"] for c in spec["containers"]]
    assert names == ["training-container", injecting.SIDECAR_NAME]
    training, sidecar = spec["containers"]
    assert training["command"] == injecting.wrapped_command(user_argv, "StdOut")
    assert injecting.trial_name_env(trial_name) in training["env"]
    assert injecting.trial_name_env(trial_name)["valueFrom"], "a downward-API reference"
    args = sidecar["args"]
    assert args[:4] == ["--trial-name", trial_name, "--namespace", ns]
    assert args[args.index("--expected-processes") + 1] == "1"
    assert {"name": "metrics-volume", "emptyDir": {}} in spec["volumes"]


def test_second_from_volume_experiment_is_refused_while_its_pv_exists(
    cluster: Any, kube: Kube, registered: str
) -> None:
    ns = registered
    name = "resume"
    first = undefaulted_experiment(name, ns, resumePolicy="FromVolume")
    assert _apply(cluster, first).returncode == 0
    pv = naming.suggestion_pv_name(naming.suggestion_name(name), "random", ns)
    # The suggestion-controller's PV, left behind when the first experiment goes.
    kube.create(PERSISTENT_VOLUMES, _suggestion_pv(pv, f"{ns}/{naming.suggestion_name(name)}"))
    try:
        kube.delete(EXPERIMENTS, name, ns)
        # Another engineer's controller on a shared cluster may hold a finalizer: drop it.
        with contextlib.suppress(errors.NotFound):
            kube.patch(EXPERIMENTS, name, {"metadata": {"finalizers": None}}, ns)
        wait_for(
            "the first experiment to go", lambda: kube.get_or_none(EXPERIMENTS, name, ns) is None
        )
        result = _apply(cluster, first)
        assert result.returncode != 0
        assert f"PV: {pv} is not deleted" in result.stderr
        assert f"kubectl delete pv {pv}" in result.stderr
        kube.delete(PERSISTENT_VOLUMES, pv)
        wait_for("the PV to go", lambda: kube.get_or_none(PERSISTENT_VOLUMES, pv) is None)
        result = _apply(cluster, first)
        assert result.returncode == 0, result.stderr
    finally:
        with contextlib.suppress(errors.NotFound):
            kube.delete(PERSISTENT_VOLUMES, pv)


def _suggestion_pv(name: str, owner: str) -> dict[str, Any]:
    """A PV as the suggestion-controller makes it for Suggestion `owner` (namespace/name)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "labels": {"kubetune.test/webhook": "true"},
            "annotations": {naming.ANNOTATION_SUGGESTION: owner},
        },
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/kubetune-webhook-test/{name}"},
        },
    }


def test_from_volume_experiment_is_not_told_to_delete_another_tenants_pv(
    cluster: Any, kube: Kube, registered: str
) -> None:
    """A PV under this Experiment's Katib PV name made for another tenant's Suggestion (the
    names collide across namespaces) is that tenant's: the Experiment is admitted (the
    suggestion-controller gives its PV another name) and that PV is never named to its author."""
    ns = registered
    name = "resume"
    pv = naming.suggestion_pv_name(naming.suggestion_name(name), "random", ns)
    kube.create(PERSISTENT_VOLUMES, _suggestion_pv(pv, f"tenant-b/{name}-random-x"))
    try:
        result = _apply(cluster, undefaulted_experiment(name, ns, resumePolicy="FromVolume"))
        assert result.returncode == 0, result.stderr
        assert pv not in result.stderr
    finally:
        with contextlib.suppress(errors.NotFound):
            kube.delete(PERSISTENT_VOLUMES, pv)


def _experiments_only_author(cluster: Any, namespace: str) -> tuple[str, str]:
    """A new user who may create, get and patch Experiments in `namespace` and nothing else;
    its name and its Role's (the tests grant it more under that name's prefix)."""
    user = f"author-{uuid.uuid4().hex[:6]}"
    role = f"experiments-only-{user}"
    cluster.kubectl(
        "create", "role", role, "-n", namespace,
        "--verb=create,get,patch", "--resource=experiments.kubeflow.org",
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", role, "-n", namespace, f"--role={role}", f"--user={user}"
    )
    return user, role


def test_an_author_without_the_rights_kubetune_would_use_is_refused(
    cluster: Any, registered: str
) -> None:
    """A user who may create Experiments but not Jobs cannot have kubetune create them."""
    user, role = _experiments_only_author(cluster, registered)
    manifest = undefaulted_experiment("deputy", registered)
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
    allowed = wait_for(
        "the author's new right to count",
        lambda: (r := _apply(cluster, manifest, f"--as={user}")).returncode == 0 and r,
        timeout=30,
    )
    assert allowed.returncode == 0


def test_a_trial_kind_not_installed_is_admitted_with_a_warning_and_its_right_checked(
    cluster: Any, registered: str
) -> None:
    """Discovery of the real API server says the kind is not served: admitted as Katib admits
    it (CRDs and Experiments may come in one `kubectl apply`), never a 500 asking to retry; the
    author's right to create it is checked on the resource name Kubernetes guesses."""
    group = f"g{uuid.uuid4().hex[:6]}.kubetune.test"
    manifest = undefaulted_experiment("widget", registered)
    template = manifest["spec"]["trialTemplate"]
    template["trialSpec"].update(apiVersion=f"{group}/v1", kind="Widget")
    template["successCondition"] = "status.done == true"
    template["failureCondition"] = "status.failed == true"
    user, _ = _experiments_only_author(cluster, registered)
    refused = _apply(cluster, manifest, f"--as={user}")
    assert refused.returncode != 0
    assert f"{user} may not create widgets.{group} in namespace {registered}" in refused.stderr
    assert f"kind Widget of apiVersion {group}/v1 is not installed" in refused.stderr
    assert "retry" not in refused.stderr

    admitted = _apply(cluster, manifest)
    assert admitted.returncode == 0, admitted.stderr
    assert f"kind Widget of apiVersion {group}/v1 is not installed in the cluster" in (
        admitted.stderr
    )
    assert "JobKindNotInstalled" in admitted.stderr
