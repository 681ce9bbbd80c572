"""`kubetune import-katib`: the metric logs Katib kept in its database, into the Trials.

Katib stores every reported value in the table `observation_logs` of its MySQL or PostgreSQL;
kubetune keeps each Trial's values in `status.metricHistory` (bounded: the first 100 values of
a metric, a thinned remainder and the latest, at most 64 KiB). After a take-over, this command
copies Katib's rows of each Trial into that history, so `kubetune metrics`, the UI and Katib's
SDK (`get_trial_metrics`, through db-manager) show the whole run.

Once per value: Katib's rows become the first reports of each metric. A metric whose kept
values already are Katib's first rows was imported before and is left as it is (or given the
rows Katib wrote since); values kubetune recorded after the take-over (a Push collector reporting
to kubetune's db-manager) are kept after Katib's. The status is written with its
resourceVersion as precondition, so a concurrent writer is never overwritten.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from kubetune import errors, metricbounds, metrichistory, naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube, Obj
from kubetune_cli.katibdb import Row, Source, rows_of
from kubetune_cli.reading import UserError

BATCH = 1000
"""Rows read from Katib's database at once (per Trial)."""

ATTEMPTS = 5
"""Status writes tried per Trial while other writers keep changing it (Conflict)."""

Point = tuple[int, str, str]


@dataclass
class TrialImport:
    """What the import did (or would do) to one Trial."""

    trial: str
    rows: int = 0
    imported: dict[str, int] = field(default_factory=dict)  # metric -> Katib rows added
    skipped: dict[str, str] = field(default_factory=dict)  # metric -> why its rows were left
    wire: dict[str, Any] | None = None  # the new status.metricHistory, None: unchanged

    def line(self, namespace: str, dry_run: bool) -> str:
        where = f"trial {namespace}/{self.trial}"
        if not self.rows:
            return f"{where}: no rows in Katib's database"
        parts = []
        if self.imported:
            verb = "would import" if dry_run else "imported"
            counts = ", ".join(f"{name} {n}" for name, n in self.imported.items())
            parts.append(f"{verb} {sum(self.imported.values())} values ({counts})")
        else:
            parts.append(f"already imported ({self.rows} rows)")
        parts += [f"{name}: {why}" for name, why in self.skipped.items()]
        return f"{where}: " + "; ".join(parts)


@dataclass
class _Katib:
    """A Trial's rows, read once: each metric's history as Katib's alone would be, and whether
    the Trial's kept values at the same steps are these rows."""

    history: metrichistory.History
    counts: dict[str, int]
    differs: set[str]
    skipped: dict[str, str]
    rows: int


def _read_katib(rows: Iterator[Row], stored: Mapping[str, list[Point]]) -> _Katib:
    kept = {name: {s: (v, t) for s, v, t in points} for name, points in stored.items()}
    history = metrichistory.History()
    counts: dict[str, int] = {}
    differs: set[str] = set()
    skipped: dict[str, str] = {}
    total = 0
    for row in rows:
        total += 1
        wrong = metricbounds.metric_error(row.metric, row.value)
        known = row.metric in counts or row.metric in kept
        if wrong is None and not known and len(set(counts) | set(kept)) >= metricbounds.MAX_METRICS:
            wrong = f"a Trial keeps at most {metricbounds.MAX_METRICS} metrics"
        if wrong is not None:
            skipped.setdefault(row.metric, f"row {row.id} and others like it not imported: {wrong}")
            continue
        step = counts.get(row.metric, 0)
        counts[row.metric] = step + 1
        mine = kept.get(row.metric, {}).get(step)
        if mine is not None and mine != (row.value[: metricbounds.MAX_VALUE_CHARS], row.time):
            differs.add(row.metric)
        history.append(row.metric, row.value, row.time)
    return _Katib(history, counts, differs, skipped, total)


