"""The Experiment's author must be allowed what kubetune will do on their behalf.

kubetune's controllers create each Trial's job and read template ConfigMaps with rights of
their own, wider than a user's. Without this check a user who may create Experiments but not
Jobs, or who may not read a ConfigMap in another namespace, could have kubetune do it for them
(a confused deputy). At admission the webhook asks the API server, with the request's own
`userInfo` (SubjectAccessReview), whether the author may create the trial's kind in the
Experiment's namespace and get the template ConfigMap; each "no" is a denial naming the
permission and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from kubetune.api import Experiment
from kubetune.kube import Resource
from kubetune_webhook.validating import ClusterError


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


def required(experiment: Experiment, namespace: str, cluster: Authorizer) -> list[Permission]:
    """What kubetune will do for this Experiment's author. Raises ClusterError."""
    needed: list[Permission] = []
    template = experiment.spec.trial_template
    cm = template.config_map if template is not None else None
    if cm is not None and cm.config_map_name and cm.config_map_namespace:
        needed.append(
            Permission("get", "", "configmaps", cm.config_map_namespace, cm.config_map_name)
        )
    kind = _template_kind(experiment, cluster)
    if kind is not None:
        res = cluster.resource(*kind)
        needed.append(Permission("create", res.group, res.plural, namespace))
    return needed


def problems(
    experiment: Experiment, namespace: str, user: dict[str, Any], cluster: Authorizer
) -> list[str]:
    """One message per permission the author lacks ([] = allowed)."""
    try:
        missing = [p for p in required(experiment, namespace, cluster) if not cluster.may(user, p)]
    except ClusterError as e:
        return [f"cannot check the author's permissions: {e}; retry"]
    name = user.get("username") or "the requesting user"
    return [
        f"spec.trialTemplate: {name} may not {p.describe()}, and kubetune would do it on their "
        "behalf; ask an administrator for that permission or use a template you may run"
        for p in missing
    ]
