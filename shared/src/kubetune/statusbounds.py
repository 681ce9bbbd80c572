"""The bounds of what a Trial's `status.observation` and `status.metricHistory` may hold.

One check for the authorizer of trial pods' status writes (which refuses), the collector's
tests (whatever it writes must pass) and the experiment-controller (which ignores what fails,
so one Trial cannot blow up the Experiment status or the controller's memory): at most
`metricbounds.MAX_METRICS` metrics, every name and value accepted by
`observations.metric_error`, and a history of at most `metrichistory.MAX_BYTES` (+
`HISTORY_SLACK`) as compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kubetune import metrichistory, observations

HISTORY_SLACK = 1024
"""Bytes a stored history may exceed `metrichistory.MAX_BYTES` by (writers bound an estimate)."""
OBSERVATION = "observation"
_FIELDS = {OBSERVATION: ("min", "max", "latest"), metrichistory.FIELD: ("values",)}
_NUMBERS_ONLY = frozenset({"min", "max"})
"""min and max are numbers (or `unavailable`): text, such as darts' genotype, is only latest."""


def _metric_error(metric: Any, where: str, fields: Sequence[str]) -> str | None:
    """The first name or value of one metric entry that `observations.metric_error` refuses."""
    if not isinstance(metric, dict) or not isinstance(metric.get("name"), str):
        return f"{where}: each metric needs a string name"
    name = metric["name"]
    problem = observations.metric_error(name, observations.UNAVAILABLE)
    if problem:
        return f"{where}.name: {problem}"
    for key in fields:
        values = metric.get(key)
        for value in values if isinstance(values, list) else [values]:
            if value is None:
                continue
            if not isinstance(value, str):
                return f"{where}.{key}: each value must be a string"
            problem = observations.metric_error(name, value, numbers_only=key in _NUMBERS_ONLY)
            if problem:
                return f"{where}.{key}: {problem}"
    return None


def field_error(key: str, value: Any) -> str | None:
    """Why `status.<key>` (`observation` or `metricHistory`) breaks the bounds, or None; the
    message names the field and the limit."""
    where = f"status.{key}"
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"{where} must be an object"
    metrics = value.get("metrics")
    if metrics is not None and not isinstance(metrics, list):
        return f"{where}.metrics must be a list"
    if len(metrics or []) > observations.MAX_METRICS:
        return (
            f"{where}.metrics has {len(metrics or [])} metrics, more than "
            f"{observations.MAX_METRICS}: report fewer metrics"
        )
    if key == metrichistory.FIELD:
        size = metrichistory.serialized_size(value)
        limit = metrichistory.MAX_BYTES + HISTORY_SLACK
        if size > limit:
            return (
                f"{where} is {size} bytes as JSON, more than {limit} "
                f"(metrichistory.MAX_BYTES {metrichistory.MAX_BYTES} + {HISTORY_SLACK}): "
                "keep fewer values (kubetune.metrichistory.History thins them)"
            )
    for i, metric in enumerate(metrics or []):
        problem = _metric_error(metric, f"{where}.metrics[{i}]", _FIELDS[key])
        if problem:
            return problem
    return None


MAX_CONDITION_BYTES = 2048
"""The largest `EarlyStopped` condition a trial pod may write, as compact JSON (the collector's
is about 200 bytes): the one condition a pod writes must not carry data."""
EARLY_STOPPED = "EarlyStopped"


def _early_stopped(status: dict[str, Any]) -> list[Any]:
    return [
        c
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("type") == EARLY_STOPPED
    ]


def condition_error(status: dict[str, Any], before: dict[str, Any]) -> str | None:
    """Why the `EarlyStopped` condition of `status` is too large, or None (unchanged ones pass)."""
    written = _early_stopped(status)
    if written == _early_stopped(before):
        return None
    if len(written) > 1:
        return f"status.conditions has {len(written)} {EARLY_STOPPED} conditions: write one"
    size = len(json.dumps(written, separators=(",", ":")).encode()) if written else 0
    if size > MAX_CONDITION_BYTES:
        return (
            f"the {EARLY_STOPPED} condition is {size} bytes as JSON, more than "
            f"{MAX_CONDITION_BYTES}: keep its reason and message short"
        )
    return None


def status_error(status: dict[str, Any] | None, before: dict[str, Any] | None = None) -> str | None:
    """The first bound the observation, history or `EarlyStopped` condition of `status` breaks,
    or None; with `before` (the stored status), only the fields that differ from it are
    checked."""
    status, before = status or {}, before or {}
    problem = condition_error(status, before)
    if problem:
        return problem
    for key in _FIELDS:
        if key in before and status.get(key) == before.get(key):
            continue
        problem = field_error(key, status.get(key))
        if problem:
            return problem
    return None


__all__: Sequence[str] = [
    "HISTORY_SLACK",
    "MAX_CONDITION_BYTES",
    "condition_error",
    "field_error",
    "status_error",
]
