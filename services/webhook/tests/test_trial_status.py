"""Against a real API server: who may write a Trial's status (issue 13, defect 3).

The namespace's `default` service account holds the collector RoleBinding (get/patch on
`trials/status` of every Trial there, as the trial-controller grants it). The webhook entries of
kustomize/base/webhook that cover `trials/status` are registered, pointed at a `webhook serve`
process and scoped to the test's namespace. Tokens are real: `kubectl create token`, plain (it
names no pod) or bound to a pod (what a pod's projected token is). The pods never run: a
scheduling gate keeps them Pending; they only need to exist with their owners.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from kubetune import errors, metrichistory, observations
from kubetune.kube import (
    JOBS,
    PODS,
    SERVICE_ACCOUNTS,
    TRIALS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Kube,
)
from kubetune_testkit.accounts import bind_role, service_account_token
from kubetune_testkit.builders import objective, owner_reference, trial
from kubetune_testkit.paths import BASE
from kubetune_testkit.trialpods import bound_token, job_pod
from kubetune_testkit.waiting import wait_for
from kubetune_testkit.webhook import base_configuration, clean_env, point_at, registered, serving

pytestmark = pytest.mark.integration

FORGED = {"status": {"observation": {"metrics": [{"name": "loss", "latest": "-999"}]}}}


@pytest.fixture(scope="module")
def collector_role(cluster: Any, crds: None) -> None:
    """The collector's ClusterRole the namespace's RoleBinding refers to."""
    cluster.kubectl("apply", "-f", str(BASE / "trial-controller" / "collector-clusterrole.yaml"))


def _status_hooks() -> list[dict[str, Any]]:
    """The base's webhooks that see `trials/status` writes (none on a build without the check)."""
    cfg = base_configuration(VALIDATING_WEBHOOK_CONFIGURATIONS)
    return [
        hook
        for hook in cfg["webhooks"]
        if any("trials/status" in rule.get("resources", []) for rule in hook.get("rules", []))
    ]


@pytest.fixture
def home(namespace: str, kube: Kube, collector_role: None) -> str:
    """The namespace with the collector RoleBinding the trial-controller creates."""
    accounts = ("default", "kubetune-trial-controller")
    role = ("ClusterRole", "kubetune-pns-collector")
    bind_role(kube, namespace, "kubetune-pns-collector", role, accounts)
    return namespace


@pytest.fixture
def checked(cluster: Any, kube: Kube, home: str, tmp_path: Path) -> Iterator[str]:
    """`webhook serve` (kubetune runs in the test namespace) registered for `home` only."""
    name = f"kubetune-status-test-{uuid.uuid4().hex[:8]}"
    env = clean_env(POD_NAMESPACE=home)
    with serving(cluster.kubeconfig, tmp_path, env=env) as webhook:
        hooks = [point_at(hook, webhook, home) for hook in copy.deepcopy(_status_hooks())]
        for hook in hooks:
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": home}}
        configuration = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": hooks,
        }
        with registered(
            kube, [(VALIDATING_WEBHOOK_CONFIGURATIONS, configuration)] if hooks else []
        ):
            if hooks:
                _wait_until_checked(cluster, kube, home)
            yield home


def _wait_until_checked(cluster: Any, kube: Kube, ns: str) -> None:
    """The configuration reaches the admission plugin asynchronously: probe with a dry run."""
    probe = _trial(kube, ns, f"probe-{uuid.uuid4().hex[:6]}", "probe")
    forger = as_token(cluster, _token(cluster, ns))

    def refused() -> bool:
        try:
            forger._call(
                "PATCH",
                TRIALS.path(ns, probe["metadata"]["name"], "status"),
                query={"dryRun": "All"},
                body=FORGED,
                content_type="application/merge-patch+json",
            )
        except errors.Forbidden as e:
            return "names no pod" in str(e)
        return False

    wait_for("the trials/status webhook to take effect", refused)
    kube.delete(TRIALS, probe["metadata"]["name"], ns)


def _token(cluster: Any, ns: str, pod: dict[str, Any] | None = None, sa: str = "default") -> str:
    if pod is not None:
        return bound_token(Kube(cluster.api_client()), pod)
    return service_account_token(cluster, sa, ns, "10m")


def as_token(cluster: Any, token: str) -> Kube:
    """A client that authenticates with `token` only (no client certificate)."""
    cfg = client.Configuration()
    config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=cluster.kubeconfig, client_configuration=cfg
    )
    cfg.cert_file = None
    cfg.key_file = None
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return Kube(client.ApiClient(configuration=cfg))


