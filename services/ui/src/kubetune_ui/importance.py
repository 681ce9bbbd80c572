"""Hyperparameter importance of an experiment: Optuna's default evaluator (PED-ANOVA) on a study
rebuilt in memory from the succeeded trials' assignments and objective values.

Bounded: at most `limit` trials (evenly spaced over the run) enter the study; results are
cached per experiment keyed by its finished trials, so a running trial's metric reports never
recompute it, and the cache keeps at most `entries` experiments.
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from typing import TYPE_CHECKING, Any

from kubetune_ui.insight import Parameter, Point, Study, evenly, finished_key
from kubetune_ui.versioned import VersionedCache

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

Obj = dict[str, Any]
Key = tuple[str, str]
EVALUATOR = "PED-ANOVA (Optuna's default importance evaluator)"
# Optuna is imported on the first importance asked for, not when the UI starts: it takes about
# a second to import, and most page views never ask for an importance.


def _distribution(parameter: Parameter, values: list[float | str]) -> BaseDistribution | None:
    """The parameter's distribution spanning the values the trials were given (a trial outside
    the current search space still counts); None when it took a single value."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if len(set(values)) < 2:
        return None
    if not parameter.numeric or parameter.type == "discrete":
        return CategoricalDistribution(sorted(set(values), key=str))
    numbers = [float(v) for v in values]
    low, high = min(numbers), max(numbers)
    if parameter.type == "int":
        return IntDistribution(int(low), int(high))
    return FloatDistribution(low, high, log=parameter.log and low > 0)


def importance(study: Study, limit: int) -> Obj:
    """Each parameter's share of the objective's variation, most important first."""
    import optuna
    from optuna.study import StudyDirection

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    done = study.succeeded()
    chosen: list[Point] = evenly(done, limit)
    answer: Obj = {"of": len(done), "used": len(chosen), "limit": limit, "evaluator": EVALUATOR}
    distributions = {}
    for parameter in study.parameters:
        values = [p.params[parameter.name] for p in chosen if parameter.name in p.params]
        if len(values) == len(chosen):
            made = _distribution(parameter, values)
            if made is not None:
                distributions[parameter.name] = made
    if len(chosen) < 2 or not distributions:
        return {**answer, "importances": [], "message": _why_none(len(chosen), distributions)}
    direction = StudyDirection.MAXIMIZE if study.maximize else StudyDirection.MINIMIZE
    rebuilt = optuna.create_study(direction=direction)
    rebuilt.add_trials(
        optuna.trial.create_trial(
            params={name: p.params[name] for name in distributions},
            distributions=distributions,
            value=p.value,
        )
        for p in chosen
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            scores = optuna.importance.get_param_importances(rebuilt)
        except (ValueError, RuntimeError) as e:
            return {**answer, "importances": [], "message": f"no importance: {e}"}
    return {
        **answer,
        "importances": [{"name": n, "importance": float(v)} for n, v in scores.items()],
        "message": "",
    }


def _why_none(trials: int, distributions: dict[str, BaseDistribution]) -> str:
    if trials < 2:
        return "importance needs at least 2 succeeded trials with an objective value"
    return "no parameter took more than one value"


class ImportanceCache:
    """The last importance per experiment while its finished trials stay the same; at most
    `entries` experiments (the least recently asked for go first). Thread-safe."""

    def __init__(self, limit: int = 2000, entries: int = 64) -> None:
        self.limit = limit
        self.computed = 0
        """How many times an importance was computed (tests read it)."""
        self._lock = threading.Lock()
        self._cache: VersionedCache[Key, Obj] = VersionedCache(entries)

    def get(self, key: Key, study: Study) -> Obj:
        digest = hashlib.blake2b("\n".join(finished_key(study)).encode(), digest_size=16)
        version = digest.digest()
        with self._lock:
            cached = self._cache.get(key, version)
            if cached is not None:
                return cached
            result = importance(study, self.limit)
            self.computed += 1
            return self._cache.put(key, version, result)
