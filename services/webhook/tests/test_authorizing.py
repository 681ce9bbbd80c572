"""Who may write a Trial's status: the rules, over a stand-in for the pod/owner reads (pure).

The same rules run against the real API server in test_trial_status.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetune import metrichistory as mh
from kubetune import observations as obs
from kubetune.admission import TRANSIENT
from kubetune_webhook import authorizing, reviewing
from kubetune_webhook.authorizing import POD_NAME, POD_UID

NS = "team"
TRUSTED = authorizing.trusted_users(authorizing.DEFAULT_TRUSTED, "kubeflow")


def _ref(kind: str, name: str, uid: str, api_version: str = "batch/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}


class Objects:
    """Pods and jobs by name; `fail` makes every read raise, as an unreachable server would."""

    def __init__(self, *objs: dict[str, Any], fail: bool = False) -> None:
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        self.fail = fail
        self.reads: list[str] = []

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(f"Pod {name}")
        if self.fail:
            raise authorizing.CannotCheck("connection refused")
        return self.objs.get(("Pod", name))

    def owner(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str = ""
    ) -> dict[str, Any] | None:
        self.reads.append(f"{kind} {name}")
        return self.objs.get((kind, name))


def _trial(name: str, uid: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {"name": name, "uid": uid},
        "spec": {"runSpec": {"apiVersion": "batch/v1", "kind": "Job"}},
        "status": status or {},
    }


def _cluster() -> Objects:
    """Trial a (uid ta) runs job a with pod a-pod; Trial b (uid tb) the same."""
    objs = []
    for t in ("a", "b"):
        objs.append(_trial(t, f"t{t}"))
        objs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": t,
                    "uid": f"j{t}",
                    "ownerReferences": [_ref("Trial", t, f"t{t}", "kubeflow.org/v1beta1")],
                },
            }
        )
        objs.append(
            {
                "kind": "Pod",
                "metadata": {
                    "name": f"{t}-pod",
                    "uid": f"p{t}",
                    "ownerReferences": [_ref("Job", t, f"j{t}")],
                },
            }
        )
    return Objects(*objs)


def _request(
    user: str = f"system:serviceaccount:{NS}:default",
    pod: tuple[str, str] | None = ("a-pod", "pa"),
    new_status: dict[str, Any] | None = None,
    old_status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    info: dict[str, Any] = {"username": user}
    if pod is not None:
        info["extra"] = {POD_NAME: [pod[0]], POD_UID: [pod[1]]}
    return {
        "uid": "r1",
        "kind": {"group": "kubeflow.org", "version": "v1beta1", "kind": "Trial"},
        "subResource": "status",
        "operation": "UPDATE",
        "namespace": NS,
        "name": "a",
        "userInfo": info,
        "object": _trial("a", "ta", new_status or {"observation": {"metrics": []}}),
        "oldObject": _trial("a", "ta", old_status),
    }


def test_own_pod_writes_its_observation() -> None:
    assert authorizing.authorize(_request(), TRUSTED, _cluster()).allowed


def test_own_pod_writes_its_metric_history() -> None:
    """The collector reports the bounded metric history with the observation (issue 15)."""
    history = {"metrics": [{"name": "loss", "reports": 1, "steps": [0], "values": ["0.5"]}]}
    request = _request(new_status={"observation": {"metrics": []}, "metricHistory": history})
    assert authorizing.authorize(request, TRUSTED, _cluster()).allowed


def test_token_without_a_pod_is_refused() -> None:
    verdict = authorizing.authorize(_request(pod=None), TRUSTED, _cluster())
    assert not verdict.allowed and verdict.code == 403
    assert "service account default may write the status of Trial a only from" in verdict.message
    assert "names no pod" in verdict.message


def test_pod_of_another_trial_is_refused() -> None:
    verdict = authorizing.authorize(_request(pod=("b-pod", "pb")), TRUSTED, _cluster())
    assert not verdict.allowed
    assert verdict.message == "pod b-pod of Trial b may not write the status of Trial a"


@pytest.mark.parametrize(
    ("pod", "says"),
    [
        (("a-pod", "not-its-uid"), "no longer exists"),
        (("gone", "pg"), "no longer exists"),
        (("../../x", "pg"), "no longer exists"),
    ],
)
def test_pod_that_is_not_there_is_refused(pod: tuple[str, str], says: str) -> None:
    verdict = authorizing.authorize(_request(pod=pod), TRUSTED, _cluster())
    assert not verdict.allowed and says in verdict.message


def test_recreated_job_does_not_pass_for_the_old_one() -> None:
    cluster = _cluster()
    cluster.objs[("Job", "a")]["metadata"]["uid"] = "another"
    verdict = authorizing.authorize(_request(), TRUSTED, cluster)
    assert not verdict.allowed
    assert "pod a-pod belongs to no Trial" in verdict.message


def _forge(cluster: Objects, *refs: dict[str, Any]) -> Objects:
    cluster.objs[("Pod", "a-pod")]["metadata"]["ownerReferences"] = list(refs)
    return cluster


@pytest.mark.parametrize(
    "forged",
    [
        pytest.param(
            lambda c: _forge(c, _ref("Trial", "a", "ta", "kubeflow.org/v1beta1")), id="trial"
        ),
        pytest.param(
            lambda c: _forge(c, {**_ref("Job", "a", "ja"), "controller": False}), id="job-ref"
        ),
        pytest.param(
            lambda c: _forge(
                c, {**_ref("Job", "a", "ja"), "controller": False}, _ref("Job", "b", "jb")
            ),
            id="other-job-controls",
        ),
        pytest.param(
            lambda c: (
                c.objs[("Trial", "a")]["spec"].update(
                    runSpec={"apiVersion": "batch/v1", "kind": "CronJob"}
                )
                or c
            ),
            id="not-the-runspec-kind",
        ),
        pytest.param(
            lambda c: c.objs[("Job", "a")]["metadata"].update(name="a-copy") or c,
            id="not-the-trial-name",
        ),
    ],
)
def test_only_the_controller_chain_to_the_trials_job_counts(forged: Any) -> None:
    """Owner references are the pod creator's words; only controllers the trial-controller's
    job leads to count (item 3)."""
    verdict = authorizing.authorize(_request(), TRUSTED, forged(_cluster()))
    assert not verdict.allowed
    assert "may not write the status of Trial a" in verdict.message


def test_pod_may_not_touch_the_controllers_fields() -> None:
    succeeded = {"type": "Succeeded", "status": "True"}
    verdict = authorizing.authorize(
        _request(new_status={"conditions": [succeeded], "completionTime": "now"}),
        TRUSTED,
        _cluster(),
    )
    assert not verdict.allowed
    assert verdict.message.endswith(
        "it changed status.completionTime, status.conditions (other than EarlyStopped)"
    )
    early = {"type": "EarlyStopped", "status": "True"}
    running = {"type": "Running", "status": "True"}
    allowed = authorizing.authorize(
        _request(new_status={"conditions": [running, early]}, old_status={"conditions": [running]}),
        TRUSTED,
        _cluster(),
    )
    assert allowed.allowed


def _observed(**metric: Any) -> dict[str, Any]:
    return {"observation": {"metrics": [{"name": "loss", **metric}]}}


def _history(values: list[str], name: str = "loss") -> dict[str, Any]:
    steps = list(range(len(values)))
    times = ["2026-12-01T00:00:00Z"] * len(values)
    metric = {"name": name, "reports": len(values), "steps": steps, "values": values}
    return {"metricHistory": {"metrics": [{**metric, "times": times}]}}


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (_observed(latest="1" * 400_000), f"more than {obs.MAX_VALUE_CHARS}"),
        (_observed(min="1" * 129, latest="1"), "status.observation.metrics[0].min"),
        (_observed(max="1_0"), "is not a number"),
        (_observed(min="\uff11"), "is not a number"),
        (_observed(latest="x" * 5000), f"more than {obs.MAX_TEXT_CHARS}"),
        (
            {"observation": {"metrics": [{"name": "n" * 300, "latest": "1"}]}},
            f"more than {obs.MAX_NAME_CHARS}",
        ),
        (
            {"observation": {"metrics": [{"name": f"m{i}"} for i in range(obs.MAX_METRICS + 1)]}},
            f"more than {obs.MAX_METRICS}",
        ),
        (_history(["0.5"] * 200_000), f"metrichistory.MAX_BYTES {mh.MAX_BYTES}"),
        (_history(["0.5", "1" * 200]), "status.metricHistory.metrics[0].values"),
        (_history(["0.5"], name="n" * 300), f"more than {obs.MAX_NAME_CHARS}"),
        ({"observation": {"metrics": "loss"}}, "status.observation.metrics must be a list"),
    ],
)
def test_pod_writes_bounded_metrics_only(status: dict[str, Any], says: str) -> None:
    """Training code holds the pod's token: megabytes in its own Trial are refused (issue 16)."""
    verdict = authorizing.authorize(_request(new_status=status), TRUSTED, _cluster())
    assert not verdict.allowed and verdict.code == 403
    assert says in verdict.message
    assert len(verdict.message) < 1000


