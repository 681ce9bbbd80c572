"""`/mutate-pod` decisions: which pods are a Trial's, and that no other pod is ever refused.

The owner answers come from `StaticCluster` (pure rules); the same decisions against a real
API server, as the webhook's real ServiceAccount, are in test_integration_pod_safety.py.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pytest
from webhook_cases import NS, TRIAL_LABEL, StaticCluster, job, pod, review, trial

from kubetune import config as katib_config
from kubetune import errors, naming
from kubetune_webhook import injecting, reviewing, validating

CONFIG = katib_config.default()


def _owned() -> StaticCluster:
    return StaticCluster(
        objects={("Job", NS, "random-abc"): job(), ("Trial", NS, "random-abc"): trial()}
    )


def _admit(cluster: Any, obj: dict[str, Any]) -> dict[str, Any]:
    status, answer = reviewing.Admission(CONFIG, cluster).handle(
        "/mutate-pod", json.dumps(review(obj, "Pod")).encode()
    )
    assert status == 200
    response: dict[str, Any] = answer["response"]
    return response


def _unlabelled() -> dict[str, Any]:
    return pod(labels={"job-name": "random-abc"})


@dataclass
class Refusing:
    """Owners whose every lookup fails as the API server would for a kind it may not read."""

    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str | None = None
    ) -> dict[str, Any] | None:
        raise validating.ClusterError(f'403 Forbidden: cannot get resource "{kind.lower()}s"')

    def __getattr__(self, name: str) -> Any:
        return getattr(StaticCluster(), name)


@dataclass
class Validating:
    """Owners that refuse what `kubetune.kube` refuses: names that are no object's."""

    inner: StaticCluster

    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str | None = None
    ) -> dict[str, Any] | None:
        from kubetune import kube

        kube.object_name(name)
        return self.inner.get_object(api_version, kind, name, namespace, uid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_unlabelled_pod_is_admitted_unchanged_whatever_the_lookups_do() -> None:
    assert _admit(Refusing(), _unlabelled()) == {"uid": "u-1", "allowed": True}
    assert _admit(StaticCluster(error=RuntimeError("boom")), _unlabelled()) == {
        "uid": "u-1",
        "allowed": True,
    }


def test_unlabelled_pod_of_a_trial_is_still_injected() -> None:
    """A configuration without the objectSelector keeps upstream's behaviour for trial pods."""
    response = _admit(_owned(), _unlabelled())
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert any(op["path"] == "/metadata/labels/katib.kubeflow.org~1trial" for op in patch)


def test_labelled_pod_whose_owners_cannot_be_read_is_retried_not_run_bare() -> None:
    response = _admit(Refusing(), pod())
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert "cannot be read to confirm it belongs to that Trial" in response["status"]["message"]
    assert "remove it" in response["status"]["message"]


def test_labelled_pod_of_its_trial_is_injected() -> None:
    response = _admit(_owned(), pod())
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"


def test_labelled_pod_of_another_trial_is_refused() -> None:
    response = _admit(_owned(), pod(labels={TRIAL_LABEL: "random-xyz"}))
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert response["status"]["message"] == (
        "metadata.labels[katib.kubeflow.org/trial]: 'random-xyz' is reserved for the pods of "
        "Trial random-xyz, but it belongs to Trial random-abc; remove the label from this pod "
        "(or its template)"
    )


@pytest.mark.parametrize(
    "owner", ["../../victim/trials/t-secret", "../../../../../api/v1/namespaces/x/secrets/y"]
)
def test_an_owner_name_that_is_no_object_name_is_a_dead_end(owner: str) -> None:
    forged = pod()
    forged["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": owner, "uid": "trial-uid"}
    ]
    # Even an Owners that would answer for that name is never asked with it.
    inner = StaticCluster(objects={("Trial", NS, owner): trial()})
    cluster = Validating(inner)
    assert injecting.find_trial(forged, NS, cluster) is None
    response = _admit(cluster, forged)
    assert response["allowed"] is False
    assert "but no Trial owns it" in response["status"]["message"]
    unlabelled = json.loads(json.dumps(forged))
    del unlabelled["metadata"]["labels"][TRIAL_LABEL]
    assert _admit(cluster, unlabelled) == {"uid": "u-1", "allowed": True}


