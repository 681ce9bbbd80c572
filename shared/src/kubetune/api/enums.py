"""The v1beta1 API's enumerations, without pydantic (`kubetune.api.common` re-exports them);
the values the trial pod's collector reads come from `kubetune.api.literals`, which it imports
instead (no `enum` in every trial pod)."""

from __future__ import annotations

from enum import StrEnum

from kubetune.api import literals


class ObjectiveType(StrEnum):
    MINIMIZE = literals.MINIMIZE
    MAXIMIZE = literals.MAXIMIZE
    UNKNOWN = literals.UNKNOWN


class MetricStrategyType(StrEnum):
    MIN = literals.MIN
    MAX = literals.MAX
    LATEST = literals.LATEST


class ComparisonType(StrEnum):
    EQUAL = literals.EQUAL
    LESS = literals.LESS
    GREATER = literals.GREATER


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
