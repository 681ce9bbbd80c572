"""The running summary gives exactly what kubetune.observations.summarise gives on all values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetune import observations
from kubetune.api.common import MetricStrategy, ObjectiveSpec
from kubetune.observations import MetricLog
from kubetune_pns_collector.parsing import TextParser
from kubetune_pns_collector.summaries import RunningSummary

SPEC = ObjectiveSpec(
    type="maximize",
    objective_metric_name="acc",
    additional_metric_names=["loss", "lr"],
    metric_strategies=[MetricStrategy(name="loss", value="min")],
)

_values = st.sampled_from(
    ["0.5", "0.50", "1", "-2", "1e3", "nan", "inf", "-inf", "text", "", "0.25", "3", "-"]
)
_triples = st.lists(
    st.tuples(
        st.sampled_from(["acc", "loss", "lr", "other"]), _values, st.sampled_from([0.0, 5.0, 9.0])
    )
)


@given(_triples, st.booleans())
def test_same_observation_as_summarise_on_every_value(
    triples: list[tuple[str, str, float]], batched: bool
) -> None:
    summary = RunningSummary(SPEC, history=3)
    if batched:
        summary.add_triples(triples)
    else:
        for name, value, stamp in triples:
            summary.add(name, value, stamp)
    logs = [MetricLog(n, v, t) for n, v, t in triples]
    if not any(n == "acc" for n, _, _ in triples):
        logs = []  # no objective value: everything unavailable (reference §7.4)
    assert summary.observation() == observations.summarise(SPEC, logs)


def test_unavailable_and_bounded_recent_values() -> None:
    summary = RunningSummary(SPEC, history=2)
    summary.add_triples([("loss", str(i), 0.0) for i in range(1000)])
    names = {m.name: (m.min, m.max, m.latest) for m in summary.observation().metrics or []}
    assert names == {n: ("unavailable",) * 3 for n in ("acc", "loss", "lr")}
    assert summary.recent("loss") == [("998", 0.0), ("999", 0.0)]
    assert summary.count("loss") == 1000
    summary.add("acc", "0.9")
    names = {m.name: (m.min, m.max, m.latest) for m in summary.observation().metrics or []}
    assert names["loss"] == ("0", "999", "999")
    assert names["acc"] == ("0.9", "0.9", "0.9")
    assert names["lr"] == ("unavailable",) * 3


@pytest.mark.parametrize("bad", ["-inf", "inf", "+Infinity", "nan", "NaN", "1e309", "-1e309"])
def test_one_rule_for_non_finite_values(bad: str) -> None:
    """Every non-finite value, however written: kept as reported in `latest`, never min/max,
    never an objective value; the finite values keep their min and max."""
    objective = ObjectiveSpec(type="minimize", objective_metric_name="loss")
    parser = TextParser(["loss"])
    alone = RunningSummary(objective)
    alone.add_triples(parser.parse(f"epoch 1 loss={bad}\n"))
    (metric,) = alone.observation().metrics or []
    assert (metric.min, metric.max, metric.latest) == ("unavailable", "unavailable", bad)
    assert observations.objective_value(objective, alone.observation()) is None
    mixed = RunningSummary(objective)
    mixed.add_triples(parser.parse(f"loss=0.5\nloss={bad}\nloss=0.25\nloss={bad}\n"))
    (metric,) = mixed.observation().metrics or []
    assert (metric.min, metric.max, metric.latest) == ("0.25", "0.5", bad)
