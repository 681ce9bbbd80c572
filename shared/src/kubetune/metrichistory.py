"""A Trial's metric history in `status.metricHistory`, bounded so the Trial stays small.

Katib keeps every reported value in MySQL; kubetune keeps them in the Trial (no database):

    status:
      metricHistory:
        metrics:
        - name: loss
          reports: 137            # values reported for this metric in total
          steps: [0, 1, 2, ...]   # 0-based report index of each kept value, ascending
          values: ["0.52", ...]   # as reported (strings, like status.observation)
          times: ["2026-12-01T15:00:00Z", ...]

Thinning: the first `KEEP_FIRST` (100) values of a metric are kept, then every `stride`-th
value after them (stride 1, 2, 4, ...: doubled for the largest metric whenever the history
would exceed `MAX_BYTES`), plus always the latest value. Only when even that does not fit
(hundreds of metrics) is the kept prefix itself halved. The writers (the collector, or
db-manager for pushed metrics) hold a `History`, `append`/`extend` to it and patch `to_wire()`
into the Trial; readers call `read(trial_status)`.
"""

from __future__ import annotations

import heapq
import math
import time as _time

# collections.abc re-exports _collections_abc (loaded with the interpreter); importing it
# would load the whole collections package.
from _collections_abc import Mapping

from kubetune import lightjson
from kubetune.metricbounds import MAX_VALUE_CHARS
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

MAX_BYTES = 64 * 1024
"""The bound on `lightjson.dumps(to_wire(), separators=(",", ":"))`, in bytes (UTF-8)."""
KEEP_FIRST = 100

FIELD = "metricHistory"

_SERIES_OVERHEAD = 64  # the keys and brackets of one metric's entry, beside its name
_OVERHEAD = 16  # {"metrics":[]}
_RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


def rfc3339(timestamp: float | None = None) -> str:
    """Seconds precision, UTC, `Z`: the times Kubernetes writes; `None` or 0 means now."""
    if not timestamp:  # the common case (no timestamps in the log): no `datetime` import
        return _time.strftime(_RFC3339, _time.gmtime())
    from datetime import UTC, datetime

    return datetime.fromtimestamp(float(timestamp), tz=UTC).strftime(_RFC3339)


def json_length(text: str) -> int:
    """`len(lightjson.dumps(text).encode())` without serializing in the common case: printable
    ASCII with no quote or backslash (every number and time) is written as is, in quotes. The
    collector counts this for each value it keeps, so it is on its hot path."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return len(text) + 2
    return len(lightjson.dumps(text).encode())


def _cost(step: int, value: str, time: str) -> int:
    """Compact-JSON bytes one kept value adds (each of the three list items plus a comma)."""
    return len(str(step)) + json_length(value) + json_length(time) + 3


class _Point:
    __slots__ = ("cost", "step", "time", "value")

    def __init__(self, step: int, value: str, time: str, cost: int) -> None:
        self.step = step
        self.value = value
        self.time = time
        self.cost = cost


class Series:
    """One metric's kept values and the grid that decides which future values are kept."""

    def __init__(self, name: str, reports: int = 0, first: int = KEEP_FIRST, stride: int = 1):
        self.name = name
        self.reports = reports
        self.first = first
        self.stride = stride
        self.points: list[_Point] = []
        self.bytes = 0
        self.name_bytes = json_length(name)
        self.index = 0  # creation order in its History

    def on_grid(self, step: int) -> bool:
        return step < self.first or (step - self.first) % self.stride == 0

    def next_grid(self, step: int) -> int:
        """The smallest step after `step` that the grid keeps."""
        nxt = step + 1
        if nxt <= self.first:
            return nxt
        return self.first + math.ceil((nxt - self.first) / self.stride) * self.stride

    def _add(self, step: int, value: str, time: str) -> None:
        value = value[:MAX_VALUE_CHARS]  # writers refuse longer ones; this is the last guard
        if self.points and not self.on_grid(self.points[-1].step):
            self.bytes -= self.points.pop().cost  # an off-grid latest, superseded
        point = _Point(step, value, time, _cost(step, value, time))
        self.points.append(point)
        self.bytes += point.cost

    def _refilter(self) -> None:
        last = len(self.points) - 1
        self.points = [p for i, p in enumerate(self.points) if i == last or self.on_grid(p.step)]
        self.bytes = sum(p.cost for p in self.points)

    def thin(self) -> bool:
        """Keep fewer values (stride doubled; once the grid past the prefix is empty, the prefix
        halved). False when nothing more can go (one value left)."""
        if len(self.points) <= 1:
            return False
        before = len(self.points)
        while len(self.points) == before:
            if self.first + self.stride < self.reports:
                self.stride *= 2
            elif self.first > 1:
                self.first //= 2
                if self.points[-2].step < self.first:
                    continue  # all but the latest are still in the prefix: nothing drops
            else:
                # Only step 0 and the latest remain possible; drop all but the latest.
                self.first = 0
                self.stride = max(self.stride, self.reports + 1) * 2
            self._refilter()
            if self.first == 0 and len(self.points) == before:
                self.points = self.points[-1:]
                self.bytes = sum(p.cost for p in self.points)
        return True

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "reports": self.reports,
            "steps": [p.step for p in self.points],
            "values": [p.value for p in self.points],
            "times": [p.time for p in self.points],
        }