def _trial(kube: Kube, ns: str, name: str, experiment: str) -> dict[str, Any]:
    loss = objective("loss", "minimize")
    body = trial(name, experiment=experiment, objective_spec=loss)
    created: dict[str, Any] = kube.create(TRIALS, body, ns)
    return created


def _pod(
    kube: Kube,
    ns: str,
    name: str,
    owner: dict[str, Any] | None,
    account: str = "default",
    controller: bool = False,
) -> dict[str, Any]:
    """A pod made by the test (never runs: scheduling gate), with a reference to `owner`."""
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner, controller=controller)]
        meta["labels"] = {"katib.kubeflow.org/trial": owner["metadata"]["name"]}
    pod: dict[str, Any] = kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "serviceAccountName": account,
                "schedulingGates": [{"name": "kubetune.test/never"}],
                "containers": [{"name": "training-container", "image": "python:3.12"}],
            },
        },
        ns,
    )
    return pod


def _trial_with_pod(kube: Kube, ns: str, name: str, experiment: str) -> tuple[Any, Any]:
    """A Trial, its Job and the pod the Job controller made (the chain of controller
    references the trial-controller's job gets)."""
    trial = _trial(kube, ns, name, experiment)
    return trial, job_pod(kube, ns, trial)


def _observation(kube: Kube, ns: str, name: str) -> Any:
    return (kube.get(TRIALS, name, ns).get("status") or {}).get("observation")


def test_a_token_that_names_no_pod_cannot_write_a_trial_status(
    cluster: Any, kube: Kube, checked: str
) -> None:
    ns = checked
    _trial_with_pod(kube, ns, "victim", "exp-a")
    forger = as_token(cluster, _token(cluster, ns))  # `kubectl create token default`
    with pytest.raises(errors.Forbidden) as refused:
        forger.patch(TRIALS, "victim", FORGED, ns, subresource="status")
    assert "may write the status of Trial victim only from that Trial's own pod" in str(
        refused.value
    )
    assert "names no pod" in str(refused.value)
    assert _observation(kube, ns, "victim") is None


def test_a_pod_of_another_experiment_cannot_write_a_trial_status(
    cluster: Any, kube: Kube, checked: str
) -> None:
    ns = checked
    _trial_with_pod(kube, ns, "victim", "exp-a")
    _, other_pod = _trial_with_pod(kube, ns, "other", "exp-b")
    forger = as_token(cluster, _token(cluster, ns, other_pod))
    with pytest.raises(errors.Forbidden) as refused:
        forger.patch(TRIALS, "victim", FORGED, ns, subresource="status")
    pod_name = other_pod["metadata"]["name"]
    assert f"pod {pod_name} of Trial other may not write the status of Trial victim" in str(
        refused.value
    )
    assert _observation(kube, ns, "victim") is None
    # A pod that belongs to no Trial is refused as well.
    loner = _pod(kube, ns, "loner", None)
    with pytest.raises(errors.Forbidden) as refused:
        as_token(cluster, _token(cluster, ns, loner)).patch(
            TRIALS, "victim", FORGED, ns, subresource="status"
        )
    assert "pod loner belongs to no Trial" in str(refused.value)


@pytest.mark.parametrize("forged", ["trial itself", "job, not as its controller"])
def test_a_pod_that_names_the_trial_in_its_owners_cannot_write_its_status(
    cluster: Any, kube: Kube, checked: str, forged: str
) -> None:
    """Owner references are written by a pod's creator and a Trial's uid is readable: only the
    chain of controller references to the Trial's own job counts."""
    ns = checked
    victim, _ = _trial_with_pod(kube, ns, "victim", "exp-a")
    if forged == "trial itself":
        pod = _pod(kube, ns, "forger", victim, controller=True)
    else:
        pod = _pod(kube, ns, "forger", kube.get(JOBS, "victim", ns), controller=False)
    with pytest.raises(errors.Forbidden) as refused:
        as_token(cluster, _token(cluster, ns, pod)).patch(
            TRIALS, "victim", FORGED, ns, subresource="status"
        )
    assert "pod forger belongs to no Trial" in str(refused.value)
    assert _observation(kube, ns, "victim") is None


