"""The v1beta1 API's enumerations, without pydantic: a process that only needs the names (the
trial pod's collector) does not pay for the models (`kubetune.api.common` re-exports them)."""

from __future__ import annotations

from enum import StrEnum


class ObjectiveType(StrEnum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"
    UNKNOWN = ""


class MetricStrategyType(StrEnum):
    MIN = "min"
    MAX = "max"
    LATEST = "latest"


class ComparisonType(StrEnum):
    EQUAL = "equal"
    LESS = "less"
    GREATER = "greater"


class FileSystemKind(StrEnum):
    DIRECTORY = "Directory"
    FILE = "File"
    INVALID = "Invalid"


class FileFormat(StrEnum):
    TEXT = "TEXT"
    JSON = "JSON"


class CollectorKind(StrEnum):
    STDOUT = "StdOut"
    FILE = "File"
    TENSORFLOW_EVENT = "TensorFlowEvent"
    PROMETHEUS_METRIC = "PrometheusMetric"
    CUSTOM = "Custom"
    PUSH = "Push"
    NONE = "None"
