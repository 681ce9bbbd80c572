"""Derived names stay valid at and past the DNS-1123 limits, and stay stable."""

from __future__ import annotations

import re

import pytest

from kubetune import naming

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def test_short_names_are_upstream_concatenations() -> None:
    assert naming.suggestion_deployment_name("exp", "tpe") == "exp-tpe"
    assert naming.suggestion_service_name("exp", "tpe") == "exp-tpe"
    assert naming.suggestion_pvc_name("exp", "tpe") == "exp-tpe"
    assert naming.suggestion_pv_name("exp", "tpe", "team-a") == "exp-tpe-team-a"
    assert (
        naming.suggestion_pv_host_path("exp-tpe-team-a") == "/tmp/katib/suggestions/exp-tpe-team-a"
    )


@pytest.mark.parametrize("length", [62, 63, 64, 100, 253])
def test_label_limited_names(length: int) -> None:
    experiment = "e" * (length - len("-bayesianoptimization"))
    name = naming.suggestion_deployment_name(experiment, "bayesianoptimization")
    assert len(name) <= 63
    assert DNS1123_LABEL.match(name)
    if length <= 63:
        assert name == f"{experiment}-bayesianoptimization"
    else:
        assert len(name) == 63


@pytest.mark.parametrize("length", [252, 253, 254, 400])
def test_subdomain_limited_names(length: int) -> None:
    namespace = "n" * 40
    experiment = "x" * (length - len(f"-tpe-{namespace}"))
    name = naming.suggestion_pv_name(experiment, "tpe", namespace)
    assert len(name) == min(length, 253)
    assert DNS1123_SUBDOMAIN.match(name)


def test_shortening_is_stable_and_distinguishes_shared_prefixes() -> None:
    a = naming.suggestion_deployment_name("a" * 70 + "-one", "tpe")
    b = naming.suggestion_deployment_name("a" * 70 + "-two", "tpe")
    assert a != b
    assert a == naming.suggestion_deployment_name("a" * 70 + "-one", "tpe")


def test_cut_never_leaves_a_trailing_dash() -> None:
    # A dash exactly at the cut must not end up next to the hash separator.
    name = naming.shorten("a" * 53 + "-" + "b" * 20, 63)
    assert "--" not in name and len(name) <= 63 and DNS1123_LABEL.match(name)


def test_trial_names_are_deterministic_and_label_safe() -> None:
    first = naming.trial_name("random", "0")
    assert first == naming.trial_name("random", "0")
    assert first != naming.trial_name("random", "1")
    assert re.fullmatch(r"random-[bcdfghjklmnpqrstvwxz2456789]{8}", first)
    long = naming.trial_name("r" * 63, "0")
    assert len(long) == 63 and DNS1123_LABEL.match(long)


def test_trial_names_do_not_collide_over_many_keys() -> None:
    names = {naming.trial_name("exp", str(i)) for i in range(20000)}
    assert len(names) == 20000


@pytest.mark.parametrize(
    ("value", "expected_ok"),
    [("plain", True), ("with space/and:colon", True), ("-leading", True), ("x" * 80, True)],
)
def test_label_values_are_valid(value: str, expected_ok: bool) -> None:
    result = naming.label_value(value)
    assert (
        len(result) <= 63
        and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", result) is not None
    ) is expected_ok


def test_labels() -> None:
    assert naming.trial_labels("exp", "exp-abc") == {
        "katib.kubeflow.org/experiment": "exp",
        "katib.kubeflow.org/trial": "exp-abc",
    }
    assert naming.suggestion_labels("e", "e", "e-tpe")["katib.kubeflow.org/deployment"] == "e-tpe"


def test_owned_name_is_stable_per_suggestion_and_fits() -> None:
    """The fallback when another owner holds Katib's name: the same for the same Suggestion
    (a restart finds its object), another for another uid, and within the limit."""
    a = naming.owned_name("e1-multivariate-tpe", naming.LABEL_LIMIT, "team", "e1", "u-1")
    assert a == naming.owned_name("e1-multivariate-tpe", naming.LABEL_LIMIT, "team", "e1", "u-1")
    assert a.startswith("e1-multivariate-tpe-") and a != "e1-multivariate-tpe"
    assert a != naming.owned_name("e1-multivariate-tpe", naming.LABEL_LIMIT, "team", "e1", "u-2")
    long = naming.owned_name("x" * 63, naming.LABEL_LIMIT, "team", "x", "u-1")
    assert len(long) == naming.LABEL_LIMIT


def test_recorded_name_follows_only_the_suggestions_own_fallback() -> None:
    key = naming.NAME_ANNOTATIONS["PersistentVolumeClaim"]
    meta: dict[str, object] = {"name": "e1", "namespace": "team", "uid": "u-1"}
    own = naming.owned_name("e1-pbt", naming.NAME_LIMIT, "team", "e1", "u-1")
    recorded = naming.recorded_name
    assert recorded("e1-pbt", naming.NAME_LIMIT, "PersistentVolumeClaim", meta) == "e1-pbt"
    meta["annotations"] = {key: own}
    assert recorded("e1-pbt", naming.NAME_LIMIT, "PersistentVolumeClaim", meta) == own
    meta["annotations"] = {key: "another-tenants-claim"}
    assert recorded("e1-pbt", naming.NAME_LIMIT, "PersistentVolumeClaim", meta) == "e1-pbt"
