"""Against a real API server: the pod webhook is safe in a shared, labelled namespace.

Here the webhook runs as a ServiceAccount bound to the ClusterRole of kustomize/base/webhook
(not as the cluster admin), so it can read exactly what it may in production: no ReplicaSets,
StatefulSets or CronJobs. Pods are pinned to a node that does not exist: they are admitted and
stored, never run.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import oci_registry
import pytest
import yaml
from webhook_cases import undefaulted_experiment as _experiment

from kubetune import naming
from kubetune.kube import (
    DEPLOYMENTS,
    EXPERIMENTS,
    JOBS,
    PODS,
    SERVICE_ACCOUNTS,
    TRIALS,
    Kube,
    Resource,
)
from kubetune_testkit.accounts import service_account_token, token_kubeconfig
from kubetune_testkit.builders import objective, trial
from kubetune_testkit.crds import install_kubetune_crds
from kubetune_testkit.kubectl import apply as _apply
from kubetune_testkit.paths import BASE
from kubetune_testkit.waiting import wait_for
from kubetune_testkit.webhook import Webhook, clean_env, configurations, serving, wait_effective
from kubetune_testkit.webhook import registered as registered_configurations
from kubetune_webhook import injecting
from kubetune_webhook.lookups import SECRETS

pytestmark = pytest.mark.integration

STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
CRONJOBS = Resource("batch", "v1", "cronjobs", "CronJob")
NOWHERE = {"kubetune.test/node": "none"}
"""A nodeSelector no node has: the pods are stored but never run."""


@pytest.fixture(scope="module")
def webhook_account(
    cluster: Any, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A kubeconfig for a ServiceAccount with the webhook's real ClusterRole, and nothing else."""
    install_kubetune_crds(kube)
    suffix = uuid.uuid4().hex[:8]
    ns, role = f"webhook-sa-{suffix}", f"kubetune-webhook-test-{suffix}"
    cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("create", "serviceaccount", "kubetune-webhook", "-n", ns)
    objs = [o for o in yaml.safe_load_all((BASE / "webhook" / "rbac.yaml").read_text()) if o]
    for obj in objs:
        obj["metadata"] = {"name": role, "labels": {"kubetune.test/webhook": "true"}}
        if obj["kind"] == "ClusterRoleBinding":
            obj["roleRef"]["name"] = role
            obj["subjects"] = [
                {"kind": "ServiceAccount", "name": "kubetune-webhook", "namespace": ns}
            ]
    cluster.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    )
    try:
        token = service_account_token(cluster, "kubetune-webhook", ns, "2h")
        directory = tmp_path_factory.mktemp("webhook-sa")
        yield token_kubeconfig(cluster.kubeconfig, token, directory / "kubeconfig")
    finally:
        for kind in ("clusterrolebinding", "clusterrole"):
            cluster.kubectl("delete", kind, role, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def webhook(webhook_account: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    """`webhook serve` with its default options, as the webhook ServiceAccount."""
    with serving(webhook_account, tmp_path_factory.mktemp("webhook"), env=clean_env()) as running:
        yield running


@contextlib.contextmanager
def _registered(
    cluster: Any, kube: Kube, webhook: Webhook, namespace: str, *, label: bool, selector: bool
) -> Iterator[str]:
    """The webhook registered for `namespace` only; `selector=False` drops the pod webhook's
    objectSelector (a configuration where every pod of the namespace reaches the webhook)."""
    if label:
        cluster.kubectl(
            "label", "namespace", namespace, f"{naming.LABEL_INJECTION}={naming.INJECTION_ENABLED}"
        )
    name = f"kubetune-webhook-test-{uuid.uuid4().hex[:8]}"
    configs = configurations(webhook, namespace, name)
    if not selector:
        for _, body in configs:
            for hook in body["webhooks"]:
                hook.pop("objectSelector", None)
    with registered_configurations(kube, configs):
        wait_effective(cluster, namespace)
        yield namespace


def _pod_template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "nodeSelector": NOWHERE,
            "containers": [{"name": "main", "image": "python:3.12", "command": ["sleep", "1"]}],
        },
    }


def _pods(kube: Kube, ns: str, selector: str) -> list[dict[str, Any]]:
    return list(kube.list(PODS, ns, label_selector=selector).get("items") or [])


