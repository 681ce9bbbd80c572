"""The Experiment's author must be allowed what kubetune will do on their behalf.

kubetune's controllers create each Trial's job and read template ConfigMaps with rights of
their own, wider than a user's. Without this check a user who may create Experiments but not
Jobs, or who may not read a ConfigMap in another namespace, could have kubetune do it for them
(a confused deputy). At admission the webhook asks the API server, with the request's own
`userInfo` (SubjectAccessReview), whether the author may create the trial's kind in the
Experiment's namespace and get the template ConfigMap; each "no" is a denial naming the
permission and the fix.

A trial kind the API server does not serve yet (its operator's CRD is not installed) is
admitted, as Katib admits it: CRDs and Experiments applied together in one `kubectl apply`
must not fail on the order of admission, and the Trial fails with `JobKindNotInstalled` if the
kind is still missing when its job is created. The author's right to create it is still
checked, on the resource name Kubernetes would guess from the kind (`Widget` -> `widgets`),
and the admission carries a warning that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from kubetune.api import Experiment
from kubetune.kube import Resource
from kubetune_webhook.validating import ClusterError, KindNotInstalled


@dataclass(frozen=True)
class Permission:
    """One resource attribute of a SubjectAccessReview."""

    verb: str
    group: str
    resource: str
    namespace: str
    name: str = ""

    def describe(self) -> str:
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {what}{named} in namespace {self.namespace}"


class Authorizer(Protocol):
    """What the check asks the API server (`lookups.KubeCluster` in production)."""

    def resource(self, api_version: str, kind: str) -> Resource:
        """The kind's resource through discovery. Raises ClusterError."""
        ...

    def config_map_data(self, namespace: str, name: str) -> dict[str, str] | None: ...

    def may(self, user: dict[str, Any], permission: Permission) -> bool:
        """Whether `user` (an AdmissionReview userInfo) has `permission`. Raises ClusterError."""
        ...


def _template_kind(experiment: Experiment, cluster: Authorizer) -> tuple[str, str] | None:
    """(apiVersion, kind) of the trial template, None when it cannot be told (validation says
    why elsewhere)."""
    template = experiment.spec.trial_template
    if template is None:
        return None
    body: Any = template.trial_spec
    cm = template.config_map
    if body is None and cm is not None and cm.config_map_name and cm.config_map_namespace:
        data = cluster.config_map_data(cm.config_map_namespace, cm.config_map_name) or {}
        try:
            body = yaml.safe_load(data.get(cm.template_path or "", "") or "")
        except yaml.YAMLError:
            return None
    if not isinstance(body, dict):
        return None
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return api_version, kind


@dataclass(frozen=True)
class Required:
    """What kubetune will do for the author; for a trial kind not installed, its
    (apiVersion, kind) and the create permission on the guessed resource."""

    permissions: list[Permission]
    uninstalled: tuple[str, str] | None = None
    guessed: Permission | None = None


@dataclass(frozen=True)
class Verdict:
    """The author check's answer: denials (none = allowed) and admission warnings."""

    problems: list[str]
    warnings: list[str]


def guessed_plural(kind: str) -> str:
    """The resource name Kubernetes guesses for a kind it cannot look up (lower case, plural
    by `s`, `es` after an `s`, `ies` for a final `y`)."""
    singular = kind.lower()
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"


def required(experiment: Experiment, namespace: str, cluster: Authorizer) -> Required:
    """What kubetune will do for this Experiment's author. Raises ClusterError."""
    needed: list[Permission] = []
    template = experiment.spec.trial_template
    cm = template.config_map if template is not None else None
    if cm is not None and cm.config_map_name and cm.config_map_namespace:
        needed.append(
            Permission("get", "", "configmaps", cm.config_map_namespace, cm.config_map_name)
        )
    kind = _template_kind(experiment, cluster)
    if kind is None:
        return Required(needed)
    try:
        res = cluster.resource(*kind)
    except KindNotInstalled:
        guess = Permission("create", kind[0].rpartition("/")[0], guessed_plural(kind[1]), namespace)
        return Required([*needed, guess], uninstalled=kind, guessed=guess)
    needed.append(Permission("create", res.group, res.plural, namespace))
    return Required(needed)


def check(
    experiment: Experiment, namespace: str, user: dict[str, Any], cluster: Authorizer
) -> Verdict:
    """One problem per permission the author lacks, and the warning of a kind not installed."""
    try:
        needs = required(experiment, namespace, cluster)
        missing = [p for p in needs.permissions if not cluster.may(user, p)]
    except ClusterError as e:
        return Verdict([f"cannot check the author's permissions: {e}; retry"], [])
    name = user.get("username") or "the requesting user"
    guess = ""
    warnings = []
    if needs.uninstalled is not None:
        api_version, kind = needs.uninstalled
        guess = (
            f" (kind {kind} of apiVersion {api_version} is not installed in the cluster, so its "
            f"resource is taken to be {guessed_plural(kind)}, as Kubernetes guesses it; install "
            "its operator first if that is not its name)"
        )
        warnings.append(
            f"spec.trialTemplate: kind {kind} of apiVersion {api_version} is not installed in "
            "the cluster (no CRD serves it); each Trial fails with JobKindNotInstalled until "
            "its operator is installed"
        )
    problems = [
        f"spec.trialTemplate: {name} may not {p.describe()}, and kubetune would do it on their "
        f"behalf{guess if p == needs.guessed else ''}; ask an administrator for that "
        "permission or use a template you may run"
        for p in missing
    ]
    return Verdict(problems, warnings if not problems else [])
