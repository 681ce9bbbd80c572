"""The pydantic base every v1beta1 model stands on: camelCase on the wire, snake_case in Python.

Neighbours: `common` (types shared by the three kinds), `experiment`, `suggestion`, `trial`
(the kinds), `crds` (the CustomResourceDefinitions generated from these models).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

GROUP = "kubeflow.org"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

FreeForm = dict[str, Any]
"""An embedded Kubernetes object or other user data kubetune does not interpret."""


class WireModel(BaseModel):
    """Strict model: unknown fields are errors, so a misspelt field is caught, not dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
        # Each model's validator is built on its first use, not at import: a process uses a
        # few of the models (the trial pod's collector: the objective and the observation).
        defer_build=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON form as the API server stores it: camelCase, only the fields that were set."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Self:
        """Load a wire document (camelCase) into the model."""
        return cls.model_validate(data)


class ObjectMeta(WireModel):
    """Kubernetes object metadata; fields kubetune reads are typed, the rest pass through."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[FreeForm] | None = None
    finalizers: list[str] | None = None


class Condition(WireModel):
    """One entry of `status.conditions`; the last entry is what `kubectl get` shows."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None
