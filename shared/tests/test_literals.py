"""kubetune.api.literals holds the values of the models' StrEnums the collector reads."""

from __future__ import annotations

from kubetune.api import literals
from kubetune.api.enums import ComparisonType, MetricStrategyType, ObjectiveType


def test_literals_are_the_enums_values_in_order() -> None:
    assert tuple(ObjectiveType) == literals.OBJECTIVE_TYPES
    assert tuple(MetricStrategyType) == literals.METRIC_STRATEGIES
    assert tuple(ComparisonType) == literals.COMPARISONS
    assert (literals.MINIMIZE, literals.MAX) == (ObjectiveType.MINIMIZE, MetricStrategyType.MAX)
