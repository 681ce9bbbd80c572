"""Early-stopping rules from the succeeded Trials' metric histories (docs/user-guide.md).

Computed here, where kubetune computes suggestions, and attached to the new assignments in
`status.suggestions[].earlyStoppingRules` (the experiment-controller copies them into the
Trial's `spec.earlyStoppingRules`, the webhook into the collector's arguments), as upstream's
rules travel. A rule says: from the `startStep`-th report on, stop the trial once its best
objective so far is worse than `value`.

* `medianstop`: per succeeded Trial the average of its first `start_step` objective values;
  once `min_trials_required` Trials have one, the rule's value is the MEDIAN of those averages.
  Deliberate difference: upstream's service takes their mean, although its name and docs say
  median.
* `optuna-median` / `optuna-percentile`: Optuna's MedianPruner / PercentilePruner asked about
  a trial at report `n_warmup_steps` (0-based), the succeeded Trials' histories being its
  completed trials. The pruner's threshold is found by bisection over the value (its decision
  is monotone in it), so the rule is exactly where the pruner would prune at that step; the
  collector then keeps applying that threshold at later reports (Optuna would recompute it per
  step).
* `optuna-successive-halving`: Optuna's SuccessiveHalvingPruner at its first rung only (report
  `min_resource * reduction_factor ** min_early_stopping_rate`), the succeeded Trials' values
  at that report being the rung's competitors; the threshold is one of those values, found
  by a binary search over them asking the pruner. Later rungs are not
  expressed (a rule is fixed when the Trial is created), and the collector compares the best
  value so far where Optuna compares the value at the rung.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from kubetune import conditions, earlystopping, metrichistory, observations
from kubetune.algorithmsettings import Value
from kubetune.api.base import Condition
from kubetune.api.common import ComparisonType, EarlyStoppingRule, EarlyStoppingSpec, ObjectiveType
from kubetune.conditions import TrialState

if TYPE_CHECKING:
    import optuna

Series = dict[int, float]
"""One Trial's objective history: 0-based report index -> value (kept reports only)."""


def objective_series(trial: Mapping[str, Any], metric: str) -> Series:
    """The kept values of `metric` in the Trial's metric history (`kubetune.metrichistory`);
    values that are not finite numbers (`kubetune.observations.parse_number`: no `1_0`) are
    skipped."""
    out: Series = {}
    for step, value, _ in metrichistory.read(trial.get("status")).get(metric, []):
        number = observations.parse_number(value)
        if number is not None:
            out[step] = number
    return out


def succeeded_series(trials: Iterable[Mapping[str, Any]], metric: str) -> list[Series]:
    """The objective histories of the Succeeded Trials (upstream learns from these only)."""
    out = []
    for trial in trials:
        conds = (trial.get("status") or {}).get("conditions")
        state = conditions.trial_state(
            [Condition.model_validate(c) for c in conds or [] if isinstance(c, dict)]
        )
        if state is TrialState.SUCCEEDED:
            series = objective_series(trial, metric)
            if series:
                out.append(series)
    return out


def _worse(objective_type: ObjectiveType) -> ComparisonType:
    """Worse than the threshold: below it when maximizing, above it when minimizing."""
    return (
        ComparisonType.LESS if objective_type == ObjectiveType.MAXIMIZE else ComparisonType.GREATER
    )


def medianstop(
    histories: Sequence[Series],
    metric: str,
    objective_type: ObjectiveType,
    settings: Mapping[str, Value],
) -> list[EarlyStoppingRule]:
    start_step = int(settings["start_step"] or 4)
    min_trials = int(settings["min_trials_required"] or 3)
    averages = []
    for series in histories:
        first = [series[s] for s in sorted(series)[:start_step]]
        if first:
            averages.append(sum(first) / len(first))
    if len(averages) < min_trials:
        return []
    return [
        EarlyStoppingRule(
            name=metric,
            value=repr(statistics.median(averages)),
            comparison=_worse(objective_type),
            start_step=start_step,
        )
    ]


def _pruner(algorithm: str, settings: Mapping[str, Value]) -> optuna.pruners.BasePruner:
    import optuna  # only the optuna-* rules load it: medianstop and the algorithm start without

    if algorithm == earlystopping.OPTUNA_SUCCESSIVE_HALVING:
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=int(settings["min_resource"] or 1),
            reduction_factor=int(settings["reduction_factor"] or 4),
            min_early_stopping_rate=int(settings["min_early_stopping_rate"] or 0),
            bootstrap_count=int(settings["bootstrap_count"] or 0),
        )
    common = {
        "n_startup_trials": int(settings["n_startup_trials"] or 0),
        "n_warmup_steps": int(settings["n_warmup_steps"] or 0),
        "n_min_trials": int(settings["n_min_trials"] or 1),
    }
    if algorithm == earlystopping.OPTUNA_MEDIAN:
        return optuna.pruners.MedianPruner(**common)
    return optuna.pruners.PercentilePruner(float(settings["percentile"] or 0.0), **common)