def test_an_owner_with_another_uid_is_not_the_owner() -> None:
    """A Trial of the same name that is not the one the reference names (recreated, forged)."""
    cluster = _owned()
    impostor = job()
    impostor["metadata"]["ownerReferences"][0]["uid"] = "other-uid"
    cluster.objects[("Job", NS, "random-abc")] = impostor
    assert injecting.find_trial(pod(), NS, cluster) is None
    moved = pod()
    moved["metadata"]["ownerReferences"][0]["uid"] = "not-the-job"
    assert injecting.find_trial(moved, NS, _owned()) is None


def test_strict_walk_raises_and_lenient_walk_does_not() -> None:
    with pytest.raises(validating.ClusterError):
        injecting.find_trial(pod(), NS, Refusing(), strict=True)
    assert injecting.find_trial(pod(), NS, Refusing(), strict=False) is None


def test_invalid_name_error_is_a_value_error() -> None:
    assert issubclass(errors.InvalidName, ValueError)


# --- PBT: the suggestion's volume at suggestion_trial_dir (issue 16) --------------------------


def _pbt_trial() -> dict[str, Any]:
    t = trial()
    t["metadata"]["labels"][injecting.PBT_GENERATION_LABEL] = "1"
    t["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "name": "random",
            "uid": "exp-uid",
            "controller": True,
        }
    ]
    return t


def _pbt_experiment() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": "random", "namespace": NS, "uid": "exp-uid"},
        "spec": {
            "algorithm": {
                "algorithmName": "pbt",
                "algorithmSettings": [
                    {"name": "suggestion_trial_dir", "value": "/var/log/katib/checkpoints/"},
                    {"name": "n_population", "value": "5"},
                    {"name": "truncation_threshold", "value": "0.2"},
                ],
            }
        },
    }


def test_pbt_trial_pod_gets_its_checkpoint_directory() -> None:
    cluster = StaticCluster(
        objects={
            ("Job", NS, "random-abc"): job(),
            ("Trial", NS, "random-abc"): _pbt_trial(),
            ("Experiment", NS, "random"): _pbt_experiment(),
        }
    )
    response = _admit(cluster, pod())
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    mutated = pod()
    from kubetune_webhook import patching

    mutated = patching.apply(mutated, patch)
    volume = next(v for v in mutated["spec"]["volumes"] if v["name"] == "suggestion-volume")
    assert volume == {
        "name": "suggestion-volume",
        "persistentVolumeClaim": {"claimName": "random-pbt"},
    }
    primary = next(c for c in mutated["spec"]["containers"] if c["name"] == "training-container")
    assert {
        "name": "suggestion-volume",
        "mountPath": "/var/log/katib/checkpoints/",
        "subPath": "random/random-abc",
    } in primary["volumeMounts"]
    sidecar = next(c for c in mutated["spec"]["containers"] if c["name"] != "training-container")
    assert all(m["name"] != "suggestion-volume" for m in sidecar.get("volumeMounts", []))


def _pbt_claim(suggestion: dict[str, Any]) -> str:
    cluster = StaticCluster(
        objects={
            ("Job", NS, "random-abc"): job(),
            ("Trial", NS, "random-abc"): _pbt_trial(),
            ("Experiment", NS, "random"): _pbt_experiment(),
            ("Suggestion", NS, "random"): suggestion,
        }
    )
    response = _admit(cluster, pod())
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    from kubetune_webhook import patching

    mutated = patching.apply(pod(), patch)
    volume = next(v for v in mutated["spec"]["volumes"] if v["name"] == "suggestion-volume")
    return str(volume["persistentVolumeClaim"]["claimName"])