def test_bounded_metrics_pass_and_old_ones_are_not_rechecked() -> None:
    written = {**_observed(min="0.25", max="1e3", latest="unavailable"), **_history(["0.5"] * 100)}
    assert authorizing.authorize(_request(new_status=written), TRUSTED, _cluster()).allowed
    # An observation stored before the bound does not block the EarlyStopped condition.
    stored = _observed(latest="1" * 400)
    early = {**stored, "conditions": [{"type": "EarlyStopped", "status": "True"}]}
    request = _request(new_status=early, old_status=stored)
    assert authorizing.authorize(request, TRUSTED, _cluster()).allowed


@pytest.mark.parametrize(
    ("conditions", "says"),
    [
        ([{"type": "EarlyStopped", "status": "True", "message": "x" * 1_000_000}], "2048"),
        ([{"type": "EarlyStopped", "status": "True"}] * 2, "write one"),
    ],
)
def test_the_early_stopped_condition_carries_no_data(
    conditions: list[dict[str, Any]], says: str
) -> None:
    """The one condition a pod may write is bounded like its metrics (a 1 MB message was let
    through: the condition was checked for its type only)."""
    verdict = authorizing.authorize(
        _request(new_status={"conditions": conditions}), TRUSTED, _cluster()
    )
    assert not verdict.allowed and verdict.code == 403
    assert says in verdict.message and len(verdict.message) < 1000
    plain = [{"type": "EarlyStopped", "status": "True", "reason": "TrialEarlyStopped"}]
    assert authorizing.authorize(
        _request(new_status={"conditions": plain}), TRUSTED, _cluster()
    ).allowed