def pruner_step(algorithm: str, settings: Mapping[str, Value]) -> int:
    """The 0-based report at which the pruner is asked: after the warm-up, or successive
    halving's first rung (`min_resource * reduction_factor ** min_early_stopping_rate`)."""
    if algorithm == earlystopping.OPTUNA_SUCCESSIVE_HALVING:
        resource = int(settings["min_resource"] or 1)
        factor = int(settings["reduction_factor"] or 4)
        rate = int(settings["min_early_stopping_rate"] or 0)
        return int(resource * factor**rate)
    return int(settings["n_warmup_steps"] or 0)


def _prunes_function(
    algorithm: str,
    settings: Mapping[str, Value],
    histories: Sequence[Series],
    direction: Literal["minimize", "maximize"],
) -> Callable[[float], bool]:
    """Whether Optuna's pruner prunes a trial reporting `value` at `pruner_step`."""
    import optuna

    step = pruner_step(algorithm, settings)
    if algorithm == earlystopping.OPTUNA_SUCCESSIVE_HALVING:
        # The pruner keeps each trial's rung value in the trial's storage: replay the
        # succeeded trials' reports at the rung into a fresh study for every question, so
        # that one question's answer never becomes a competitor of the next.
        rung = [series[step] for series in histories if step in series]

        def halving(value: float) -> bool:
            study = optuna.create_study(direction=direction, pruner=_pruner(algorithm, settings))
            for v in rung:
                done = study.ask()
                done.report(v, step)
                done.should_prune()
                study.tell(done, v)
            probe = study.ask()
            probe.report(value, step)
            return bool(probe.should_prune())

        return halving
    pruner = _pruner(algorithm, settings)
    study = optuna.create_study(direction=direction, pruner=pruner)
    for series in histories:
        study.add_trial(
            optuna.trial.create_trial(
                value=series[max(series)], intermediate_values=series, params={}, distributions={}
            )
        )

    def percentile(value: float) -> bool:
        running = optuna.trial.create_trial(
            state=optuna.trial.TrialState.RUNNING, intermediate_values={step: value}
        )
        return bool(pruner.prune(study, running))

    return percentile


def optuna_pruner(
    algorithm: str,
    histories: Sequence[Series],
    metric: str,
    objective_type: ObjectiveType,
    settings: Mapping[str, Value],
) -> list[EarlyStoppingRule]:
    maximize = objective_type == ObjectiveType.MAXIMIZE
    values = [v for series in histories for v in series.values()]
    if not values:
        return []
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    prunes = _prunes_function(
        algorithm, settings, histories, "maximize" if maximize else "minimize"
    )
    span = max(values) - min(values) + 1.0
    if maximize:
        good, bad = max(values) + span, min(values) - span
    else:
        good, bad = min(values) - span, max(values) + span
    if prunes(good) or not prunes(bad):
        return []  # too few trials yet (n_startup_trials, n_min_trials): the pruner never prunes
    if algorithm == earlystopping.OPTUNA_SUCCESSIVE_HALVING:
        # Promotion is "within the best 1/reduction_factor of the rung", so its threshold is
        # one of the rung's values: a binary search over them asks the pruner log2(n) times.
        step = pruner_step(algorithm, settings)
        ordered = sorted({s[step] for s in histories if step in s}, reverse=maximize)
        low, high = -1, len(ordered)  # ordered[low] kept (or none), ordered[high] pruned
        while high - low > 1:
            index = (low + high) // 2
            if prunes(ordered[index]):
                high = index
            else:
                low = index
        if low >= 0:
            return [_rule(metric, ordered[low], objective_type, step + 1)]
        bad = ordered[0]
    while True:  # bisect to adjacent floats: `good` kept, `bad` pruned
        middle = (good + bad) / 2
        if middle in (good, bad):
            break
        if prunes(middle):
            bad = middle
        else:
            good = middle
    return [_rule(metric, good, objective_type, pruner_step(algorithm, settings) + 1)]


def _rule(
    metric: str, value: float, objective_type: ObjectiveType, start: int
) -> EarlyStoppingRule:
    return EarlyStoppingRule(
        name=metric, value=repr(value), comparison=_worse(objective_type), start_step=start
    )


def compute(
    spec: EarlyStoppingSpec,
    trials: Iterable[Mapping[str, Any]],
    metric: str,
    objective_type: ObjectiveType,
) -> list[EarlyStoppingRule]:
    """The rules for Trials created now ([] while there is too little to go on).

    Raises:
        ValueError: the settings are invalid (the webhook refuses them up front).
    """
    settings = earlystopping.parse(spec.algorithm_name, spec.algorithm_settings)
    histories = succeeded_series(trials, metric)
    if spec.algorithm_name == earlystopping.MEDIANSTOP:
        return medianstop(histories, metric, objective_type, settings)
    return optuna_pruner(spec.algorithm_name, histories, metric, objective_type, settings)