@pytest.mark.parametrize("selector", [True, False], ids=["as-shipped", "without-objectSelector"])
def test_other_workloads_get_their_pods_unchanged(
    cluster: Any, kube: Kube, webhook: Webhook, namespace: str, selector: bool
) -> None:
    """Deployment (-> ReplicaSet), StatefulSet and a CronJob's Job: owners the webhook may not
    read. Their pods must be admitted, and unchanged, whatever the configuration."""
    with _registered(cluster, kube, webhook, namespace, label=True, selector=selector) as ns:
        kube.create(
            DEPLOYMENTS,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": _pod_template("web"),
                },
            },
            ns,
        )
        kube.create(
            STATEFULSETS,
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db"},
                "spec": {
                    "replicas": 1,
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": _pod_template("db"),
                },
            },
            ns,
        )
        job_spec = {"backoffLimit": 0, "template": _pod_template("cron")}
        job_spec["template"]["spec"]["restartPolicy"] = "Never"
        cron = kube.create(
            CRONJOBS,
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "nightly"},
                "spec": {
                    "schedule": "0 3 * * *",
                    "suspend": True,
                    "jobTemplate": {"spec": job_spec},
                },
            },
            ns,
        )
        # What `kubectl create job --from=cronjob/nightly` makes: a Job the CronJob owns.
        kube.create(
            JOBS,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "nightly-manual",
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "CronJob",
                            "name": "nightly",
                            "uid": cron["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": copy.deepcopy(job_spec),
            },
            ns,
        )
        for app in ("web", "db", "cron"):
            (created,) = wait_for(f"the {app} pod", lambda app=app: _pods(kube, ns, f"app={app}"))
            assert [c["name"] for c in created["spec"]["containers"]] == ["main"]
            assert created["spec"]["containers"][0]["command"] == ["sleep", "1"]
            assert naming.LABEL_TRIAL not in created["metadata"]["labels"]
            assert "shareProcessNamespace" not in created["spec"]
        assert "Traceback" not in webhook.log.read_text()


@pytest.fixture
def victim(cluster: Any, kube: Kube) -> Iterator[dict[str, Any]]:
    """Trial t-secret in another namespace, one not labelled for injection."""
    ns = f"victim-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", ns)  # not labelled for injection
    try:
        loss = objective("loss", "minimize")
        body = trial("t-secret", experiment="secret", objective_spec=loss, primary_container="main")
        yield kube.create(TRIALS, body, ns)
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _forged_pod(
    victim: dict[str, Any], owner_name: str, labels: dict[str, str], namespace: str
) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "forged",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1beta1",
                    "kind": "Trial",
                    "name": owner_name,
                    "uid": victim["metadata"]["uid"],
                }
            ],
        },
        "spec": _pod_template("forged")["spec"],
    }
    pod["metadata"]["labels"]["app"] = "forged"
    return pod


TRAVERSALS = [
    "../../{victim}/trials/t-secret",
    "../../../../../api/v1/namespaces/kube-system/secrets/foo",
    "t-secret/../../../{victim}/trials/t-secret",
]


@pytest.mark.parametrize("template", TRAVERSALS, ids=["other-namespace", "secret", "nested"])
def test_owner_name_cannot_reach_another_namespace_when_labelled(
    cluster: Any,
    kube: Kube,
    webhook: Webhook,
    namespace: str,
    victim: dict[str, Any],
    template: str,
) -> None:
    """A pod that claims a Trial through a path in its owner name is refused, cleanly."""
    owner = template.format(victim=victim["metadata"]["namespace"])
    with _registered(cluster, kube, webhook, namespace, label=True, selector=True) as ns:
        pod = _forged_pod(victim, owner, {naming.LABEL_TRIAL: "t-secret"}, ns)
        result = _apply(cluster, pod)
        assert result.returncode != 0, "a pod no Trial owns was admitted with the trial label"
        assert "is reserved for the pods of Trial t-secret, but no Trial owns it" in result.stderr
        assert "forbidden" not in result.stderr.lower() and "403" not in result.stderr
        assert kube.get_or_none(PODS, "forged", ns) is None


@pytest.mark.parametrize("selector", [True, False], ids=["as-shipped", "without-objectSelector"])
def test_owner_name_cannot_reach_another_namespace_unlabelled(
    cluster: Any,
    kube: Kube,
    webhook: Webhook,
    namespace: str,
    victim: dict[str, Any],
    selector: bool,
) -> None:
    """Without the label the pod is admitted, and unchanged: no other namespace's Trial."""
    owner = f"../../{victim['metadata']['namespace']}/trials/t-secret"
    with _registered(cluster, kube, webhook, namespace, label=True, selector=selector) as ns:
        # The object as admitted (the garbage collector soon deletes a pod whose owner is
        # missing, so it is not read back afterwards).
        result = cluster.kubectl(
            "create",
            "-n",
            ns,
            "-o",
            "json",
            "-f",
            "-",
            check=False,
            stdin=json.dumps(_forged_pod(victim, owner, {}, ns)),
        )
        assert result.returncode == 0, result.stderr
        stored = json.loads(result.stdout)
        assert naming.LABEL_TRIAL not in stored["metadata"]["labels"]
        (container,) = stored["spec"]["containers"]
        assert not any(e.get("name") == "KATIB_TRIAL_NAME" for e in container.get("env") or [])


