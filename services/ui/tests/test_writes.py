"""Writes through the UI against the real API server: as the proxy's user (impersonation).

The UI runs with admin credentials here (allowed to impersonate any user and group, more than
its ServiceAccount may); what a user may do is decided by the API server with the user's RBAC,
and whom the UI believes and passes on is decided by the UI: only a request with the proxy's
secret names a user, and never a `system:` one.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from conftest import Proxy, grant, post

from kubetune.kube import EXPERIMENTS, Kube
from kubetune_testkit import builders
from kubetune_testkit.processes import console_script
from kubetune_testkit.uipaths import object_path
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


def test_create_is_made_as_the_proxys_user_and_refused_without_one(
    kube: Kube, namespace: str, start_ui: Callable[..., str], proxy: Proxy
) -> None:
    url = start_ui("--writes=impersonate", proxy.flag) + "/api/experiments"
    form = {
        "yaml": yaml.safe_dump(builders.experiment("by-alice", namespace)),
        "namespace": namespace,
    }
    ui = {"X-Kubetune-UI": "1", "X-Kubetune-Proxy-Secret": proxy.secret}

    status, answer = post(url, form, ui)
    assert status == 401 and "X-Forwarded-User" in answer["message"], answer

    status, answer = post(url, form, {**ui, "X-Kubetune-UI": "0", "X-Forwarded-User": "alice"})
    assert status == 403 and "X-Kubetune-UI" in answer["message"], answer  # CSRF

    status, answer = post(url, form, {**ui, "X-Forwarded-User": "alice"})
    assert status == 403, answer
    assert 'User "alice" cannot create resource "experiments"' in answer["message"], answer
    assert kube.get_or_none(EXPERIMENTS, "by-alice", namespace) is None

    grant(kube, namespace, "User", "alice")
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


def test_allowed_groups_from_the_proxy_are_impersonated_too(
    kube: Kube, namespace: str, start_ui: Callable[..., str], proxy: Proxy
) -> None:
    url = start_ui("--writes=impersonate", proxy.flag, "--impersonate-groups=tuners")
    url += "/api/experiments"
    grant(kube, namespace, "Group", "tuners")
    form = {
        "yaml": yaml.safe_dump(builders.experiment("by-team", namespace)),
        "namespace": namespace,
    }
    headers = proxy.headers("carol")
    status, answer = post(url, form, headers)
    assert status == 403, answer
    # "readers" is not in --impersonate-groups: dropped, not sent (the API server would refuse
    # to impersonate it under a ClusterRole naming only "tuners").
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
    kube: Kube, namespace: str, start_ui: Callable[..., str], proxy: Proxy
) -> None:
    kube.create(EXPERIMENTS, builders.experiment("doomed", namespace), namespace)
    url = start_ui("--writes=impersonate", proxy.flag)
    url += object_path("/api/experiments", namespace, "doomed")

    def delete(user: str) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(url, method="DELETE", headers=proxy.headers(user))
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    status, answer = delete("mallory")
    assert status == 403 and 'User "mallory" cannot delete' in answer["message"], answer
    assert kube.get_or_none(EXPERIMENTS, "doomed", namespace) is not None
    grant(kube, namespace, "User", "dana", "delete")
    wait_for("dana's delete", lambda: delete("dana")[0] == 200, interval=0.5)
    wait_for(
        "the experiment gone", lambda: kube.get_or_none(EXPERIMENTS, "doomed", namespace) is None
    )


def test_user_headers_without_the_proxys_proof_write_nothing(
    kube: Kube, namespace: str, start_ui: Callable[..., str], proxy: Proxy
) -> None:
    """The reproduced attack: a client that skipped the proxy names eve in system:masters and
    creates an Experiment in kube-system. The secret comes by the environment here, as in the
    kustomize component."""
    url = start_ui("--writes=impersonate", env={"KUBETUNE_UI_PROXY_SECRET_FILE": str(proxy.file)})
    url += "/api/experiments"
    form = {"yaml": yaml.safe_dump(builders.experiment("by-eve", "kube-system"))}
    forged = {"X-Kubetune-UI": "1", "X-Forwarded-User": "eve",
              "X-Forwarded-Groups": "system:masters"}  # fmt: skip
    for proof in ({}, {"X-Kubetune-Proxy-Secret": "guess"}, {"X-Kubetune-Proxy-Secret": ""}):
        status, answer = post(url, form, {**forged, **proof})
        assert status == 401, answer
        assert "X-Kubetune-Proxy-Secret" in answer["message"], answer
        assert "--proxy-secret-file" in answer["message"], answer
    assert kube.get_or_none(EXPERIMENTS, "by-eve", "kube-system") is None


SYSTEM_NAMES = [
    ("eve", "system:masters", 403, "group 'system:masters'"),
    ("eve", "tuners,System:Masters", 403, "group 'System:Masters'"),
    ("system:admin", "", 403, "user 'system:admin'"),
    ("system:serviceaccount:kube-system:default", "", 403, "user 'system:serviceaccount"),
    ("eve", ",".join(f"g{i}" for i in range(65)), 400, "65 groups, more than 64"),
    ("e" * 300, "", 400, "300 characters, more than 256"),
]


def test_system_users_and_groups_are_never_impersonated(
    kube: Kube, start_ui: Callable[..., str], proxy: Proxy
) -> None:
    """Even with the proxy's proof (a proxy that passes a group claim from the IdP as is)."""
    url = start_ui("--writes=impersonate", proxy.flag, "--impersonate-groups=tuners")
    form = {"yaml": yaml.safe_dump(builders.experiment("by-system", "kube-system"))}
    answers = []
    for user, groups, _, _ in SYSTEM_NAMES:
        headers = proxy.headers(user, **{"X-Forwarded-Groups": groups})
        status, answer = post(url + "/api/experiments", form, headers)
        answers.append((status, answer["message"]))
    for (status, message), (_, _, expected, named) in zip(answers, SYSTEM_NAMES, strict=True):
        assert status == expected and named in message, (status, message)
    assert kube.get_or_none(EXPERIMENTS, "by-system", "kube-system") is None


