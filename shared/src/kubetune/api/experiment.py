"""The Experiment kind (docs/reference/crds.md): what users submit and the controller reports."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from kubetune.api.base import Condition, FreeForm, ObjectMeta, WireModel
from kubetune.api.common import (
    AlgorithmSpec,
    EarlyStoppingSpec,
    MetricsCollectorSpec,
    NumericText,
    ObjectiveSpec,
    Observation,
    ParameterAssignment,
)
from kubetune.api.warmstart import WarmStartSpec, WarmStartStatus


class ParameterType(StrEnum):
    DOUBLE = "double"
    INT = "int"
    DISCRETE = "discrete"
    CATEGORICAL = "categorical"
    UNKNOWN = "unknown"


class Distribution(StrEnum):
    UNIFORM = "uniform"
    LOG_UNIFORM = "logUniform"
    NORMAL = "normal"
    LOG_NORMAL = "logNormal"
    UNKNOWN = "unknown"


class ResumePolicy(StrEnum):
    NEVER = "Never"
    LONG_RUNNING = "LongRunning"
    FROM_VOLUME = "FromVolume"
    UNSET = ""


class FeasibleSpace(WireModel):
    min: NumericText | None = None
    max: NumericText | None = None
    step: NumericText | None = None
    values: list[NumericText] | None = Field(default=None, alias="list")
    distribution: Distribution | None = None


class ParameterSpec(WireModel):
    name: str
    parameter_type: ParameterType
    feasible_space: FeasibleSpace = Field(default_factory=FeasibleSpace)


class GraphConfig(WireModel):
    num_layers: int | None = None
    input_sizes: list[int] | None = None
    output_sizes: list[int] | None = None


class Operation(WireModel):
    operation_type: str | None = None
    parameters: list[ParameterSpec] | None = None


class NasConfig(WireModel):
    graph_config: GraphConfig | None = None
    operations: list[Operation] | None = None


class ConfigMapSource(WireModel):
    config_map_name: str | None = None
    config_map_namespace: str | None = None
    template_path: str | None = None


class TrialParameterSpec(WireModel):
    name: str = ""
    description: str | None = None
    reference: str = ""


class TrialTemplate(WireModel):
    retain: bool | None = None
    trial_spec: FreeForm | None = None
    config_map: ConfigMapSource | None = None
    trial_parameters: list[TrialParameterSpec] | None = None
    primary_pod_labels: dict[str, str] | None = None
    primary_container_name: str | None = None
    success_condition: str | None = None
    failure_condition: str | None = None


class ExperimentSpec(WireModel):
    parameters: list[ParameterSpec] | None = None
    objective: ObjectiveSpec | None = None
    algorithm: AlgorithmSpec | None = None
    early_stopping: EarlyStoppingSpec | None = None
    trial_template: TrialTemplate | None = None
    parallel_trial_count: int | None = None
    max_trial_count: int | None = None
    max_failed_trial_count: int | None = None
    metrics_collector_spec: MetricsCollectorSpec | None = None
    nas_config: NasConfig | None = None
    resume_policy: ResumePolicy | None = None
    warm_start: WarmStartSpec | None = None


class OptimalTrial(WireModel):
    best_trial_name: str | None = None
    parameter_assignments: list[ParameterAssignment] | None = None
    observation: Observation | None = None


class ParetoTrial(WireModel):
    """A Succeeded trial no other Succeeded trial dominates (multi-objective Experiments)."""

    trial_name: str
    parameter_assignments: list[ParameterAssignment] | None = None
    observation: Observation | None = None


class ExperimentStatus(WireModel):
    start_time: str | None = None
    completion_time: str | None = None
    last_reconcile_time: str | None = None
    conditions: list[Condition] | None = None
    current_optimal_trial: OptimalTrial | None = None
    running_trial_list: list[str] | None = None
    pending_trial_list: list[str] | None = None
    failed_trial_list: list[str] | None = None
    succeeded_trial_list: list[str] | None = None
    killed_trial_list: list[str] | None = None
    early_stopped_trial_list: list[str] | None = None
    metrics_unavailable_trial_list: list[str] | None = None
    trials: int | None = None
    trials_succeeded: int | None = None
    trials_failed: int | None = None
    trials_killed: int | None = None
    trials_pending: int | None = None
    trials_running: int | None = None
    trials_early_stopped: int | None = None
    trial_metrics_unavailable: int | None = None
    warm_start: WarmStartStatus | None = None
    # kubetune extension (multi-objective): the front, sorted by the first objective, at most
    # `kubetune.multiobjective.MAX_FRONT` entries; `paretoFrontSize` counts the whole front.
    pareto_front: list[ParetoTrial] | None = None
    pareto_front_size: int | None = None


class Experiment(WireModel):
    api_version: Literal["kubeflow.org/v1beta1"] = "kubeflow.org/v1beta1"
    kind: Literal["Experiment"] = "Experiment"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ExperimentSpec = Field(default_factory=ExperimentSpec)
    status: ExperimentStatus | None = None
