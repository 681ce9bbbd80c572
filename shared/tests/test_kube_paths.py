"""Every REST path kubetune builds: names are validated, never able to change the URL.

A name, namespace, group or version goes into a URL; `../` or `/` in one would make the request
hit another object (another namespace's Trial, a Secret). These raise `InvalidName` before any
request: the client below points at a port nothing listens on, so a request would fail with a
connection error instead.
"""

from __future__ import annotations

import re
from typing import Any

import kubernetes.client
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kubetune import errors, kube
from kubetune.kube import JOBS, NAMESPACES, PODS, TRIALS, Kube, Resource

BAD_NAMES = [
    "../../victim/trials/t-secret",
    "../../../../../api/v1/namespaces/kube-system/secrets/foo",
    "a/b",
    "..",
    ".",
    "a%2Fb",
    "a?watch=true",
    "a#b",
    "Upper",
    "with space",
    "",
    "a" * 254,
]


def _kube() -> Kube:
    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: a request would fail to connect
    return Kube(kubernetes.client.ApiClient(configuration))


def test_paths_of_valid_names() -> None:
    assert TRIALS.path("team-a", "exp-abc") == (
        "/apis/kubeflow.org/v1beta1/namespaces/team-a/trials/exp-abc"
    )
    assert TRIALS.path("team-a", "exp-abc", "status") == (
        "/apis/kubeflow.org/v1beta1/namespaces/team-a/trials/exp-abc/status"
    )
    assert PODS.path("team-a", "p.1", "log") == "/api/v1/namespaces/team-a/pods/p.1/log"
    assert JOBS.path("team-a") == "/apis/batch/v1/namespaces/team-a/jobs"
    assert NAMESPACES.path(None, "team-a") == "/api/v1/namespaces/team-a"
    assert JOBS.path() == "/apis/batch/v1/jobs"
    assert TRIALS.path("team-a", "a" * 253).endswith("/" + "a" * 253)


@pytest.mark.parametrize("name", [n for n in BAD_NAMES if n])  # "" is the collection
def test_resource_path_refuses_a_bad_name(name: str) -> None:
    with pytest.raises(errors.InvalidName, match=r"object name .* is not valid"):
        TRIALS.path("team-a", name)


@pytest.mark.parametrize("namespace", ["../kube-system", "a/b", "a.b", "A", "a" * 64, ".."])
def test_resource_path_refuses_a_bad_namespace(namespace: str) -> None:
    with pytest.raises(errors.InvalidName, match=r"namespace .* DNS-1123 label"):
        TRIALS.path(namespace, "t")


@pytest.mark.parametrize("sub", ["../secrets", "status/../..", "log?x=1", "Status"])
def test_resource_path_refuses_a_bad_subresource(sub: str) -> None:
    with pytest.raises(errors.InvalidName, match="subresource"):
        TRIALS.path("team-a", "t", sub)


@pytest.mark.parametrize(
    "resource",
    [
        Resource("../../api", "v1", "secrets", "Secret"),
        Resource("apps", "v1/../../api/v1", "pods", "Pod"),
        Resource("apps", "v1", "../secrets", "Secret"),
        Resource("apps", "v1", "deployments/x", "Deployment"),
    ],
    ids=["group", "version", "plural", "plural-slash"],
)
def test_resource_path_refuses_a_bad_resource(resource: Resource) -> None:
    with pytest.raises(errors.InvalidName):
        resource.path("team-a", "x")


@pytest.mark.parametrize(
    "call",
    [
        lambda k: k.get(TRIALS, "../../victim/trials/t-secret", "team-a"),
        lambda k: k.get_or_none(TRIALS, "a/b", "team-a"),
        lambda k: k.get(TRIALS, "t", "../victim"),
        lambda k: k.list(TRIALS, "../victim"),
        lambda k: k.create(TRIALS, {}, "../victim"),
        lambda k: k.replace(TRIALS, {"metadata": {"name": "../t"}}, "team-a"),
        lambda k: k.patch(TRIALS, "../t", {}, "team-a", subresource="status"),
        lambda k: k.delete(TRIALS, "../t", "team-a"),
        lambda k: next(k.watch(TRIALS, "../victim")),
        lambda k: k.pod_log("../../secrets/foo", "team-a"),
        lambda k: k.pod_log("p", "../kube-system"),
        lambda k: k.resource_for("../../api/v1/namespaces/kube-system/secrets/foo", "Secret"),
        lambda k: k.resource_for("apps/V1", "Deployment"),
    ],
    ids=[
        "get",
        "get_or_none",
        "get-namespace",
        "list",
        "create",
        "replace",
        "patch",
        "delete",
        "watch",
        "pod_log-name",
        "pod_log-namespace",
        "resource_for-group",
        "resource_for-version",
    ],
)
def test_every_call_refuses_before_any_request(call: Any) -> None:
    with pytest.raises(errors.InvalidName):
        call(_kube())


def test_validators_name_the_rule() -> None:
    assert kube.object_name("exp-abc.1") == "exp-abc.1"
    assert kube.namespace_name("team-a") == "team-a"
    assert kube.api_group("") == ""
    assert kube.api_group("kubeflow.org") == "kubeflow.org"
    assert kube.api_version_part("v1beta1") == "v1beta1"
    with pytest.raises(errors.InvalidName) as info:
        kube.object_name("../x")
    assert str(info.value) == (
        "object name '../x' is not valid: it must be a DNS-1123 subdomain (lowercase letters, "
        "digits, '-' and '.') of at most 253 characters; it was not sent to the API server"
    )
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("group", "version"),
    [("../../x", "v1"), ("apps", "../v1"), ("apps/v1/namespaces", "v1"), ("", "v1%2F..")],
)
def test_group_version_path_refuses_what_would_change_the_path(group: str, version: str) -> None:
    with pytest.raises(errors.InvalidName):
        kube.group_version_path(group, version)


def test_group_version_path_of_core_and_named_groups() -> None:
    assert kube.group_version_path("", "v1") == "/api/v1"
    assert kube.group_version_path("kubeflow.org", "v1beta1") == "/apis/kubeflow.org/v1beta1"


# The rules as the regexes they were: the hand-written checks must agree on every string.
_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBRESOURCE_RE = re.compile(r"[a-z]+(/[a-z]+)*")


@given(st.text(alphabet="az09-./A_%é\n ", max_size=8))
@example("a\n")
@example("a..b")
@example("-a")
@example("status/")
def test_name_checks_agree_with_the_dns_1123_regexes(value: str) -> None:
    assert kube._is_label(value) == bool(_LABEL_RE.fullmatch(value))
    assert kube._is_subdomain(value) == bool(_SUBDOMAIN_RE.fullmatch(value))
    assert kube._is_subresource(value) == bool(_SUBRESOURCE_RE.fullmatch(value))
