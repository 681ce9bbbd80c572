"""Observation logs kept in Trials: Katib's DBManager operations without a database.

A report is read-modify-write of one Trial's status (the bounded `metricHistory` and the
`observation` min/max/latest, as the collector computes them), patched with the Trial's
resourceVersion as precondition: two replicas reporting for one Trial at once conflict, and
the loser reads again and re-applies, so nothing is lost and nothing is counted twice.
Reports for one Trial that arrive while its write is in flight queue up and go out together in
the next write (one read-modify-patch for all of them, in arrival order); each caller is told
"done" only after the API server accepted the patch holding its values. While a Trial's queue
keeps filling, the answer to one patch is the base of the next (no read in between; a stale
base only costs a conflict and a read). Nothing is held once a Trial's queue is empty, so any
number of replicas may serve.

Katib's requests name a trial but no namespace (its trial names are unique in its database):
the Trial is found by name across the namespaces this process may see (`--watch-namespace` narrows
them); a name in two namespaces is an error that says so.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from kubetune import conditions, errors, metrichistory, observations
from kubetune.api.common import ObjectiveSpec
from kubetune.kube import TRIALS, Kube, object_name
from kubetune.observations import UNAVAILABLE, MetricLog

Obj = dict[str, Any]

MAX_LOGS = 10_000
"""Metric logs in one report: the history keeps ~1,500 values per Trial, more is a mistake."""


class Code(Enum):
    INVALID = "invalid"
    NOT_FOUND = "not-found"
    AMBIGUOUS = "ambiguous"
    DEADLINE = "deadline"
    UNAVAILABLE = "unavailable"
    DENIED = "denied"
    UNAUTHENTICATED = "unauthenticated"
    FINISHED = "finished"


class StoreError(Exception):
    """A request that cannot be served; `code` maps to the gRPC status, the text names why."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Log:
    """One reported value: metric name, value text, time text (RFC3339) and its epoch."""

    name: str
    value: str
    time: str
    epoch: float


