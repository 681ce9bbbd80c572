"""The early-stopping algorithms kubetune computes itself, and their settings
(docs/user-guide.md, Early stopping).

Two readers agree through this module: the webhook refuses an Experiment whose
`spec.earlyStopping` names an unknown algorithm or carries a bad setting, and the
suggestion-algorithm parses the same settings to compute rules. kubetune computes the rules in
the suggestion-algorithm process (no early-stopping container, so katib-config needs no
`earlyStoppings` entry for these names).

* `medianstop` (upstream's): `min_trials_required` (3, > 0), `start_step` (4, >= 1); unknown
  names are invalid, as upstream's service says.
* `optuna-median`, `optuna-percentile` (beyond upstream): Optuna's MedianPruner and
  PercentilePruner, fed from the Trials' metric histories; `n_startup_trials` (5, >= 1),
  `n_warmup_steps` (0, >= 0), `n_min_trials` (1, >= 1), and for the percentile one `percentile`
  (25.0, in [0, 100]).
* `optuna-successive-halving` (beyond upstream): Optuna's SuccessiveHalvingPruner at its first
  rung; `min_resource` (1, > 0; Optuna's "auto" is not offered), `reduction_factor` (4, >= 2),
  `min_early_stopping_rate` (0, >= 0), `bootstrap_count` (0, >= 0).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubetune.algorithmsettings import Setting, Value, _check_setting
from kubetune.api.common import AlgorithmSetting


def _gt0(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _ge0(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _ge2(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 2


def _percent(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 100


MEDIANSTOP = "medianstop"
OPTUNA_MEDIAN = "optuna-median"
OPTUNA_PERCENTILE = "optuna-percentile"
OPTUNA_SUCCESSIVE_HALVING = "optuna-successive-halving"

_OPTUNA = (
    Setting("n_startup_trials", int, 5, _gt0, "an integer > 0"),
    Setting("n_warmup_steps", int, 0, _ge0, "an integer >= 0"),
    Setting("n_min_trials", int, 1, _gt0, "an integer > 0"),
)

SETTINGS: dict[str, tuple[Setting, ...]] = {
    MEDIANSTOP: (
        Setting("min_trials_required", int, 3, _gt0, "an integer > 0"),
        Setting("start_step", int, 4, _gt0, "an integer >= 1"),
    ),
    OPTUNA_MEDIAN: _OPTUNA,
    OPTUNA_PERCENTILE: (
        *_OPTUNA,
        Setting("percentile", float, 25.0, _percent, "a number in [0, 100]"),
    ),
    OPTUNA_SUCCESSIVE_HALVING: (
        Setting("min_resource", int, 1, _gt0, "an integer > 0"),
        Setting("reduction_factor", int, 4, _ge2, "an integer >= 2"),
        Setting("min_early_stopping_rate", int, 0, _ge0, "an integer >= 0"),
        Setting("bootstrap_count", int, 0, _ge0, "an integer >= 0"),
    ),
}
ALGORITHMS = tuple(SETTINGS)


def validate(algorithm_name: str, settings: Sequence[AlgorithmSetting] | None) -> list[str]:
    """Every problem of `spec.earlyStopping` ([] = usable); each names the field and the fix."""
    field = "spec.earlyStopping"
    if algorithm_name not in SETTINGS:
        return [
            f"{field}.algorithmName: {algorithm_name!r} is unknown; "
            f"use one of {', '.join(ALGORITHMS)}"
        ]
    table = {s.name: s for s in SETTINGS[algorithm_name]}
    problems = []
    seen: set[str] = set()
    for item in settings or ():
        setting = table.get(item.name)
        if setting is None:
            problems.append(
                f"{field}.algorithmSettings: setting {item.name} is unknown for "
                f"{algorithm_name}; known settings: {', '.join(table)}"
            )
            continue
        if item.name in seen:
            problems.append(f"{field}.algorithmSettings: {item.name} given twice; keep one")
            continue
        seen.add(item.name)
        _, problem = _check_setting(algorithm_name, setting, item.name, item.value)
        if problem:
            problems.append(f"{field}.algorithmSettings: {problem}")
    return problems


def parse(algorithm_name: str, settings: Sequence[AlgorithmSetting] | None) -> dict[str, Value]:
    """Typed settings by name, defaults filled in.

    Raises:
        ValueError: `validate` found problems (joined in the message).
    """
    problems = validate(algorithm_name, settings)
    if problems:
        raise ValueError("; ".join(problems))
    table = {s.name: s for s in SETTINGS[algorithm_name]}
    values: dict[str, Value] = {s.name: s.default for s in SETTINGS[algorithm_name]}
    for item in settings or ():
        values[item.name], _ = _check_setting(
            algorithm_name, table[item.name], item.name, item.value
        )
    return values