@pytest.mark.parametrize(
    "user",
    [
        "system:serviceaccount:kubeflow:kubetune-trial-controller",
        "system:serviceaccount:kubeflow:kubetune-experiment-controller",
        "system:serviceaccount:other:default",  # not of the Trial's namespace: RBAC decides
        "alice@example.com",
    ],
)
def test_others_are_left_to_rbac(user: str) -> None:
    cluster = Objects(fail=True)
    assert authorizing.authorize(_request(user=user, pod=None), TRUSTED, cluster).allowed
    assert cluster.reads == []


def test_kubetune_in_the_trial_namespace_is_trusted() -> None:
    trusted = authorizing.trusted_users(["kubetune-trial-controller", "system:x:y"], NS)
    assert trusted == {f"system:serviceaccount:{NS}:kubetune-trial-controller", "system:x:y"}
    request = _request(user=f"system:serviceaccount:{NS}:kubetune-trial-controller", pod=None)
    assert authorizing.authorize(request, trusted, Objects(fail=True)).allowed


def test_failed_lookup_is_a_retryable_denial() -> None:
    verdict = authorizing.authorize(_request(), TRUSTED, Objects(fail=True))
    assert not verdict.allowed and verdict.code == 500
    assert "cannot check that pod a-pod belongs to Trial a" in verdict.message


def test_endpoint_answers_with_forbidden() -> None:
    admission = reviewing.Admission(
        config=None,  # type: ignore[arg-type]  # the endpoint reads no configuration
        cluster=None,  # type: ignore[arg-type]
        status_writers=reviewing.StatusWriters(TRUSTED, _cluster()),
    )
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": _request(pod=("b-pod", "pb")),
    }
    status, answer = admission.handle("/validate-trial-status", json.dumps(body).encode())
    assert status == 200
    response = answer["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["reason"] == "Forbidden"


def test_a_retryable_denial_says_so_in_its_message() -> None:
    """The API server puts the message, not the code, into a refused pod's Event: the
    trial-controller tells "cannot check now" from a denial by the marker."""
    admission = reviewing.Admission(
        config=None,  # type: ignore[arg-type]  # the endpoint reads no configuration
        cluster=None,  # type: ignore[arg-type]
        status_writers=reviewing.StatusWriters(TRUSTED, Objects(fail=True)),
    )
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": _request()}
    _, answer = admission.handle("/validate-trial-status", json.dumps(body).encode())
    status = answer["response"]["status"]
    assert status["code"] == 500 and status["message"].endswith(TRANSIENT)
    forbidden = reviewing.respond("u", allowed=False, code=403, message="no")
    assert TRANSIENT not in forbidden["response"]["status"]["message"]