def parse_time(text: str, what: str) -> float:
    """RFC3339 (`Z` or an offset, fractions allowed) to epoch seconds.

    Raises:
        StoreError: not RFC3339; the message names `what` and the expected form.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise StoreError(
            Code.INVALID,
            f"{what} {text!r} is not an RFC3339 time: write e.g. 2026-12-01T15:00:00Z",
        )
    return moment.timestamp()


def checked_logs(trial: str, logs: Sequence[tuple[str, str, str]], now: float) -> list[Log]:
    """Validate a report's (metric name, value, time) triples; an empty time means now.

    A value must be a number in the one grammar every writer checks
    (`observations.metric_error`: ASCII digits, bounded name and value) or `unavailable` (what
    Katib's collectors report for a metric never seen).

    Raises:
        StoreError: INVALID, naming the trial, the log's index, the field and the fix.
    """
    if not trial:
        raise StoreError(Code.INVALID, "trial_name is empty: name the Trial the metrics are for")
    if len(logs) > MAX_LOGS:
        raise StoreError(
            Code.INVALID,
            f"observation_log of trial {trial} has {len(logs)} metric_logs, more than "
            f"{MAX_LOGS}: report in smaller batches",
        )
    out = []
    for i, (name, value, stamp) in enumerate(logs):
        where = f"observation_log.metric_logs[{i}] of trial {trial}"
        wrong = observations.metric_error(name, value, numbers_only=True)
        if wrong:
            raise StoreError(Code.INVALID, f"{where}: {wrong}")
        if stamp:
            epoch = parse_time(stamp, f"{where}: time_stamp")
        else:
            epoch = now
            stamp = metrichistory.rfc3339(now)
        out.append(Log(name, value, stamp, epoch))
    refuse_too_many_metrics("", trial, {}, out)
    return out


def merged_observation(
    objective: ObjectiveSpec, status: Obj, history: Obj, logs: Sequence[Log]
) -> Obj:
    """The observation after `logs`: the stored min/max/latest stand for every older value
    (summarise picks from them what it would pick from all), the new values are added."""
    old: list[MetricLog] = []
    last_time = {
        name: parse_time_or(points[-1][2]) for name, points in metrichistory.read(history).items()
    }
    for metric in (status.get("observation") or {}).get("metrics") or []:
        name = metric.get("name") or ""
        for key in ("min", "max"):
            value = metric.get(key)
            if value and value != UNAVAILABLE:
                old.append(MetricLog(name, str(value), -math.inf))
        latest = metric.get("latest")
        if latest and latest != UNAVAILABLE:
            old.append(MetricLog(name, str(latest), last_time.get(name, -math.inf)))
    new = [MetricLog(log.name, log.value, log.epoch) for log in logs]
    return observations.summarise(objective, [*old, *new]).to_wire()


def _answer(entry: _Pending) -> Obj:
    if entry.error is not None:
        raise entry.error
    assert entry.result is not None
    return entry.result


def refuse_finished(namespace: str, trial: str, status: Obj) -> None:
    """A finished Trial's result is final: the experiment's optimum and goal were decided from
    it. Checked on every attempt, on the state the patch's precondition is.

    Raises:
        StoreError: FINISHED, naming the condition.
    """
    for condition in status.get("conditions") or []:
        if (
            isinstance(condition, dict)
            and condition.get("type") in conditions.TRIAL_COMPLETED
            and condition.get("status") == conditions.TRUE
        ):
            raise StoreError(
                Code.FINISHED,
                f"trial {namespace}/{trial} is finished ({condition['type']}): its metrics are "
                "final and no report is accepted; report while the trial runs",
            )


def refuse_too_many_metrics(namespace: str, trial: str, status: Obj, logs: Sequence[Log]) -> None:
    """A Trial keeps at most `observations.MAX_METRICS` metrics: every metric keeps at least its
    latest value, so only a bound on their number bounds the history (10,000 names made a
    1 MB Trial).

    Raises:
        StoreError: INVALID, naming the count, the limit and the fix.
    """
    names = set(metrichistory.read(status)) | {log.name for log in logs}
    if len(names) > observations.MAX_METRICS:
        where = f"{namespace}/{trial}" if namespace else trial
        raise StoreError(
            Code.INVALID,
            f"trial {where} would have {len(names)} metrics, more than "
            f"{observations.MAX_METRICS}: report fewer distinct metric names",
        )


def parse_time_or(text: str, default: float = -math.inf) -> float:
    try:
        return parse_time(text, "time")
    except StoreError:
        return default


@dataclass(eq=False)
class _Pending:
    """One report waiting for the write that holds it. `wake` is set once: when it is answered
    (`finished`) or when it is handed the writing (`lead`)."""

    logs: list[Log]
    deadline: float
    wake: threading.Event
    taken: bool = False
    lead: bool = False
    finished: bool = False
    result: Obj | None = None
    error: StoreError | None = None


@dataclass(eq=False)
class _Queue:
    """The reports of one Trial not yet written, and the last write's answer while busy."""

    pending: list[_Pending]
    stored: Obj | None = None


class Store:
    """The three operations on Trials through one API client (safe to share among threads)."""

    def __init__(self, kube: Kube, namespace: str | None = None, recent: int = 100) -> None:
        self.kube = kube
        self.namespace = namespace
        # With one namespace: the last written state of up to `recent` Trials, the base of
        # their next report instead of a GET (a stale one only costs a conflict and a read).
        # Across namespaces every report looks the name up, so a Trial of the same name made
        # in another namespace is still reported as ambiguous.
        self._recent: OrderedDict[str, Obj] = OrderedDict()
        self._recent_max = recent if namespace else 0
        # Trial name -> its queue while one of this process's threads writes it; the reports
        # of other replicas are resolved by the resourceVersion precondition and a retry.
        self._queues: dict[str, _Queue] = {}
        self._queues_lock = threading.Lock()

    def _timeout(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise StoreError(Code.DEADLINE, "the request's deadline passed; nothing was written")
        return min(left, 30.0)

    def find(self, trial: str, deadline: float) -> Obj:
        """The Trial named `trial`, read from the API server (never a cache: a report
        re-applies on what is stored).

        Raises:
            StoreError: NOT_FOUND, AMBIGUOUS (the namespaces are named), DEADLINE, UNAVAILABLE.
        """
        try:
            object_name(trial)
            if self.namespace:
                found = self.kube.get_or_none(
                    TRIALS, trial, self.namespace, timeout=self._timeout(deadline)
                )
                items = [found] if found is not None else []
            else:
                self._timeout(deadline)
                items = self.kube.list_all(TRIALS, None, field_selector=f"metadata.name={trial}")
        except errors.InvalidName as e:
            raise StoreError(
                Code.INVALID, f"trial_name {trial!r} is not a Trial name: {e}"
            ) from None
        except errors.ApiError as e:
            raise StoreError(Code.UNAVAILABLE, f"cannot read trial {trial}: {e}") from e
        if not items:
            where = f"namespace {self.namespace}" if self.namespace else "any namespace"
            raise StoreError(Code.NOT_FOUND, f"trial {trial} not found in {where}")
        if len(items) > 1:
            spaces = sorted((t.get("metadata") or {}).get("namespace") or "" for t in items)
            raise StoreError(
                Code.AMBIGUOUS,
                f"trial {trial} exists in namespaces {', '.join(spaces)}: Katib's API names no "
                "namespace; run one db-manager per namespace (--watch-namespace)",
            )
        return items[0]

    def report(self, trial: str, logs: Sequence[tuple[str, str, str]], deadline: float) -> Obj:
        """Add the values to the Trial; returns the Trial as patched.

        Raises:
            StoreError: invalid values or time stamps (nothing written), no such trial, the
                deadline passed or the API server kept failing: the caller must not take the
                values as stored.
        """
        checked = checked_logs(trial, logs, time.time())
        mine = _Pending(checked, deadline, threading.Event())
        with self._queues_lock:
            queue = self._queues.get(trial)
            if queue is None:
                queue = self._queues[trial] = _Queue([])
                mine.lead = True
            queue.pending.append(mine)
        while not mine.lead:
            # Taken into a write: its answer comes whatever the deadline (the patch's own
            # timeout bounds it). Not taken by the deadline: withdrawn, nothing written.
            timeout = None if mine.taken else max(0.0, deadline - time.monotonic())
            woke = mine.wake.wait(timeout)
            with self._queues_lock:
                if mine.finished:
                    return _answer(mine)
                if not woke and not mine.taken and not mine.lead:
                    queue.pending.remove(mine)
                    raise StoreError(
                        Code.DEADLINE, "the request's deadline passed; nothing was written"
                    )
        self._write(trial, queue, mine)
        return _answer(mine)

    def _write(self, trial: str, queue: _Queue, mine: _Pending) -> None:
        """Write batches of the queue until `mine` is answered, then hand the writing to the
        next waiting report (its thread goes on), or drop the queue when none is left."""
        try:
            while not mine.finished:
                with self._queues_lock:
                    batch, queue.pending = queue.pending, []
                    for entry in batch:
                        entry.taken = True
                result: Obj | None = None
                error: StoreError | None = None
                try:
                    latest = max(entry.deadline for entry in batch)
                    stored = queue.stored or self._recall(trial) or self.find(trial, latest)
                    namespace = stored["metadata"]["namespace"]
                    logs = [log for entry in batch for log in entry.logs]
                    result = queue.stored = self._report(trial, namespace, stored, logs, latest)
                    self._remember(trial, result)
                except StoreError as e:
                    queue.stored, error = None, e
                    self._forget(trial)
                except BaseException as e:
                    queue.stored = None
                    self._forget(trial)
                    error = StoreError(Code.UNAVAILABLE, f"cannot write trial {trial}: {e!r}")
                    raise
                finally:
                    with self._queues_lock:
                        for entry in batch:
                            entry.result, entry.error, entry.finished = result, error, True
                            entry.wake.set()
        finally:
            with self._queues_lock:
                if queue.pending:
                    queue.pending[0].lead = True
                    queue.pending[0].wake.set()
                else:
                    del self._queues[trial]

    def _recall(self, trial: str) -> Obj | None:
        with self._queues_lock:
            return self._recent.get(trial)

    def _remember(self, trial: str, stored: Obj) -> None:
        if not self._recent_max:
            return
        with self._queues_lock:
            self._recent[trial] = stored
            self._recent.move_to_end(trial)
            while len(self._recent) > self._recent_max:
                self._recent.popitem(last=False)

    def _forget(self, trial: str) -> None:
        with self._queues_lock:
            self._recent.pop(trial, None)

    def _report(
        self, trial: str, namespace: str, stored: Obj, checked: list[Log], deadline: float
    ) -> Obj:
        attempt = 0
        while True:
            attempt += 1
            status = stored.get("status") or {}
            refuse_finished(namespace, trial, status)
            refuse_too_many_metrics(namespace, trial, status, checked)
            history = metrichistory.History.from_status(status)
            for log in checked:
                history.append(log.name, log.value, log.time)
            wire = history.to_wire()
            patch: Obj = {
                "metadata": {"resourceVersion": stored["metadata"]["resourceVersion"]},
                "status": {metrichistory.FIELD: wire},
            }
            objective = (stored.get("spec") or {}).get("objective")
            if objective:
                patch["status"]["observation"] = merged_observation(
                    ObjectiveSpec.model_validate(objective),
                    status,
                    {metrichistory.FIELD: wire},
                    checked,
                )
            try:
                self._timeout(deadline)
                return self.kube.patch(TRIALS, trial, patch, namespace, subresource="status")
            except errors.Conflict:
                # Written meanwhile (another replica): read again and re-apply, after a
                # random pause growing to 0.5 s so that replicas stop colliding.
                time.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))
            except errors.NotFound:
                raise StoreError(Code.NOT_FOUND, f"trial {namespace}/{trial} was deleted") from None
            except errors.ApiError as e:
                raise StoreError(
                    Code.UNAVAILABLE, f"cannot write trial {namespace}/{trial}: {e}"
                ) from e
            try:
                stored = self.kube.get(TRIALS, trial, namespace, timeout=self._timeout(deadline))
            except errors.NotFound:
                raise StoreError(Code.NOT_FOUND, f"trial {namespace}/{trial} was deleted") from None
            except errors.ApiError as e:
                raise StoreError(Code.UNAVAILABLE, f"cannot read trial {trial}: {e}") from e

    def get(
        self, trial: str, metric: str, start: str, end: str, deadline: float
    ) -> list[tuple[str, str, str]]:
        """The kept (time, metric name, value) of the Trial, by time; `metric`, `start` and
        `end` (RFC3339, inclusive) filter when not empty, as in Katib."""
        low = parse_time(start, "start_time") if start else -math.inf
        high = parse_time(end, "end_time") if end else math.inf
        stored = self.find(trial, deadline)
        rows: list[tuple[float, int, str, str, str]] = []
        for name, points in metrichistory.read(stored.get("status")).items():
            if metric and name != metric:
                continue
            for step, value, stamp in points:
                epoch = parse_time_or(stamp, 0.0)
                if low <= epoch <= high:
                    rows.append((epoch, step, stamp, name, value))
        rows.sort(key=lambda r: (r[0], r[1]))
        return [(stamp, name, value) for _, _, stamp, name, value in rows]

    def delete(self, trial: str, deadline: float) -> None:
        """Remove the Trial's history (the observation, the trial's result, stays), guarded by
        the resourceVersion read like every Trial status write (a Conflict reads again)."""
        while True:
            stored = self.find(trial, deadline)
            meta = stored["metadata"]
            patch = {
                "metadata": {"resourceVersion": meta["resourceVersion"]},
                "status": {metrichistory.FIELD: None},
            }
            try:
                self._timeout(deadline)
                self.kube.patch(TRIALS, trial, patch, meta["namespace"], subresource="status")
                return
            except errors.Conflict:
                continue
            except errors.NotFound:
                raise StoreError(
                    Code.NOT_FOUND, f"trial {meta['namespace']}/{trial} was deleted"
                ) from None
            except errors.ApiError as e:
                raise StoreError(Code.UNAVAILABLE, f"cannot write trial {trial}: {e}") from e
