"""The Trial kind (docs/reference/crds.md): one run of the trial template with one assignment."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kubetune.api.base import Condition, FreeForm, ObjectMeta, WireModel
from kubetune.api.common import (
    EarlyStoppingRule,
    MetricsCollectorSpec,
    ObjectiveSpec,
    Observation,
    ParameterAssignment,
)


class TrialSpec(WireModel):
    objective: ObjectiveSpec | None = None
    parameter_assignments: list[ParameterAssignment] | None = None
    early_stopping_rules: list[EarlyStoppingRule] | None = None
    run_spec: FreeForm | None = None
    retain_run: bool | None = None
    metrics_collector: MetricsCollectorSpec | None = None
    primary_pod_labels: dict[str, str] | None = None
    primary_container_name: str | None = None
    success_condition: str | None = None
    failure_condition: str | None = None
    labels: dict[str, str] | None = None


class MetricHistorySeries(WireModel):
    """One metric's kept values (kubetune.metrichistory decides which): parallel lists."""

    name: str
    reports: int | None = None
    steps: list[int] | None = None
    values: list[str] | None = None
    times: list[str] | None = None


class MetricHistory(WireModel):
    """kubetune's addition to Katib's Trial status: the bounded history of every metric."""

    metrics: list[MetricHistorySeries] | None = None


class TrialStatus(WireModel):
    start_time: str | None = None
    completion_time: str | None = None
    last_reconcile_time: str | None = None
    conditions: list[Condition] | None = None
    observation: Observation | None = None
    metric_history: MetricHistory | None = None


class Trial(WireModel):
    api_version: Literal["kubeflow.org/v1beta1"] = "kubeflow.org/v1beta1"
    kind: Literal["Trial"] = "Trial"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrialSpec = Field(default_factory=TrialSpec)
    status: TrialStatus | None = None