def test_experiment_in_an_unlabelled_namespace_is_accepted_with_a_warning(
    cluster: Any, kube: Kube, webhook: Webhook, namespace: str
) -> None:
    with _registered(cluster, kube, webhook, namespace, label=False, selector=True) as ns:
        result = _apply(cluster, _experiment("unlabelled", ns))
        assert result.returncode == 0, result.stderr
        assert "Warning: no metrics will be collected for this Experiment" in result.stderr
        assert (
            f"kubectl label namespace {ns} katib.kubeflow.org/metrics-collector-injection=enabled"
            in result.stderr
        )
        assert kube.get_or_none(EXPERIMENTS, "unlabelled", ns) is not None
        # In a labelled namespace: no warning.
        cluster.kubectl(
            "label", "namespace", ns, f"{naming.LABEL_INJECTION}={naming.INJECTION_ENABLED}"
        )
        result = _apply(cluster, _experiment("labelled", ns))
        assert result.returncode == 0, result.stderr
        assert "Warning" not in result.stderr


def test_experiment_that_could_never_start_a_trial_is_refused(
    cluster: Any, kube: Kube, webhook: Webhook, namespace: str
) -> None:
    """A primary container that is not in the template: every trial pod would be refused, so
    refuse the Experiment. One without `command` is admitted: the pod webhook reads its
    image's ENTRYPOINT and CMD (katib-config init.controller.imageCommandLookup, on)."""
    with _registered(cluster, kube, webhook, namespace, label=True, selector=True) as ns:
        wrong = _experiment("wrong-primary", ns)
        wrong["spec"]["trialTemplate"]["primaryContainerName"] = "trainer"
        result = _apply(cluster, wrong)
        assert result.returncode != 0
        assert (
            "spec.trialTemplate.primaryContainerName: 'trainer' is not a container of the trial "
            "template (its containers: training-container)" in result.stderr
        )
        assert kube.get_or_none(EXPERIMENTS, "wrong-primary", ns) is None
        no_command = _experiment("no-command", ns)
        template = no_command["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]
        (container,) = template["spec"]["containers"]
        container["args"] = container.pop("command")[2:]
        result = _apply(cluster, no_command)
        assert result.returncode == 0, result.stderr
        assert kube.get_or_none(EXPERIMENTS, "no-command", ns) is not None


@pytest.fixture(scope="module")
def private_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[oci_registry.Registry]:
    directory = tmp_path_factory.mktemp("private-registry")
    with oci_registry.serving(directory, {"puller": "pull-pw"}) as registry:
        yield registry


def _pull_secret(registry: oci_registry.Registry, name: str) -> dict[str, Any]:
    auth = base64.b64encode(b"puller:pull-pw").decode()
    config = json.dumps({"auths": {registry.host: {"auth": auth}}}).encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(config).decode()},
    }


def test_a_trial_pod_without_command_gets_its_private_images_command_wrapped(
    cluster: Any,
    kube: Kube,
    webhook: Webhook,
    namespace: str,
    private_registry: oci_registry.Registry,
) -> None:
    """As the webhook's real ServiceAccount: it reads the trial pod's ServiceAccount and the
    pull secret that one names, then the image's config from the registry."""
    oci_registry.push_image(
        private_registry, "team/trainer", "v1", entrypoint=["python3", "/app/train.py"]
    )
    image = f"{private_registry.host}/team/trainer:v1"
    with _registered(cluster, kube, webhook, namespace, label=True, selector=True) as ns:
        kube.create(SECRETS, _pull_secret(private_registry, "regcred"), ns)
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer"}}
        kube.create(SERVICE_ACCOUNTS, {**account, "imagePullSecrets": [{"name": "regcred"}]}, ns)
        loss = objective("loss", "minimize")
        body = trial("t-image", experiment="image", objective_spec=loss, primary_container="main")
        owner = kube.create(TRIALS, body, ns)
        kube.create(
            JOBS,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "t-image",
                    "ownerReferences": [
                        {
                            "apiVersion": "kubeflow.org/v1beta1",
                            "kind": "Trial",
                            "name": "t-image",
                            "uid": owner["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"labels": {naming.LABEL_TRIAL: "t-image"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "nodeSelector": NOWHERE,
                            "serviceAccountName": "trainer",
                            "containers": [{"name": "main", "image": image, "args": ["--lr=0.1"]}],
                        },
                    },
                },
            },
            ns,
        )
        created = wait_for(
            "the job controller to create the trial pod",
            lambda: next(iter(_pods(kube, ns, "job-name=t-image")), None),
        )
        main = next(c for c in created["spec"]["containers"] if c["name"] == "main")
        assert main["command"] == injecting.wrapped_command(
            ["python3", "/app/train.py", "--lr=0.1"], "StdOut"
        )
        assert "args" not in main