def merge(status: Mapping[str, Any] | None, rows: Iterator[Row]) -> tuple[dict[str, Any], _Katib]:
    """The Trial's history with Katib's rows first, and what was learnt reading them.

    Per metric: none stored, or the stored values are Katib's first rows (an earlier import):
    Katib's rows alone; Katib's rows are the first of the stored ones: the stored history;
    else (kubetune's own reports since the take-over) Katib's rows, then the stored values
    after them. The result is fitted to the history's bound.
    """
    stored = metrichistory.read(status)
    katib = _read_katib(rows, stored)
    metrics: list[dict[str, Any]] = []
    katib_wire = {m["name"]: m for m in katib.history.to_wire()["metrics"]}
    for name in dict.fromkeys([*katib_wire, *stored]):
        ours = katib_wire.get(name)
        points = stored.get(name)
        reports = metrichistory.reports(status, name)
        if ours is None or points is None:
            metrics.append(ours if ours is not None else _wire(name, points or [], reports))
            continue
        count = katib.counts[name]
        if name not in katib.differs and reports <= count:
            metrics.append(ours)
        elif name not in katib.differs:
            metrics.append(_wire(name, points, reports))
        else:
            shifted = [(step + count, value, time) for step, value, time in points]
            katib_points = list(zip(ours["steps"], ours["values"], ours["times"], strict=True))
            metrics.append(_wire(name, [*katib_points, *shifted], count + reports))
    fitted = metrichistory.History.from_status({metrichistory.FIELD: {"metrics": metrics}})
    return fitted.to_wire(), katib


def _wire(name: str, points: list[Point], reports: int) -> dict[str, Any]:
    return {
        "name": name,
        "reports": max(reports, points[-1][0] + 1 if points else 0),
        "steps": [p[0] for p in points],
        "values": [p[1] for p in points],
        "times": [p[2] for p in points],
    }


def plan_trial(source: Source, trial: Obj, batch: int = BATCH) -> TrialImport:
    """What importing Katib's rows would change in `trial` (nothing is written)."""
    name = trial["metadata"]["name"]
    status = trial.get("status") or {}
    wire, katib = merge(status, rows_of(source, name, batch))
    result = TrialImport(name, rows=katib.rows, skipped=katib.skipped)
    before = status.get(metrichistory.FIELD) or {"metrics": []}
    if katib.rows and wire != before:
        result.wire = wire
        new = {m["name"]: m["reports"] for m in wire["metrics"]}
        old = {m["name"]: m.get("reports") or 0 for m in before.get("metrics") or []}
        result.imported = {
            name: new[name] - old.get(name, 0)
            for name in katib.counts
            if new.get(name, 0) > old.get(name, 0)
        }
    return result


def import_trial(
    kube: Kube, source: Source, trial: Obj, namespace: str, batch: int = BATCH
) -> TrialImport:
    """Write Katib's rows into the Trial's history; on a Conflict read it again and redo."""
    name = trial["metadata"]["name"]
    for _ in range(ATTEMPTS):
        result = plan_trial(source, trial, batch)
        if result.wire is None:
            return result
        patch = {
            "metadata": {"resourceVersion": trial["metadata"]["resourceVersion"]},
            "status": {metrichistory.FIELD: result.wire},
        }
        try:
            kube.patch(TRIALS, name, patch, namespace, subresource="status")
            return result
        except errors.Conflict:
            trial = kube.get(TRIALS, name, namespace)
    raise UserError(
        f"trial {namespace}/{name} changed {ATTEMPTS} times while importing: run the import again"
    )


def trials_of(kube: Kube, namespace: str, experiment: str | None) -> Iterator[Obj]:
    """The Trials to import, a page at a time: the Experiment's, or the namespace's."""
    selector = None
    if experiment is not None:
        if kube.get_or_none(EXPERIMENTS, experiment, namespace) is None:
            raise UserError(f"no experiment {experiment!r} in namespace {namespace!r}")
        selector = f"{naming.LABEL_EXPERIMENT}={naming.label_value(experiment)}"
    for page in kube.pages(TRIALS, namespace, label_selector=selector):
        yield from page


def run(
    kube: Kube,
    source: Source,
    namespace: str,
    experiment: str | None,
    *,
    dry_run: bool,
    out: TextIO,
    batch: int = BATCH,
) -> int:
    """Import every selected Trial, a line each and a total; returns the Trials changed."""
    changed = values = seen = 0
    for trial in trials_of(kube, namespace, experiment):
        seen += 1
        if dry_run:
            result = plan_trial(source, trial, batch)
        else:
            result = import_trial(kube, source, trial, namespace, batch)
        print(result.line(namespace, dry_run), file=out, flush=True)
        if result.imported:
            changed += 1
            values += sum(result.imported.values())
    scope = f"experiment {namespace}/{experiment}" if experiment else f"namespace {namespace}"
    verb = "would import" if dry_run else "imported"
    print(
        f"{scope}: {verb} {values} values into {changed} of {seen} trials"
        + (" (dry run, nothing changed)" if dry_run else ""),
        file=out,
    )
    return changed
