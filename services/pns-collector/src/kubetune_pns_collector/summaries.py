"""The running summary of every metric, in memory that does not grow with the log.

`kubetune.observations.summarise` computes min, max and latest from *all* values; a 1 GiB log
cannot be kept, so per metric this keeps only the values summarise would pick (the first
minimum, the first maximum, the latest by timestamp, later wins ties) and hands those to it,
which gives the same answer. Beside that, a bounded log of the most recent values per metric
(for early stopping), and the Trial's bounded metric history (`kubetune.metrichistory`,
reported with the observation as `status.metricHistory`).

Only values `kubetune.observations.metric_error` accepts get in (a number of at most
`MAX_VALUE_CHARS` characters in the one number grammar, text of at most `MAX_TEXT_CHARS`, or
`unavailable`): the authorizer
refuses any other, so one odd line of the training's output would otherwise fail every report
of the trial. The others are skipped with a warning that names the limit.
"""

from __future__ import annotations

import math
from itertools import repeat

from kubetune import lightlog, metrichistory, observations
from kubetune.lazyregex import LazyPattern
from kubetune.metricbounds import is_finite_number
from kubetune.observations import MetricLog, ObjectiveLike, ObservationSummary
from kubetune.typenames import TYPE_CHECKING
from kubetune_pns_collector import parsing

if TYPE_CHECKING:
    from collections import deque
    from collections.abc import Iterable, Sequence
else:  # collections.deque itself: importing collections would load the whole package
    from _collections import deque

log = lightlog.get(__name__)

DEFAULT_HISTORY = 100
WARNINGS_PER_METRIC = 10
"""Skipped values logged one by one per metric; the rest are counted (a log of a million bad
lines must not make a million warnings)."""
# Finite numbers of `observations.NUMBER_PATTERN`, one a line: a long run of values is checked
# in one pass, without backtracking (possessive), 10x faster than a fullmatch a value. What it
# refuses (inf, nan, `unavailable`, anything else) goes to `metric_error` one by one. A short
# run takes a string check a value (`is_finite_number`): no `re` in a pod whose log is small.
_NUMBERS = LazyPattern(
    r"(?:[+-]?+(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+\n)*+", ascii=False
)
SHORT_RUN = 64


def _all_finite(values: Sequence[str]) -> bool:
    if len(values) <= SHORT_RUN:
        return all(map(is_finite_number, values))
    text = "\n".join(values) + "\n"
    # No value may hold a line end of its own.
    return text.count("\n") == len(values) and _NUMBERS.get().fullmatch(text) is not None


class _Picks:
    """summarise's candidates for one metric, each with its position in the stream."""

    __slots__ = ("count", "latest", "max", "min", "recent")

    def __init__(self, recent: deque[tuple[str, float]]) -> None:
        self.min: tuple[int, float, MetricLog] | None = None
        self.max: tuple[int, float, MetricLog] | None = None
        self.latest: tuple[int, MetricLog] | None = None
        self.count = 0
        self.recent = recent


