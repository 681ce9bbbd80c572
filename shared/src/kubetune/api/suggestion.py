"""The Suggestion kind (docs/reference/crds.md): the experiment-controller's request for
assignments."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kubetune.api.base import Condition, FreeForm, ObjectMeta, WireModel
from kubetune.api.common import (
    AlgorithmSetting,
    AlgorithmSpec,
    EarlyStoppingRule,
    EarlyStoppingSpec,
    ParameterAssignment,
)
from kubetune.api.experiment import ResumePolicy
from kubetune.api.warmstart import WarmStartStatus


class TrialAssignment(WireModel):
    """One assignment the algorithm handed out; `name` becomes the Trial's name."""

    name: str
    parameter_assignments: list[ParameterAssignment] | None = None
    early_stopping_rules: list[EarlyStoppingRule] | None = None
    labels: dict[str, str] | None = None


class SuggestionSpec(WireModel):
    algorithm: AlgorithmSpec | None = None
    early_stopping: EarlyStoppingSpec | None = None
    requests: int | None = None
    resume_policy: ResumePolicy | None = None


class SuggestionStatus(WireModel):
    algorithm_settings: list[AlgorithmSetting] | None = None
    suggestion_count: int | None = None
    suggestions: list[TrialAssignment] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    last_reconcile_time: str | None = None
    conditions: list[Condition] | None = None
    warm_start: WarmStartStatus | None = None


class Suggestion(WireModel):
    api_version: Literal["kubeflow.org/v1beta1"] = "kubeflow.org/v1beta1"
    kind: Literal["Suggestion"] = "Suggestion"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SuggestionSpec = Field(default_factory=SuggestionSpec)
    status: SuggestionStatus | None = None


__all__ = ["FreeForm", "Suggestion", "SuggestionSpec", "SuggestionStatus", "TrialAssignment"]