class History:
    """All metrics of one Trial; every append keeps `size() <= MAX_BYTES`.

    Trimming is amortised O(log n) per append whatever the number of metrics n: the size
    estimate is kept as a running total, and the biggest metric that can still give values is
    the top of a heap (stale entries are dropped when they surface), instead of summing and
    sorting every metric on every append (10,000 metric names made one report quadratic).
    """

    def __init__(self, max_bytes: int = MAX_BYTES, keep_first: int = KEEP_FIRST) -> None:
        self.max_bytes = max_bytes
        self.keep_first = keep_first
        self.series: dict[str, Series] = {}
        self._ordered: list[Series] = []  # by creation: the index breaks ties, oldest first
        self._total = _OVERHEAD
        self._heap: list[tuple[int, int]] = []  # (-bytes, index) of metrics with 2+ values
        self._changed: dict[int, Series] = {}  # changed since they were last pushed

    def _series(self, name: str) -> Series:
        found = self.series.get(name)
        if found is None:
            found = self.series[name] = Series(name, first=self.keep_first)
            found.index = len(self._ordered)
            self._ordered.append(found)
            self._total += _weight(found)
        return found

    def estimate(self) -> int:
        """An upper bound of the serialized size, kept without serializing."""
        return self._total

    def _biggest(self) -> Series | None:
        """The metric with the most bytes that can still give values (ties: the oldest)."""
        if len(self._heap) > 2 * len(self._ordered) + 64:  # mostly stale: rebuild
            self._changed = dict(enumerate(self._ordered))
            self._heap = []
        fresh = [(-s.bytes, i) for i, s in self._changed.items() if len(s.points) > 1]
        self._changed.clear()
        if len(fresh) > len(self._heap):
            self._heap.extend(fresh)
            heapq.heapify(self._heap)
        else:
            for entry in fresh:
                heapq.heappush(self._heap, entry)
        while self._heap:
            negative, index = self._heap[0]
            s = self._ordered[index]
            if -negative == s.bytes and len(s.points) > 1:
                return s
            heapq.heappop(self._heap)
        return None

    def _fit(self) -> None:
        while self._total > self.max_bytes:
            # Thin the biggest metric; a metric with one value left cannot give more.
            found = self._biggest()
            if found is None:
                return
            before = _weight(found)
            found.thin()
            self._total += _weight(found) - before
            self._changed[found.index] = found

    def _record(self, s: Series, step: int, value: str, time: str) -> None:
        """Add a value at `step` (reports counted up to it), then trim to the bound."""
        before = _weight(s)
        s.reports = step + 1
        s._add(step, value, time)
        self._total += _weight(s) - before
        self._changed[s.index] = s
        if self._total > self.max_bytes:
            self._fit()

    def append(self, name: str, value: str, time: str | None = None) -> int:
        """Record one reported value; returns its step (0-based report index)."""
        s = self._series(name)
        step = s.reports
        self._record(s, step, value, time or rfc3339())
        return step

    def extend(self, name: str, values: Sequence[str], time: str | None = None) -> None:
        """Values of one metric sharing one time, in order; touches only those it keeps, so a
        run of a million values costs what the kept ones cost."""
        if not values:
            return
        s = self._series(name)
        stamp = time or rfc3339()
        base = s.reports
        last = len(values) - 1
        i = 0
        while True:
            self._record(s, base + i, values[i], stamp)
            if i == last:
                break
            i = min(s.next_grid(base + i) - base, last)

    def to_wire(self) -> dict[str, Any]:
        return {"metrics": [s.to_wire() for s in self.series.values()]}

    def size(self) -> int:
        """The exact serialized size (compact JSON, as the bound counts it)."""
        return serialized_size(self.to_wire())

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None, max_bytes: int = MAX_BYTES) -> History:
        """Continue a stored history (db-manager is stateless: it reads, appends, patches).

        The grid is recovered from the kept steps: the prefix is the run of consecutive steps
        from 0, the stride the largest power of two dividing every later kept step's distance
        from it (the latest excepted, it may be off-grid).
        """
        history = cls(max_bytes)
        wires: dict[str, Mapping[str, Any]] = {}
        for metric in _wire_metrics(status):
            wires.setdefault(metric["name"], metric)  # the first of a name, as `reports` reads
        for name, points in read(status).items():
            s = history._series(name)
            wire = wires.get(name, {})
            s.reports = max(int(wire.get("reports") or 0), points[-1][0] + 1 if points else 0)
            steps = [p[0] for p in points]
            first = 0
            while first < len(steps) and steps[first] == first:
                first += 1
            s.first = min(first, KEEP_FIRST) if first < len(steps) else KEEP_FIRST
            gaps = [step - s.first for step in steps[s.first : -1] if step >= s.first]
            stride = 1
            if gaps:
                g = math.gcd(*gaps) or 1
                stride = g & -g
            s.stride = stride
            for step, value, time in points:
                point = _Point(step, value, time, _cost(step, value, time))
                s.points.append(point)
                s.bytes += point.cost
        history._total = _OVERHEAD + sum(_weight(s) for s in history._ordered)
        history._changed = dict(enumerate(history._ordered))
        history._fit()
        return history