def test_kubeflow_userid_with_its_prefix_names_the_user(
    namespace: str, start_ui: Callable[..., str], proxy: Proxy
) -> None:
    """Kubeflow's convention: `kubeflow-userid: accounts.google.com:alice@example.com`."""
    url = start_ui(
        "--writes=impersonate", proxy.flag, "--user-header=kubeflow-userid",
        "--user-prefix=accounts.google.com:", "--groups-header=",
    ) + "/api/experiments"  # fmt: skip
    form = {"yaml": yaml.safe_dump(builders.experiment("kf", namespace)), "namespace": namespace}
    # X-Forwarded-Groups is not read (--groups-header=): no refusal for system:masters.
    headers = {"X-Kubetune-UI": "1", "X-Kubetune-Proxy-Secret": proxy.secret,
               "X-Forwarded-Groups": "system:masters"}  # fmt: skip
    status, answer = post(url, form, {**headers, "kubeflow-userid": "accounts.google.com:al@x.io"})
    assert status == 403, answer
    assert 'User "al@x.io" cannot create resource "experiments"' in answer["message"], answer
    status, answer = post(url, form, {**headers, "kubeflow-userid": "al@x.io"})
    assert status == 401 and "--user-prefix" in answer["message"], answer


def test_impersonation_without_a_proxy_secret_does_not_start(cluster: Any, crds: None) -> None:
    """Refusing to start, rather than running read-only: the operator learns at once."""
    run = subprocess.run(
        [console_script("kubetune-ui"), f"--kubeconfig={cluster.kubeconfig}", "--port=0",
         "--writes=impersonate"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run
    assert "--writes=impersonate needs --proxy-secret-file" in run.stderr, run.stderr
