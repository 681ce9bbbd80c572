"""The hostPath cleanup Pod's shape, its node, its retries (pure: no cluster)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import yaml

from kubetune.config import SUGGESTION_IMAGE, KatibConfig, SuggestionConfig
from kubetune_suggestion_controller import cleaning
from kubetune_testkit.paths import BASE

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
PATH = "/var/lib/kubetune/pv/exp-tpe-team"


def _pv(*terms: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"hostPath": {"path": PATH}}
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": list(terms)}}
    return {"metadata": {"name": "exp-tpe-team"}, "spec": spec}


def _hostnames(*names: str) -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": list(names)}
        ]
    }


def _pod(target: cleaning.Target) -> dict[str, Any]:
    return cleaning.pod(
        "exp-tpe-team", target, 1, namespace="kubeflow", image="img", pull_policy=None
    )


def test_each_node_the_pv_affinity_names_gets_a_pinned_pod() -> None:
    targets = cleaning.targets(_pv(_hostnames("a", "b"), _hostnames("b")), PATH)
    assert [(t.parent, t.entry, t.node) for t in targets] == [
        ("/var/lib/kubetune/pv", "exp-tpe-team", "a"),
        ("/var/lib/kubetune/pv", "exp-tpe-team", "b"),
    ]
    pod = _pod(targets[0])
    assert pod["spec"]["nodeName"] == "a"
    assert "affinity" not in pod["spec"]
    names = [_pod(t)["metadata"]["name"] for t in targets]
    assert names == [cleaning.pod_name("exp-tpe-team", n, 1) for n in ("a", "b")]
    assert len(set(names)) == 2


def test_other_affinity_terms_go_to_the_scheduler_and_none_means_any_node() -> None:
    zone = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    (target,) = cleaning.targets(_pv(zone), PATH)
    spec = _pod(target)["spec"]
    assert "nodeName" not in spec
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {"nodeSelectorTerms": [zone]}
    (anywhere,) = cleaning.targets(_pv(), PATH + "/")
    assert anywhere == cleaning.Target("/var/lib/kubetune/pv", "exp-tpe-team", None)
    assert "affinity" not in _pod(anywhere)["spec"]


def test_the_pod_reaches_only_the_prefix_without_credentials() -> None:
    pod = _pod(cleaning.Target("/var/lib/kubetune/pv", "exp-tpe-team", "a"))
    spec = pod["spec"]
    assert spec["volumes"] == [
        {"name": "host-prefix", "hostPath": {"path": "/var/lib/kubetune/pv", "type": "Directory"}}
    ]
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == cleaning.DEADLINE_SECONDS
    (container,) = spec["containers"]
    assert container["args"] == [f"{cleaning.MOUNT}/exp-tpe-team"]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]}
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert container["resources"]["limits"] == {"cpu": "200m", "memory": "64Mi"}


def test_no_webhook_that_watches_pods_selects_the_cleanup_pod() -> None:
    """The pod webhook is for trial pods: its objectSelector must not match this one."""
    labels = _pod(cleaning.Target("/p", "d", "a"))["metadata"]["labels"]
    selecting = []
    for name in ("mutatingwebhookconfiguration.yaml", "validatingwebhookconfiguration.yaml"):
        document = yaml.safe_load((BASE / "webhook" / name).read_text())
        for hook in document["webhooks"]:
            if any("pods" in r["resources"] for r in hook["rules"]):
                selector = hook.get("objectSelector") or {}
                if _selects(selector, labels):
                    selecting.append(hook["name"])
    assert selecting == []


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector's verdict on `labels`."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        verdict = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not verdict:
            return False
    return True


def test_retries_back_off_and_a_pod_that_never_finishes_counts_as_failed() -> None:
    assert cleaning.attempt_of(None, NOW) == (1, NOW)
    assert cleaning.attempt_of({cleaning.ATTEMPT_ANNOTATION: "garbage"}, NOW) == (1, NOW)
    value = cleaning.next_attempt(1, NOW)
    assert value == "2 2026-01-02T03:04:15Z"
    assert cleaning.attempt_of({cleaning.ATTEMPT_ANNOTATION: value}, NOW) == (
        2,
        NOW + dt.timedelta(seconds=10),
    )
    assert [cleaning.backoff(n).total_seconds() for n in (1, 2, 3, 7, 9)] == [
        10, 20, 40, 600, 600
    ]  # fmt: skip
    created = {"metadata": {"creationTimestamp": "2026-01-02T03:03:00Z"}}
    assert cleaning.finished(created, NOW) is None
    later = NOW + cleaning.STUCK_AFTER
    assert cleaning.finished(created, later) == "Failed"
    assert "not finished" in cleaning.failure({**created, "status": {"phase": "Pending"}})
    failed = {
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "EPERM"}}}
            ],
        }
    }
    assert cleaning.finished(failed, NOW) == "Failed"
    assert cleaning.failure(failed) == "exit code 1 Error; EPERM"


def test_the_image_is_one_the_node_already_ran() -> None:
    ours = SuggestionConfig(algorithm_name="tpe", image="registry.example/algo:1")
    katib = SuggestionConfig(
        algorithm_name="hyperopt", image="docker.io/kubeflowkatib/suggestion-hyperopt:v0.19.0"
    )
    bridged = KatibConfig()
    assert bridged.cleanup_image(ours) == "registry.example/algo:1"
    assert bridged.cleanup_image(katib) == SUGGESTION_IMAGE  # the bridge sidecar's
    own = SuggestionConfig(algorithm_name="tpe", image="x", cleanup_image="python:3.12-slim")
    assert bridged.cleanup_image(own) == "python:3.12-slim"
