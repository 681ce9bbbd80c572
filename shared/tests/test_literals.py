"""kubetune.api.literals holds the values of the models' StrEnums the collector reads."""

from __future__ import annotations

from kubetune.api import literals
from kubetune.api.enums import ComparisonType, MetricStrategyType, ObjectiveType


def test_literals_are_the_enums_values_in_order() -> None:
    assert literals.OBJECTIVE_TYPES == tuple(ObjectiveType)
    assert literals.METRIC_STRATEGIES == tuple(MetricStrategyType)
    assert literals.COMPARISONS == tuple(ComparisonType)
    assert (literals.MINIMIZE, literals.MAX) == (ObjectiveType.MINIMIZE, MetricStrategyType.MAX)
