"""Observations follow upstream's strategies and `unavailable` rules."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kubetune import observations as obs
from kubetune.api.common import (
    Metric,
    MetricStrategy,
    MetricStrategyType,
    ObjectiveSpec,
    ObjectiveType,
    Observation,
)

MAXIMIZE = ObjectiveSpec(
    type=ObjectiveType.MAXIMIZE,
    goal=0.9,
    objective_metric_name="acc",
    additional_metric_names=["loss", "lr"],
    metric_strategies=[
        MetricStrategy(name="loss", value=MetricStrategyType.MIN),
        MetricStrategy(name="lr", value=MetricStrategyType.LATEST),
    ],
)


def _metric(observation: Observation, name: str) -> Metric:
    return next(m for m in observation.metrics or [] if m.name == name)


def test_summary_min_max_latest_by_timestamp() -> None:
    logs = [
        obs.MetricLog("acc", "0.5", 1),
        obs.MetricLog("acc", "0.8", 3),
        obs.MetricLog("acc", "0.7", 2),
        obs.MetricLog("loss", "1e-1", 1),
        obs.MetricLog("loss", "0.3", 2),
        obs.MetricLog("other", "9", 1),
    ]
    result = obs.summarise(MAXIMIZE, logs)
    acc = _metric(result, "acc")
    assert (acc.min, acc.max, acc.latest) == ("0.5", "0.8", "0.8")
    loss = _metric(result, "loss")
    assert (loss.min, loss.max, loss.latest) == ("1e-1", "0.3", "0.3")
    assert _metric(result, "lr").latest == obs.UNAVAILABLE
    assert {m.name for m in result.metrics or []} == {"acc", "loss", "lr"}


def test_non_numeric_values_only_set_latest() -> None:
    result = obs.summarise(
        MAXIMIZE, [obs.MetricLog("acc", "0.4", 1), obs.MetricLog("acc", "nan", 2)]
    )
    acc = _metric(result, "acc")
    assert (acc.min, acc.max, acc.latest) == ("0.4", "0.4", "nan")


def test_objective_value_uses_strategy_and_falls_back_to_latest() -> None:
    observation = Observation(metrics=[Metric(name="acc", min="0.1", max="0.9", latest="0.5")])
    assert obs.objective_value(MAXIMIZE, observation) == 0.9
    minimize = ObjectiveSpec(type=ObjectiveType.MINIMIZE, objective_metric_name="acc")
    assert obs.objective_value(minimize, observation) == 0.1
    fallback = Observation(
        metrics=[Metric(name="acc", min="unavailable", max="unavailable", latest="0.3")]
    )
    assert obs.objective_value(MAXIMIZE, fallback) == 0.3
    assert obs.objective_value(MAXIMIZE, None) is None
    assert obs.is_available(MAXIMIZE, fallback)
    assert not obs.is_available(MAXIMIZE, obs.summarise(MAXIMIZE, []))


@pytest.mark.parametrize(
    ("kind", "candidate", "incumbent", "expected"),
    [
        (ObjectiveType.MAXIMIZE, 2.0, 1.0, True),
        (ObjectiveType.MAXIMIZE, 1.0, 1.0, False),
        (ObjectiveType.MINIMIZE, 0.5, 1.0, True),
        (ObjectiveType.MINIMIZE, 1.0, None, True),
    ],
)
def test_better(
    kind: ObjectiveType, candidate: float, incumbent: float | None, expected: bool
) -> None:
    assert (
        obs.better(ObjectiveSpec(type=kind, objective_metric_name="m"), candidate, incumbent)
        is expected
    )


def test_goal() -> None:
    assert obs.goal_reached(MAXIMIZE, 0.9) and not obs.goal_reached(MAXIMIZE, 0.89)
    no_goal = ObjectiveSpec(type=ObjectiveType.MAXIMIZE, objective_metric_name="acc")
    assert not obs.goal_reached(no_goal, 100.0)


@pytest.mark.parametrize(
    "text", ["1_0", " 1", "1 ", "１", "٣", "0x10", "1e", "", "+", ".", "e5", "1.5.2", "infinite"]
)
def test_text_outside_the_number_grammar_is_no_number(text: str) -> None:
    """`float()` takes `1_0` (ten), blanks and non-ASCII digits; the grammar takes none."""
    assert not obs.is_number(text)
    assert obs.parse_number(text) is None
    assert obs.metric_error("loss", text, numbers_only=True) is not None


@given(st.text(alphabet="+-.eE0123456789infaINFAty_ \u0131\u0130\uff11", max_size=12))
@example("ınf")
@example("-İnfinity")
def test_is_number_is_the_number_pattern_in_ascii(text: str) -> None:
    """The string checks and the documented grammar agree on any text (dotless and dotted I,
    which the pattern's ignore-case matches without re.ASCII, are no number)."""
    pattern = re.fullmatch(obs.NUMBER_PATTERN, text, re.ASCII) is not None
    assert obs.is_number(text) is pattern


def test_text_values_are_kept_bounded_but_never_rank() -> None:
    """Katib's darts reports `Best-Genotype=Genotype(...)`: text is a value (kept in `latest`),
    up to `MAX_TEXT_CHARS`; db-manager (numbers_only) takes numbers alone."""
    genotype = "Genotype(normal=[[('max_pooling_3x3',0)]],normal_concat=range(2,3))"
    assert obs.metric_error("Best-Genotype", genotype) is None
    assert obs.parse_number(genotype) is None
    too_long = "x" * (obs.MAX_TEXT_CHARS + 1)
    assert str(obs.MAX_TEXT_CHARS) in (obs.metric_error("Best-Genotype", too_long) or "")
    assert "not a number" in (obs.metric_error("loss", "1_0", numbers_only=True) or "")


@pytest.mark.parametrize(
    ("text", "number"),
    [("1", 1.0), ("-0.25", -0.25), ("+.5", 0.5), ("1.", 1.0), ("1e-3", 0.001), ("2E+2", 200.0)],
)
def test_numbers_in_the_grammar_parse(text: str, number: float) -> None:
    assert obs.is_number(text)
    assert obs.parse_number(text) == number
    assert obs.metric_error("loss", text) is None


@pytest.mark.parametrize("text", ["inf", "-Infinity", "NaN", "1e309"])
def test_non_finite_numbers_are_numbers_that_never_rank(text: str) -> None:
    assert obs.is_number(text)
    assert obs.parse_number(text) is None


def test_metric_error_names_the_limit() -> None:
    long_name = "n" * (obs.MAX_NAME_CHARS + 1)
    assert str(obs.MAX_NAME_CHARS) in (obs.metric_error(long_name, "1") or "")
    long_value = "1" * (obs.MAX_VALUE_CHARS + 1)
    assert str(obs.MAX_VALUE_CHARS) in (obs.metric_error("a", long_value) or "")
    assert obs.metric_error("a", obs.UNAVAILABLE) is None
    assert "empty" in (obs.metric_error("", "1") or "")
