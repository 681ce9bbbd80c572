"""Types shared by Experiment, Suggestion and Trial (docs/reference/crds.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field

from kubetune.api.base import FreeForm, WireModel
from kubetune.api.enums import CollectorKind as CollectorKind
from kubetune.api.enums import ComparisonType as ComparisonType
from kubetune.api.enums import FileFormat as FileFormat
from kubetune.api.enums import FileSystemKind as FileSystemKind
from kubetune.api.enums import MetricStrategyType as MetricStrategyType
from kubetune.api.enums import ObjectiveType as ObjectiveType


def _number_as_text(value: object) -> object:
    """Accept `min: 0.1` as well as `min: "0.1"`: Katib uses strings, YAML users write numbers."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    return value


NumericText = Annotated[str, BeforeValidator(_number_as_text)]


class AlgorithmSetting(WireModel):
    name: str
    value: NumericText = ""


class AlgorithmSpec(WireModel):
    algorithm_name: str = ""
    algorithm_settings: list[AlgorithmSetting] | None = None


class EarlyStoppingSetting(AlgorithmSetting):
    pass


class EarlyStoppingSpec(WireModel):
    algorithm_name: str = ""
    algorithm_settings: list[EarlyStoppingSetting] | None = None


class EarlyStoppingRule(WireModel):
    name: str
    value: NumericText
    comparison: ComparisonType
    start_step: int | None = None


class MetricStrategy(WireModel):
    name: str
    value: MetricStrategyType


class MetricObjective(WireModel):
    """One objective of a multi-objective Experiment (kubetune extension)."""

    metric_name: str
    type: ObjectiveType


class ObjectiveSpec(WireModel):
    type: ObjectiveType | None = None
    goal: float | None = None
    objective_metric_name: str = ""
    additional_metric_names: list[str] | None = None
    metric_strategies: list[MetricStrategy] | None = None
    objectives: list[MetricObjective] | None = None
    """kubetune extension: two or more objectives optimised together (`kubetune.multiobjective`);
    the first is `objectiveMetricName`/`type`. Absent in every Katib manifest."""


class ParameterAssignment(WireModel):
    name: str
    value: NumericText


class Metric(WireModel):
    """A metric's summary values; `unavailable` marks a value never reported or not numeric."""

    name: str
    min: NumericText | None = None
    max: NumericText | None = None
    latest: NumericText | None = None


class Observation(WireModel):
    metrics: list[Metric] | None = None


class FileSystemPath(WireModel):
    path: str | None = None
    kind: FileSystemKind | None = None
    format: FileFormat | None = None


class FilterSpec(WireModel):
    metrics_format: list[str] | None = None


class SourceSpec(WireModel):
    http_get: FreeForm | None = Field(default=None, alias="httpGet")
    file_system_path: FileSystemPath | None = None
    filter: FilterSpec | None = None


class CollectorSpec(WireModel):
    # Free text here; which kinds are allowed is the webhook's rule (it names the fix).
    kind: str | None = None
    custom_collector: FreeForm | None = None


class MetricsCollectorSpec(WireModel):
    source: SourceSpec | None = None
    collector: CollectorSpec | None = None
