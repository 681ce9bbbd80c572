"""Allow-list parsing, the job body, the collector RoleBinding (pure; no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetune_trial_controller import building, kinds
from kubetune_trial_controller.kinds import JobKind

TRIAL: dict[str, Any] = {
    "metadata": {
        "name": "exp-abc",
        "namespace": "ns",
        "uid": "u-1",
        "labels": {"katib.kubeflow.org/experiment": "exp"},
    },
    "spec": {
        "runSpec": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "other", "labels": {"mine": "yes"}, "resourceVersion": "9"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
        }
    },
}


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ("Job.v1.batch", JobKind("Job", "v1", "batch")),
        (
            "TrainJob.v1alpha1.trainer.kubeflow.org",
            JobKind("TrainJob", "v1alpha1", "trainer.kubeflow.org"),
        ),
        ("Pod.v1", JobKind("Pod", "v1", "")),
    ],
)
def test_parse_entry(entry: str, kind: JobKind) -> None:
    assert kinds.parse_entry(entry) == kind
    assert str(kind) == entry


@pytest.mark.parametrize("entry", ["Job", "Job.", ".v1.batch"])
def test_bad_entries(entry: str) -> None:
    with pytest.raises(kinds.KindError, match=r"Kind\.version\.group"):
        kinds.parse_entry(entry)


def test_flag_splits_on_commas_and_spaces() -> None:
    assert kinds.split_flag("Job.v1.batch, TFJob.v1.kubeflow.org  X.v1") == [
        "Job.v1.batch",
        "TFJob.v1.kubeflow.org",
        "X.v1",
    ]


@pytest.mark.parametrize(
    ("run_spec", "problem"),
    [(None, "empty"), ({"kind": "Job"}, "apiVersion"), ({"apiVersion": "v1"}, "kind")],
)
def test_run_spec_kind_errors(run_spec: Any, problem: str) -> None:
    with pytest.raises(kinds.KindError, match=problem):
        kinds.of_run_spec(run_spec)


def test_job_for_names_labels_and_owns() -> None:
    job = building.job_for(TRIAL)
    meta = job["metadata"]
    assert (meta["name"], meta["namespace"]) == ("exp-abc", "ns")
    assert "resourceVersion" not in meta
    assert meta["labels"] == {
        "mine": "yes",
        "katib.kubeflow.org/experiment": "exp",
        "katib.kubeflow.org/trial": "exp-abc",
    }
    assert meta["ownerReferences"] == [building.owner_reference(TRIAL)]
    assert meta["ownerReferences"][0]["controller"] is True
    assert building.is_owned_by(job, TRIAL)
    assert TRIAL["spec"]["runSpec"]["metadata"]["name"] == "other"  # not modified in place


@pytest.mark.parametrize(
    ("run_spec", "accounts"),
    [
        ({"spec": {"template": {"spec": {"containers": []}}}}, ["default"]),
        ({"spec": {"template": {"spec": {"containers": [], "serviceAccountName": "t"}}}}, ["t"]),
        (
            {
                "spec": {
                    "tfReplicaSpecs": {
                        "Chief": {
                            "template": {"spec": {"containers": [], "serviceAccountName": "a"}}
                        },
                        "Worker": {"template": {"spec": {"containers": []}}},
                    }
                }
            },
            ["a", "default"],
        ),
        ({"spec": {"serviceAccountName": "argo", "templates": [{"container": {}}]}}, ["argo"]),
        ({"spec": {}}, ["default"]),
    ],
    ids=["job-default", "job-named", "tfjob-mixed", "argo-workflow", "no-pods"],
)
def test_service_accounts(run_spec: dict[str, Any], accounts: list[str]) -> None:
    assert building.service_accounts(run_spec) == accounts


def test_binding_only_grows() -> None:
    binding = building.collector_binding("ns", ["default"])
    assert binding["roleRef"]["name"] == "kubetune-pns-collector"
    assert building.missing_subjects(binding, "ns", ["default"]) == []
    assert building.missing_subjects(binding, "ns", ["default", "x"]) == [
        {"kind": "ServiceAccount", "name": "x", "namespace": "ns"}
    ]


def _trial_with(run_spec: dict[str, Any]) -> dict[str, Any]:
    return {**TRIAL, "spec": {"runSpec": run_spec}}


def _template(labels: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "c"}]}}
    if labels is not None:
        template["metadata"] = {"labels": labels}
    return template


TRIAL_LABEL = {"katib.kubeflow.org/trial": "exp-abc"}


def test_every_pod_template_gets_the_trial_label() -> None:
    """The pod webhook's objectSelector needs it: an unlabelled trial pod gets no collector."""
    job = building.job_for(TRIAL)
    assert job["spec"]["template"]["metadata"]["labels"] == TRIAL_LABEL
    tfjob = building.job_for(
        _trial_with(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "spec": {
                    "tfReplicaSpecs": {
                        "PS": {"template": _template({"role": "ps"})},
                        "Worker": {"template": _template()},
                    }
                },
            }
        )
    )
    replicas = tfjob["spec"]["tfReplicaSpecs"]
    assert replicas["PS"]["template"]["metadata"]["labels"] == {"role": "ps", **TRIAL_LABEL}
    assert replicas["Worker"]["template"]["metadata"]["labels"] == TRIAL_LABEL
    jobset = building.job_for(
        _trial_with(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": _template()}}}
                    ]
                },
            }
        )
    )
    (replicated,) = jobset["spec"]["replicatedJobs"]
    assert replicated["template"]["spec"]["template"]["metadata"]["labels"] == TRIAL_LABEL
    assert "metadata" not in replicated["template"]  # a Job template is not a pod template


def test_argo_workflow_pods_get_the_label_through_pod_metadata() -> None:
    workflow = building.job_for(
        _trial_with(
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Workflow",
                "spec": {
                    "podMetadata": {"labels": {"team": "a"}},
                    "templates": [{"name": "main", "container": {"image": "x"}}],
                },
            }
        )
    )
    assert workflow["spec"]["podMetadata"]["labels"] == {"team": "a", **TRIAL_LABEL}
    (template,) = workflow["spec"]["templates"]
    assert template["metadata"]["labels"] == TRIAL_LABEL
    assert workflow["metadata"]["labels"]["katib.kubeflow.org/trial"] == "exp-abc"


def test_labelling_does_not_touch_the_trials_run_spec() -> None:
    trial = _trial_with(
        {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": _template()}}
    )
    building.job_for(trial)
    assert "metadata" not in trial["spec"]["runSpec"]["spec"]["template"]


def test_binding_is_owned_by_the_experiment_else_the_trial() -> None:
    experiment_ref = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "name": "e",
        "uid": "u-e",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    owned = {"metadata": {"name": "t", "uid": "u-t", "ownerReferences": [experiment_ref]}}
    owner = building.binding_owner(owned)
    # Never a controller nor blocking: many Experiments own one binding.
    assert owner == {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "name": "e",
        "uid": "u-e",
    }
    standalone = building.binding_owner({"metadata": {"name": "t", "uid": "u-t"}})
    assert (standalone["kind"], standalone["uid"]) == ("Trial", "u-t")
    binding = building.collector_binding("ns", ["default"], owner)
    assert binding["metadata"]["ownerReferences"] == [owner]
    assert not building.missing_owner(binding, owner)
    assert building.missing_owner(binding, standalone)