def _weight(s: Series) -> int:
    """A metric's share of `History.estimate()`."""
    return s.bytes + _SERIES_OVERHEAD + s.name_bytes + len(str(s.reports))


def serialized_size(wire: Mapping[str, Any]) -> int:
    return len(lightjson.dumps(wire, separators=(",", ":")).encode())


def _wire_metrics(status: Mapping[str, Any] | None) -> Iterator[Mapping[str, Any]]:
    """The stored metrics that have a name (hand-written junk is skipped)."""
    for metric in ((status or {}).get(FIELD) or {}).get("metrics") or []:
        if isinstance(metric, Mapping) and metric.get("name"):
            yield metric


def _wire_metric(status: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    return next((m for m in _wire_metrics(status) if m["name"] == name), {})


def read(trial_status: Mapping[str, Any] | None) -> dict[str, list[tuple[int, str, str]]]:
    """Metric name -> its kept (step, value, time), ascending by step; {} when none.

    Tolerates a history written by hand or cut short: lists of unequal length are zipped.
    """
    out: dict[str, list[tuple[int, str, str]]] = {}
    for metric in _wire_metrics(trial_status):
        points = zip(
            metric.get("steps") or [],
            metric.get("values") or [],
            metric.get("times") or [],
            strict=False,
        )
        out[str(metric["name"])] = sorted(
            ((int(step), str(value), str(time)) for step, value, time in points),
            key=lambda p: p[0],
        )
    return out


def reports(trial_status: Mapping[str, Any] | None, name: str) -> int:
    """How many values of `name` were reported in total (kept or not)."""
    return int(_wire_metric(trial_status, name).get("reports") or 0)


def drop_history(obj: dict[str, Any]) -> dict[str, Any]:
    """A `json.loads` object_hook (kube.ObjectHook): an object with `metadata` loses
    `status.metricHistory` as soon as it is parsed, so a page of 500 Trials is never held
    with 500 histories (the hook sees each Trial right after its closing brace). Keys named
    metricHistory elsewhere (a label, a job's own fields) are kept."""
    status = obj.get("status")
    if isinstance(status, dict) and "metadata" in obj and isinstance(status.get(FIELD), dict):
        del status[FIELD]
    return obj


__all__: Sequence[str] = [
    "FIELD",
    "KEEP_FIRST",
    "MAX_BYTES",
    "History",
    "Series",
    "drop_history",
    "read",
    "reports",
    "rfc3339",
    "serialized_size",
]
