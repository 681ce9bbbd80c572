"""The running summary gives exactly what kubetune.observations.summarise gives on all values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetune import observations, statusbounds
from kubetune.api.common import MetricStrategy, ObjectiveSpec
from kubetune.observations import MetricLog
from kubetune_pns_collector import reporting, summaries
from kubetune_pns_collector.parsing import TextParser
from kubetune_pns_collector.summaries import RunningSummary

SPEC = ObjectiveSpec(
    type="maximize",
    objective_metric_name="acc",
    additional_metric_names=["loss", "lr"],
    metric_strategies=[MetricStrategy(name="loss", value="min")],
)

_values = st.sampled_from(
    [
        *("0.5", "0.50", "1", "-2", "1e3", "nan", "inf", "-inf", "text", "", "0.25", "3", "-"),
        *("1_0", "\uff11", " 2", "unavailable", "1" * 129, "1\n2", "3\n"),
    ]
)
_triples = st.lists(
    st.tuples(
        st.sampled_from(["acc", "loss", "lr", "other"]), _values, st.sampled_from([0.0, 5.0, 9.0])
    )
)


@settings(deadline=None)  # no timed assertions: the machine is shared
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
    # Only what every writer may store (observations.metric_error); the rest is skipped.
    logs = [MetricLog(n, v, t) for n, v, t in triples if observations.metric_error(n, v) is None]
    if not any(log.name == "acc" for log in logs):
        logs = []  # no objective value: everything unavailable
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


def test_values_no_writer_may_store_are_skipped_with_the_limit_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 400 KB number from the training: skipped, each time with a warning naming the limit;
    `1_0` and full-width digits are text (kept as reported, never ranked); what is reported
    passes the authorizer's bounds."""
    objective = ObjectiveSpec(type="maximize", objective_metric_name="acc")
    summary = RunningSummary(objective)
    huge = "0." + "9" * 400_000
    for values in (["0.5", huge, "1_0"], ["\uff11", "0.25"]):
        summary.add_many("acc", values, 0.0)
    summary.add("acc", huge, 1.0)
    (metric,) = summary.observation().metrics or []
    assert (metric.min, metric.max, metric.latest) == ("0.25", "0.5", "0.25")
    assert observations.objective_value(objective, summary.observation()) == 0.5
    # Logging not configured: warnings go to stderr, the message alone (as `logging`'s).
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2, warnings
    assert all(f"more than {observations.MAX_VALUE_CHARS}" in w for w in warnings)
    assert all(len(w) < 1000 for w in warnings)
    patch = reporting.observation_patch(summary.observation(), summary.history.to_wire())
    assert statusbounds.status_error(patch["status"]) is None


def test_warnings_are_bounded_per_metric(capsys: pytest.CaptureFixture[str]) -> None:
    summary = RunningSummary(SPEC)
    summary.add_many("acc", ["1" * (observations.MAX_VALUE_CHARS + 1)] * 100_000, 0.0)
    assert summary.skipped == {"acc": 100_000}
    assert len(capsys.readouterr().err.splitlines()) == summaries.WARNINGS_PER_METRIC + 10


_odd = st.one_of(
    _values,
    st.text(max_size=20),
    st.text(alphabet="0123456789._eE+-\uff11", min_size=100, max_size=300),
)


@settings(deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["acc", "loss", "lr"]), _odd), max_size=30))
def test_what_the_collector_writes_always_passes_the_authorizer(
    pairs: list[tuple[str, str]],
) -> None:
    summary = RunningSummary(SPEC)
    for name, value in pairs:
        summary.add(name, value)
    summary.add_runs([(name, 0.0, [value]) for name, value in pairs])
    patch = reporting.observation_patch(summary.observation(), summary.history.to_wire())
    assert statusbounds.status_error(patch["status"]) is None


@given(st.lists(_odd, min_size=1, max_size=5))
def test_the_one_pass_check_takes_only_numbers(values: list[str]) -> None:
    """The fast path agrees with `observations.metric_error` on every value it admits."""
    kept = RunningSummary(SPEC).usable("acc", values)
    assert list(kept) == [v for v in values if observations.metric_error("acc", v) is None]


_value = st.lists(
    st.sampled_from(["1", "0", ".", "5", "-", "+", "e", "E", "inf", "NaN", "x", "\n", "\u0661"]),
    max_size=5,
).map("".join)


@settings(max_examples=500)
@given(st.lists(_value, min_size=1, max_size=4))
def test_short_and_long_runs_agree_on_which_are_all_finite_numbers(values: list[str]) -> None:
    """A short run is checked a value at a time by string methods, a long one by one regex
    pass; both say the same (the long check sees the run repeated past `SHORT_RUN`)."""
    short = summaries._all_finite(values)
    long = summaries._all_finite(values * (summaries.SHORT_RUN // len(values) + 1))
    assert short is long


@pytest.mark.parametrize(
    ("values", "finite"),
    [(["1", "-2.5e3", ".5"], True), (["1", "inf"], False), (["1\n2"], False), (["\u0661"], False)],
)
def test_all_finite_takes_finite_numbers_of_the_grammar_only(
    values: list[str], finite: bool
) -> None:
    for run in (values, values * summaries.SHORT_RUN):
        assert summaries._all_finite(run) is finite