def test_a_trial_pod_writes_its_own_observation_and_nothing_else(
    cluster: Any, kube: Kube, checked: str
) -> None:
    ns = checked
    _, pod = _trial_with_pod(kube, ns, "mine", "exp-a")
    collector = as_token(cluster, _token(cluster, ns, pod))
    observation = {"metrics": [{"name": "loss", "latest": "0.25", "min": "0.25", "max": "0.5"}]}
    collector.patch(
        TRIALS, "mine", {"status": {"observation": observation}}, ns, subresource="status"
    )
    assert _observation(kube, ns, "mine") == observation
    # Conditions are the trial-controller's (EarlyStopped excepted).
    succeeded = {
        "type": "Succeeded",
        "status": "True",
        "reason": "TrialSucceeded",
        "message": "forged",
    }
    with pytest.raises(errors.Forbidden) as refused:
        collector.patch(
            TRIALS, "mine", {"status": {"conditions": [succeeded]}}, ns, subresource="status"
        )
    assert "may change only status.observation and the EarlyStopped condition" in str(refused.value)
    early = {**succeeded, "type": "EarlyStopped", "reason": "TrialEarlyStopped"}
    collector.patch(TRIALS, "mine", {"status": {"conditions": [early]}}, ns, subresource="status")


def test_kubetune_and_people_are_not_checked(cluster: Any, kube: Kube, checked: str) -> None:
    """The trusted controllers (here: of the test namespace) and an admin write any status."""
    ns = checked
    _trial_with_pod(kube, ns, "any", "exp-a")
    kube.create(
        SERVICE_ACCOUNTS,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "kubetune-trial-controller"},
        },
        ns,
    )
    controller_pod = _pod(kube, ns, "trial-controller", None, "kubetune-trial-controller")
    controller = as_token(
        cluster, _token(cluster, ns, controller_pod, sa="kubetune-trial-controller")
    )
    wait_for(
        "the trusted service account's patch (its RoleBinding reaching the authorizer)",
        lambda: _patched(controller, ns, {"status": {"conditions": [_created()]}}),
    )
    kube.patch(TRIALS, "any", FORGED, ns, subresource="status")
    assert _observation(kube, ns, "any") == FORGED["status"]["observation"]


def _created() -> dict[str, Any]:
    return {"type": "Created", "status": "True", "reason": "TrialCreated", "message": "ok"}


def _patched(kube: Kube, ns: str, body: dict[str, Any]) -> bool:
    try:
        kube.patch(TRIALS, "any", body, ns, subresource="status")
    except errors.Forbidden as e:
        assert "webhook" not in str(e), e
        return False
    return True


def test_a_trial_pod_cannot_store_megabytes_in_its_own_trial(
    cluster: Any, kube: Kube, checked: str
) -> None:
    """Training code holds its pod's token: a 1 MB metric history or a 400 KB value is refused
    with the limit named (issue 16); a normal write passes."""
    ns = checked
    _, pod = _trial_with_pod(kube, ns, "mine", "exp-a")
    collector = as_token(cluster, _token(cluster, ns, pod))
    values = ["0.5"] * 30_000
    history = {
        "metrics": [
            {
                "name": "loss",
                "reports": len(values),
                "steps": list(range(len(values))),
                "values": values,
                "times": ["2026-12-01T00:00:00Z"] * len(values),
            }
        ]
    }
    assert metrichistory.serialized_size(history) > 1_000_000
    with pytest.raises(errors.Forbidden) as refused:
        collector.patch(
            TRIALS, "mine", {"status": {"metricHistory": history}}, ns, subresource="status"
        )
    assert f"metrichistory.MAX_BYTES {metrichistory.MAX_BYTES}" in str(refused.value)
    huge = {"metrics": [{"name": "loss", "latest": "1" * 400_000}]}
    with pytest.raises(errors.Forbidden) as refused:
        collector.patch(TRIALS, "mine", {"status": {"observation": huge}}, ns, subresource="status")
    assert f"more than {observations.MAX_VALUE_CHARS}" in str(refused.value)
    status = kube.get(TRIALS, "mine", ns).get("status") or {}
    assert "observation" not in status and "metricHistory" not in status
    observation = {"metrics": [{"name": "loss", "latest": "0.25", "min": "0.25", "max": "0.5"}]}
    normal = {
        "metrics": [
            {
                "name": "loss",
                "reports": 2,
                "steps": [0, 1],
                "values": ["0.5", "0.25"],
                "times": ["2026-12-01T00:00:00Z"] * 2,
            }
        ]
    }
    collector.patch(
        TRIALS,
        "mine",
        {"status": {"observation": observation, "metricHistory": normal}},
        ns,
        subresource="status",
    )
    assert _observation(kube, ns, "mine") == observation
