"""Warm start: known results added to the study before its first assignment, exactly once.

Neighbours: `syncing` calls `warm_start` when it builds a `studying.Search` for an Experiment
with `spec.warmStart`; `kubetune.knownresults` reads the sources and holds the rules.

Where the results come from, with no right beyond the algorithm's own: an earlier Experiment's
Succeeded Trials are read through the API (this ServiceAccount already reads Experiments and
Trials in its namespace), and a ConfigMap's `results.json` from the directory the kubelet
mounted it in (the suggestion-controller adds the volume; no ConfigMap right here).

Exactly once: every imported study trial carries its source key (user attribute
`kubetune_known`), and the study keeps the summary (`kubetune_warm_start`). A study that has
the summary is not imported into again: with FromVolume a new pod finds both on the volume
(the sources may be gone by then); an in-memory study is new in every process, so it imports
again. A crash in the middle of an import leaves keyed trials: the next import adds only the
missing ones.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import TrialState

from kubetune import knownresults, multiobjective
from kubetune.api.experiment import Experiment
from kubetune.api.warmstart import WarmStartSource, WarmStartStatus
from kubetune.knownresults import KnownResult
from kubetune.kube import Kube
from kubetune_suggestion_algorithm import searchspaces, studying

log = logging.getLogger(__name__)

KNOWN = "kubetune_known"
SUMMARY = "kubetune_warm_start"
SKIP_REASONS_SHOWN = 5


@dataclass
class Imported:
    """The status to write, and the first reasons for skipping (for the Event)."""

    status: WarmStartStatus
    reasons: list[str]


def _gather(
    kube: Kube, namespace: str, experiment: Experiment, directory: Path
) -> list[tuple[WarmStartSource, list[KnownResult]]]:
    spec = experiment.spec.warm_start
    assert spec is not None
    out: list[tuple[WarmStartSource, list[KnownResult]]] = []
    for name in spec.experiments or []:
        source = WarmStartSource(kind="Experiment", name=name)
        found = knownresults.read_experiment(kube, namespace, name)
        if found is None:
            source.message = (
                f"Experiment {name} not found in {namespace}; before deleting an Experiment, "
                f"keep its results with `kubetune export {name} --config-map NAME`"
            )
            out.append((source, []))
        else:
            out.append((source, found[1]))
    for name in spec.config_maps or []:
        source = WarmStartSource(kind="ConfigMap", name=name)
        path = directory / name / knownresults.KEY
        try:
            out.append((source, knownresults.parse(path.read_text(), f"ConfigMap {name}")))
        except OSError:
            source.message = (
                f"ConfigMap {name} not found in {namespace}, or it has no key {knownresults.KEY}"
            )
            out.append((source, []))
        except knownresults.FormatError as e:
            source.message = str(e)
            out.append((source, []))
    return out


def _values(result: KnownResult, metrics: Sequence[str]) -> list[float] | str:
    """One value per objective, or the first objective metric the result has no number for."""
    values = []
    for metric in metrics:
        value = result.metrics.get(metric)
        if value is None:
            return metric
        values.append(value)
    return values


def warm_start(
    search: studying.Search, kube: Kube, namespace: str, experiment: Experiment, directory: Path
) -> Imported:
    """Import the known results of `experiment.spec.warmStart` into the study, once."""
    study = search.study
    summary = study.user_attrs.get(SUMMARY)
    if isinstance(summary, str):
        return Imported(WarmStartStatus.model_validate_json(summary), [])
    objective = experiment.spec.objective
    metrics = [name for name, _ in multiobjective.targets(objective)] if objective else [""]
    imported = import_known(search, _gather(kube, namespace, experiment, directory), metrics)
    study.set_user_attr(SUMMARY, json.dumps(imported.status.to_wire()))
    log.info(
        "warm start: %d known results imported, %d skipped",
        imported.status.imported,
        imported.status.skipped,
    )
    return imported


def import_known(
    search: studying.Search,
    gathered: list[tuple[WarmStartSource, list[KnownResult]]],
    metrics: Sequence[str],
) -> Imported:
    """Add the results that fit to the study (those already there, by key, are not added
    again), counting per source what came in and what did not."""
    present = {
        t.user_attrs[KNOWN]
        for t in search.study.get_trials(deepcopy=False)
        if KNOWN in t.user_attrs
    }
    reasons: list[str] = []
    total = 0
    for source, results in gathered:
        for i, result in enumerate(results):
            key = f"{source.kind}/{source.name}/{i}"
            why = _add(search, result, metrics, key, present, total)
            if why is None:
                source.imported += 1
                total += 1
            else:
                source.skipped += 1
                if len(reasons) < SKIP_REASONS_SHOWN:
                    reasons.append(f"{result.origin}: {why}")
    sources = [source for source, _ in gathered]
    status = WarmStartStatus(
        imported=sum(s.imported for s in sources),
        skipped=sum(s.skipped for s in sources),
        sources=sources,
    )
    return Imported(status, reasons)


def _add(
    search: studying.Search,
    result: KnownResult,
    metrics: Sequence[str],
    key: str,
    present: set[str],
    total: int,
) -> str | None:
    """Add one known result to the study (unless it is there already); why not, or None."""
    if total >= knownresults.MAX_RESULTS:
        return f"more than {knownresults.MAX_RESULTS} known results"
    values = _values(result, metrics)
    if isinstance(values, str):
        return f"no numeric value of the objective metric {values}"
    misfit = knownresults.misfit(search.parameters, result.assignments)
    if misfit is not None:
        return misfit
    if key in present:
        return None
    try:
        params = searchspaces.internal(search.space, result.assignments)
        trial = optuna.trial.create_trial(
            params=params,
            distributions=search.distributions,
            values=values,
            state=TrialState.COMPLETE,
            user_attrs={KNOWN: key},
        )
    except (KeyError, ValueError) as e:
        return f"does not fit the search space ({e})"
    search.study.add_trial(trial)
    present.add(key)
    return None


EVENT_REASON = "WarmStart"


def event_message(imported: Imported) -> str:
    """What the Experiment's Event says ('' when there was nothing to import)."""
    status = imported.status
    if not status.imported and not status.skipped and not imported.reasons:
        return ""
    text = f"warm start: {status.imported} known results imported, {status.skipped} skipped"
    if imported.reasons:
        text += " (" + "; ".join(imported.reasons) + ")"
    return text