def test_pbt_trial_mounts_the_claim_name_its_suggestion_records() -> None:
    """Another owner held `random-pbt`: the suggestion-controller made the claim under the
    Suggestion's fallback name and recorded it; the trial mounts that claim, not the other's."""
    uid = "sugg-uid"
    chosen = naming.owned_name("random-pbt", naming.NAME_LIMIT, NS, "random", uid)
    owner = {"kind": "Experiment", "name": "random", "uid": "exp-uid", "controller": True}
    meta = {
        "name": "random",
        "namespace": NS,
        "uid": uid,
        "ownerReferences": [owner],
        "annotations": {naming.NAME_ANNOTATIONS["PersistentVolumeClaim"]: chosen},
    }
    assert _pbt_claim({"metadata": meta}) == chosen
    # A Suggestion of that name the Experiment does not own, or an annotation naming anything
    # but the Suggestion's own fallback, is not followed.
    assert _pbt_claim({"metadata": {**meta, "ownerReferences": []}}) == "random-pbt"
    forged = {naming.NAME_ANNOTATIONS["PersistentVolumeClaim"]: "someone-elses-claim"}
    assert _pbt_claim({"metadata": {**meta, "annotations": forged}}) == "random-pbt"


def test_pbt_trial_without_its_experiment_is_refused_with_the_reason() -> None:
    cluster = StaticCluster(
        objects={("Job", NS, "random-abc"): job(), ("Trial", NS, "random-abc"): _pbt_trial()}
    )
    response = _admit(cluster, pod())
    assert response["allowed"] is False
    assert "no Experiment owns it" in response["status"]["message"]


def test_other_trials_need_no_experiment_lookup() -> None:
    response = _admit(_owned(), pod())  # _owned has no Experiment object
    assert response["allowed"] is True


def test_pbt_trial_of_another_experiment_with_that_name_is_refused() -> None:
    """An Experiment of the same name but another uid is not the Trial's: no volume of it."""
    experiment = _pbt_experiment()
    experiment["metadata"]["uid"] = "another-uid"
    cluster = StaticCluster(
        objects={
            ("Job", NS, "random-abc"): job(),
            ("Trial", NS, "random-abc"): _pbt_trial(),
            ("Experiment", NS, "random"): experiment,
        }
    )
    response = _admit(cluster, pod())
    assert response["allowed"] is False
    assert "no Experiment owns it" in response["status"]["message"]


def _katib_mutated_pod() -> dict[str, Any]:
    """A trial pod as Katib v0.19.0's webhook leaves it: the command wrapped, its sidecar
    (its collector's Go flags, `-s-db` naming Katib's db-manager) added."""
    return pod(
        {
            "name": "training-container",
            "image": "python:3.12",
            "command": ["sh", "-c"],
            "args": ["python3 train.py --lr=0.1 1>/var/log/katib/metrics.log 2>&1"],
        },
        {
            "name": "metrics-logger-and-collector",
            "image": "ghcr.io/kubeflow/katib/file-metrics-collector:v0.19.0",
            "args": [
                "-t",
                "random-abc",
                "-m",
                "accuracy",
                "-o-type",
                "maximize",
                "-s-db",
                "katib-db-manager.kubeflow:6789",
                "-path",
                "/var/log/katib/metrics.log",
                "-format",
                "TEXT",
            ],
        },
    )


def test_a_pod_katibs_webhook_injected_is_admitted_unchanged_with_a_warning() -> None:
    response = _admit(_owned(), _katib_mutated_pod())
    assert response["allowed"] is True
    assert "patch" not in response  # no second wrapper, no second sidecar
    (warning,) = response["warnings"]
    assert "already carries Katib's metrics collector" in warning
    assert "MutatingWebhookConfiguration katib.kubeflow.org" in warning


def test_a_trial_pod_is_admitted_unchanged_while_katibs_webhook_is_installed() -> None:
    admission = reviewing.Admission(CONFIG, _owned(), katib_webhook_present=lambda: True)
    status, answer = admission.handle("/mutate-pod", json.dumps(review(pod(), "Pod")).encode())
    response = answer["response"]
    assert status == 200 and response["allowed"] is True
    assert "patch" not in response  # Katib's webhook injects: never a second collector
    (warning,) = response["warnings"]
    assert "Katib's webhook configurations (katib.kubeflow.org) are installed" in warning
