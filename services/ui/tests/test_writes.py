"""Writes through the UI against the real API server: as the proxy's user (impersonation).

The UI runs with admin credentials here (allowed to impersonate, like its ServiceAccount in
the kustomize base); what a user may do is decided by the API server with the user's RBAC.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from kubetune.kube import EXPERIMENTS, ROLE_BINDINGS, ROLES, Kube
from kubetune_testkit import builders
from kubetune_testkit.uipaths import object_path
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


def post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def grant_experiments(kube: Kube, namespace: str, user: str) -> None:
    """A Role for creating Experiments in `namespace`, bound to `user` only."""
    rules = [{"apiGroups": ["kubeflow.org"], "resources": ["experiments"], "verbs": ["create"]}]
    kube.create(ROLES, {"metadata": {"name": "exp-writer"}, "rules": rules}, namespace)
    binding = {
        "metadata": {"name": "exp-writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "exp-writer"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    kube.create(ROLE_BINDINGS, binding, namespace)


def test_create_is_made_as_the_proxys_user_and_refused_without_one(
    kube: Kube, namespace: str, start_ui: Callable[..., str]
) -> None:
    url = start_ui("--writes=impersonate") + "/api/experiments"
    form = {
        "yaml": yaml.safe_dump(builders.experiment("by-alice", namespace)),
        "namespace": namespace,
    }
    ui = {"X-Kubetune-UI": "1"}

    status, answer = post(url, form, ui)
    assert status == 401 and "X-Forwarded-User" in answer["message"], answer

    status, answer = post(url, form, {"X-Forwarded-User": "alice"})  # no X-Kubetune-UI: CSRF
    assert status == 403 and "X-Kubetune-UI" in answer["message"], answer

    status, answer = post(url, form, {**ui, "X-Forwarded-User": "alice"})
    assert status == 403, answer
    assert 'User "alice" cannot create resource "experiments"' in answer["message"], answer
    assert kube.get_or_none(EXPERIMENTS, "by-alice", namespace) is None

    grant_experiments(kube, namespace, "alice")
    wait_for(
        "alice's Role to apply",
        lambda: post(url, form, {**ui, "X-Forwarded-User": "alice"})[0] == 201,
        interval=0.5,
    )
    assert kube.get_or_none(EXPERIMENTS, "by-alice", namespace) is not None
    # Bob, another user, still may not.
    other = {**form, "yaml": form["yaml"].replace("by-alice", "by-bob")}
    status, answer = post(url, other, {**ui, "X-Forwarded-User": "bob"})
    assert status == 403 and 'User "bob"' in answer["message"], answer


def test_groups_from_the_proxy_are_impersonated_too(
    kube: Kube, namespace: str, start_ui: Callable[..., str]
) -> None:
    url = start_ui("--writes=impersonate") + "/api/experiments"
    rules = [{"apiGroups": ["kubeflow.org"], "resources": ["experiments"], "verbs": ["create"]}]
    kube.create(ROLES, {"metadata": {"name": "team"}, "rules": rules}, namespace)
    binding = {
        "metadata": {"name": "team"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "tuners"}],
    }
    kube.create(ROLE_BINDINGS, binding, namespace)
    form = {
        "yaml": yaml.safe_dump(builders.experiment("by-team", namespace)),
        "namespace": namespace,
    }
    headers = {"X-Kubetune-UI": "1", "X-Forwarded-User": "carol"}
    status, answer = post(url, form, headers)
    assert status == 403, answer
    headers["X-Forwarded-Groups"] = "readers, tuners"
    wait_for("the group's Role to apply", lambda: post(url, form, headers)[0] == 201, interval=0.5)


def test_read_only_ui_refuses_writes(namespace: str, start_ui: Callable[..., str]) -> None:
    url = start_ui("--writes=off") + "/api/experiments"
    form = {"yaml": yaml.safe_dump(builders.experiment("x", namespace)), "namespace": namespace}
    status, answer = post(url, form, {"X-Kubetune-UI": "1", "X-Forwarded-User": "alice"})
    assert status == 403 and "read-only" in answer["message"], answer


def test_restart_sets_max_trial_count_and_rejects_bad_counts(
    kube: Kube, namespace: str, start_ui: Callable[..., str]
) -> None:
    kube.create(EXPERIMENTS, builders.experiment("again", namespace, maxTrialCount=2), namespace)
    url = start_ui("--writes=own-credentials") + object_path(
        "/api/experiments", namespace, "again", "max-trials"
    )
    status, answer = post(url, {"maxTrialCount": "ten"}, {"X-Kubetune-UI": "1"})
    assert status == 400 and "maxTrialCount" in answer["message"], answer
    status, answer = post(url, {"maxTrialCount": 10}, {"X-Kubetune-UI": "1"})
    assert status == 200, answer
    assert kube.get(EXPERIMENTS, "again", namespace)["spec"]["maxTrialCount"] == 10


def test_delete_is_made_as_the_user(
    kube: Kube, namespace: str, start_ui: Callable[..., str]
) -> None:
    kube.create(EXPERIMENTS, builders.experiment("doomed", namespace), namespace)
    url = start_ui("--writes=impersonate") + object_path("/api/experiments", namespace, "doomed")

    def delete(user: str) -> tuple[int, dict[str, Any]]:
        headers = {"X-Kubetune-UI": "1", "X-Forwarded-User": user}
        request = urllib.request.Request(url, method="DELETE", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    status, answer = delete("mallory")
    assert status == 403 and 'User "mallory" cannot delete' in answer["message"], answer
    assert kube.get_or_none(EXPERIMENTS, "doomed", namespace) is not None
    rules = [{"apiGroups": ["kubeflow.org"], "resources": ["experiments"], "verbs": ["delete"]}]
    kube.create(ROLES, {"metadata": {"name": "deleter"}, "rules": rules}, namespace)
    binding = {
        "metadata": {"name": "deleter"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deleter"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dana"}],
    }
    kube.create(ROLE_BINDINGS, binding, namespace)
    wait_for("dana's delete", lambda: delete("dana")[0] == 200, interval=0.5)
    wait_for(
        "the experiment gone", lambda: kube.get_or_none(EXPERIMENTS, "doomed", namespace) is None
    )