class RunningSummary:
    """Values in, an observation out; `changed` says whether a report would differ."""

    def __init__(self, objective: ObjectiveLike, history: int = DEFAULT_HISTORY) -> None:
        self.objective = objective
        self.names = frozenset(observations.strategies(objective))
        self._picks = {n: _Picks(recent=deque(maxlen=max(1, history))) for n in self.names}
        self.changed = False
        self.history = metrichistory.History()
        self.skipped: dict[str, int] = {}

    def usable(self, name: str, values: Sequence[str]) -> Sequence[str]:
        """`values` without those `observations.metric_error` refuses, each skipped with a
        warning (the first `WARNINGS_PER_METRIC` of a metric; then every 10 000th)."""
        return self._checked(name, values)[0]

    def _checked(self, name: str, values: Sequence[str]) -> tuple[Sequence[str], bool]:
        """`usable(values)`, and whether they are all finite numbers of the grammar (one
        regex pass over the run: then `float()` reads each as the grammar does)."""
        if (
            values
            and max(map(len, values)) <= observations.MAX_VALUE_CHARS
            and observations.metric_error(name, observations.UNAVAILABLE) is None
            and _all_finite(values)
        ):
            return values, True
        kept = []
        for value in values:
            problem = observations.metric_error(name, value)
            if problem is None:
                kept.append(value)
                continue
            skipped = self.skipped[name] = self.skipped.get(name, 0) + 1
            if skipped <= WARNINGS_PER_METRIC or skipped % 10_000 == 0:
                log.warning(
                    "skipping a value of metric %.40r (%d skipped so far): %s",
                    name,
                    skipped,
                    problem,
                )
        return kept, False

    def count(self, name: str) -> int:
        picks = self._picks.get(name)
        return picks.count if picks else 0

    def recent(self, name: str) -> list[tuple[str, float]]:
        """The most recent (value, timestamp) pairs of `name`, oldest first."""
        picks = self._picks.get(name)
        return list(picks.recent) if picks else []

    def add(self, name: str, value: str, timestamp: float = 0.0) -> None:
        picks = self._picks.get(name)
        if picks is None or not self.usable(name, [value]):
            return
        self._add(picks, name, value, timestamp)

    def _add(self, picks: _Picks, name: str, value: str, timestamp: float) -> None:
        seq = picks.count
        picks.count += 1
        picks.recent.append((value, timestamp))
        self.history.append(name, value, metrichistory.rfc3339(timestamp))
        self.changed = True
        entry = MetricLog(name, value, timestamp)
        number = observations.parse_number(value)
        if number is not None:
            if picks.min is None or number < picks.min[1]:
                picks.min = (seq, number, entry)
            if picks.max is None or number > picks.max[1]:
                picks.max = (seq, number, entry)
        if picks.latest is None or timestamp >= picks.latest[1].timestamp:
            picks.latest = (seq, entry)

    def add_many(self, name: str, values: Sequence[str], timestamp: float) -> None:
        """Values of one metric sharing one timestamp, in order; the fast path for big logs."""
        picks = self._picks.get(name)
        if picks is None:
            return
        values, numbers_only = self._checked(name, values)
        if not values:
            return
        numbers = list(map(float, values)) if numbers_only else []
        low = min(numbers) if numbers else math.nan
        high = max(numbers) if numbers else math.nan
        if not (math.isfinite(low) and math.isfinite(high)):
            # Text, `unavailable`, NaN or overflowing numbers among them: one by one, each read
            # by the grammar (`float()` would take the text `1_0` for 10).
            for v in values:
                self._add(picks, name, v, timestamp)
            return
        base = picks.count
        if picks.min is None or low < picks.min[1]:
            i = numbers.index(low)
            picks.min = (base + i, low, MetricLog(name, values[i], timestamp))
        if picks.max is None or high > picks.max[1]:
            i = numbers.index(high)
            picks.max = (base + i, high, MetricLog(name, values[i], timestamp))
        if picks.latest is None or timestamp >= picks.latest[1].timestamp:
            picks.latest = (base + len(values) - 1, MetricLog(name, values[-1], timestamp))
        picks.count += len(values)
        maxlen = picks.recent.maxlen or 1
        picks.recent.extend(zip(values[-maxlen:], repeat(timestamp)))
        self.history.extend(name, values, metrichistory.rfc3339(timestamp))
        self.changed = True

    def add_runs(self, runs: Iterable[tuple[str, float, list[str]]]) -> None:
        """Runs of one metric and timestamp (order kept per metric), as parsers group them."""
        for name, stamp, values in runs:
            self.add_many(name, values, stamp)

    def add_triples(self, triples: Iterable[tuple[str, str, float]]) -> None:
        """Parser output in the order written."""
        self.add_runs(parsing.runs_of(list(triples)))

    def observation(self) -> ObservationSummary:
        """summarise() of the kept picks; every metric `unavailable` when the objective never
        came (upstream reports only an `unavailable` objective then)."""
        objective = self.objective.objective_metric_name
        if not self.count(objective):
            return observations.summarise(self.objective, [])
        logs: list[tuple[int, MetricLog]] = []
        for picks in self._picks.values():
            seen: set[int] = set()
            for pick in (picks.min, picks.max):
                if pick is not None and pick[0] not in seen:
                    seen.add(pick[0])
                    logs.append((pick[0], pick[2]))
            if picks.latest is not None and picks.latest[0] not in seen:
                logs.append(picks.latest)
        logs.sort(key=lambda item: item[0])
        return observations.summarise(self.objective, [entry for _, entry in logs])
