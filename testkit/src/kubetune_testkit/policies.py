"""A ValidatingAdmissionPolicy that refuses some pods of one namespace: the API server's own
refusal (no webhook), for tests of what kubetune does when the pods of a Trial cannot exist."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kubetune import errors
from kubetune.kube import PODS, Kube, Resource
from kubetune_testkit.waiting import wait_for

POLICIES = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    False,
)
PROBE_LABEL = "kubetune-test/policy-probe"
"""A pod with this label is refused by every policy of `refusing_pods`: its probe."""
BINDINGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    False,
)


def _refused(kube: Kube, namespace: str, labels: dict[str, str], message: str) -> bool:
    """Whether a server-side dry run of a pod with `labels` is refused (nothing is stored)."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "policy-probe", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]},
    }
    try:
        kube.create(PODS, pod, namespace, dry_run=True)
    except errors.ApiError as e:
        return message in str(e)
    return False


@contextlib.contextmanager
def refusing_pods(kube: Kube, namespace: str, expression: str, message: str) -> Iterator[None]:
    """Until the block ends, pods of `namespace` for which the CEL `expression` is false are
    refused with `message`. The block starts once the policy is in effect: the API server loads a
    new policy a second or so after it is stored (longer when busy), so the policy also refuses
    a pod labelled `PROBE_LABEL` and a dry-run of one is retried until it is refused. The probe
    carries no trial label, so kubetune's pod webhook leaves it to the policy."""
    name = f"refuse-{namespace}"
    labels = "object.metadata.labels"
    probed = f"!(has({labels}) && '{PROBE_LABEL}' in {labels}) && ({expression})"
    rules = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    match = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    policy = {
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": probed, "message": message}],
        },
    }
    binding = {
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": match},
    }
    try:
        kube.create(POLICIES, policy)
        kube.create(BINDINGS, binding)
        wait_for(
            "the refusing policy to take effect",
            lambda: _refused(kube, namespace, {PROBE_LABEL: "yes"}, message),
        )
        yield
    finally:
        for resource in (BINDINGS, POLICIES):
            with contextlib.suppress(errors.NotFound):
                kube.delete(resource, name)
