"""New points from each algorithm, as internal parameter dicts of `searchspaces`.

Neighbours: `studying` owns the study (storage, replay, telling) and calls `propose` for the
points it still needs; every point becomes a study trial there.

- random (in a study: warm start, or a volume from before `indexed`), tpe, multivariate-tpe,
  cmaes, sobol: Optuna samplers (`RandomSampler`, `TPESampler`
  with `constant_liar` as upstream forced, `CmaEsSampler`, `QMCSampler(qmc_type="sobol")`);
  the study asks them directly (`ask_sampler`). On a multi-objective study (one direction per
  objective) random, sobol and both TPEs work unchanged: TPE splits the trials by
  non-domination instead of by one value.
- nsga2, nsga3: Optuna's genetic samplers (`NSGAIISampler`, `NSGAIIISampler`), single or
  multi-objective; a generation is `population_size` trials, bred from the previous ones.
- grid: `indexed.grid_point` (a pure function of space, seed and index); a study asks it only
  when it already holds the Experiment (warm start, or a volume from before `indexed`).
- bayesianoptimization: scikit-optimize's `Optimizer` (as upstream), refitted on every call from
  the study's finished trials (minimisation; values negated for maximize), pending trials told
  with the best value so far (constant liar), `ask(n_points=n)`. Beyond `BO_MAX_POINTS`
  finished trials the model sees the best third and the most recent rest, so a call stays
  bounded: a GP refit is cubic in its points, and on the full history of 1,000 trials one
  assignment took 227 s (bench/suggestion_algorithms.py), far over Katib's 60 s timeout.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from kubetune.algorithmsettings import Value
from kubetune_suggestion_algorithm import searchspaces
from kubetune_suggestion_algorithm.searchspaces import (
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

BO_MAX_POINTS = 200
SAMPLER_ALGORITHMS = ("random", "tpe", "multivariate-tpe", "cmaes", "sobol", "nsga2", "nsga3")


def _int(value: Value) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def derived_seed(seed: int, n_trials: int) -> int:
    """A seed for the pass after `n_trials` trials: fixed by (seed, n), unrelated across n."""
    return random.Random(f"{seed}/{n_trials}").randrange(2**32)


def sampler(
    algorithm: str, settings: dict[str, Value], seed: int, n_trials: int
) -> optuna.samplers.BaseSampler:
    """The Optuna sampler for one pass; `seed` is the study's, shifted by `n_trials` so a new
    process does not repeat the random draws of the previous one (except Sobol, whose scramble
    must stay the same for the sequence to continue)."""
    shifted = derived_seed(seed, n_trials)
    if algorithm == "random":
        return optuna.samplers.RandomSampler(seed=shifted)
    if algorithm in ("tpe", "multivariate-tpe"):
        gamma = float(settings.get("gamma") or 0.25)
        extra: dict[str, Any] = {}
        prior_weight = float(settings.get("prior_weight") or 1.0)
        if prior_weight != 1.0:  # deprecated in Optuna 4.9; passed only when asked for
            extra["prior_weight"] = prior_weight
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return optuna.samplers.TPESampler(
                n_startup_trials=_int(settings.get("n_startup_trials")) or 0,
                n_ei_candidates=_int(settings.get("n_ei_candidates")) or 24,
                gamma=lambda n: min(int(-(-gamma * n // 1)), 25),
                multivariate=algorithm == "multivariate-tpe",
                constant_liar=True,
                seed=shifted,
                **extra,
            )
    if algorithm == "cmaes":
        strategy = settings.get("restart_strategy")
        sigma = settings.get("sigma")
        return optuna.samplers.CmaEsSampler(
            sigma0=float(sigma) if isinstance(sigma, int | float) else None,
            n_startup_trials=_int(settings.get("n_startup_trials")) or 0,
            restart_strategy=None if strategy in (None, "none") else str(strategy),
            seed=shifted,
            warn_independent_sampling=False,
        )
    if algorithm in ("nsga2", "nsga3"):
        return genetic_sampler(algorithm, settings, shifted)
    if algorithm == "sobol":
        return optuna.samplers.QMCSampler(
            qmc_type="sobol",
            scramble=bool(settings.get("scramble", True)),
            seed=seed % (2**32),
            warn_independent_sampling=False,
            warn_asynchronous_seeding=False,
        )
    raise ValueError(f"algorithm {algorithm} has no Optuna sampler")


def genetic_sampler(
    algorithm: str, settings: dict[str, Value], seed: int
) -> optuna.samplers.BaseSampler:
    """NSGA-II or NSGA-III with the Experiment's settings (`algorithmsettings`)."""

    def number(name: str, default: float | None) -> float | None:
        value = settings.get(name)
        return float(value) if isinstance(value, int | float) else default

    common: dict[str, Any] = {
        "population_size": _int(settings.get("population_size")) or 50,
        "mutation_prob": number("mutation_prob", None),
        "crossover_prob": number("crossover_prob", 0.9),
        "swapping_prob": number("swapping_prob", 0.5),
        "seed": seed,
    }
    if algorithm == "nsga2":
        return optuna.samplers.NSGAIISampler(**common)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.NSGAIIISampler(
            dividing_parameter=_int(settings.get("dividing_parameter")) or 3, **common
        )


def _skopt_dimensions(space: Sequence[searchspaces.Dimension]) -> list[Any]:
    from skopt.space import Categorical, Integer, Real  # type: ignore[import-untyped]

    out: list[Any] = []
    for d in space:
        dist = d.distribution
        if isinstance(dist, CategoricalDistribution):
            out.append(Categorical([str(c) for c in dist.choices], name=d.name))
        elif isinstance(dist, IntDistribution):
            if dist.step != 1:
                out.append(Integer(0, (dist.high - dist.low) // dist.step, name=d.name))
            else:
                prior = "log-uniform" if dist.log else "uniform"
                out.append(Integer(dist.low, dist.high, prior=prior, name=d.name))
        elif isinstance(dist, FloatDistribution):
            if dist.step is not None:
                count = round((dist.high - dist.low) / dist.step)
                out.append(Integer(0, count, name=d.name))
            else:
                prior = "log-uniform" if dist.log else "uniform"
                out.append(Real(dist.low, dist.high, prior=prior, name=d.name))
    return out


def _to_skopt(space: Sequence[searchspaces.Dimension], params: dict[str, Any]) -> list[Any]:
    point: list[Any] = []
    for d in space:
        dist, value = d.distribution, params[d.name]
        if (isinstance(dist, IntDistribution) and dist.step != 1) or (
            isinstance(dist, FloatDistribution) and dist.step is not None
        ):
            point.append(round((value - dist.low) / dist.step))
        elif isinstance(dist, CategoricalDistribution):
            point.append(str(value))
        else:
            point.append(value)
    return point


def _from_skopt(space: Sequence[searchspaces.Dimension], point: Sequence[Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for d, value in zip(space, point, strict=True):
        dist = d.distribution
        if isinstance(dist, IntDistribution):
            params[d.name] = dist.low + int(value) * dist.step if dist.step != 1 else int(value)
        elif isinstance(dist, FloatDistribution):
            params[d.name] = (
                dist.low + int(value) * dist.step if dist.step is not None else float(value)
            )
        else:
            params[d.name] = str(value)
    return params


def bayesian(
    space: Sequence[searchspaces.Dimension],
    settings: dict[str, Value],
    trials: Sequence[FrozenTrial],
    maximize: bool,
    n: int,
    seed: int,
) -> list[dict[str, Any]]:
    """`n` points from scikit-optimize fitted on the study's trials."""
    from skopt import Optimizer  # type: ignore[import-untyped]

    finished = [
        t for t in trials if t.state == TrialState.COMPLETE and t.value is not None and t.params
    ]
    sign = -1.0 if maximize else 1.0
    loss = {t.number: sign * float(t.value or 0.0) for t in finished}
    if len(finished) > BO_MAX_POINTS:
        best = sorted(finished, key=lambda t: loss[t.number])
        keep = {t.number for t in best[: BO_MAX_POINTS // 3]}
        recent = [t for t in reversed(finished) if t.number not in keep]
        keep |= {t.number for t in recent[: BO_MAX_POINTS - len(keep)]}
        finished = [t for t in finished if t.number in keep]
    optimizer = Optimizer(
        _skopt_dimensions(space),
        base_estimator=str(settings.get("base_estimator") or "GP"),
        n_initial_points=_int(settings.get("n_initial_points")) or 0,
        acq_func=str(settings.get("acq_func") or "gp_hedge"),
        acq_optimizer=str(settings.get("acq_optimizer") or "auto"),
        random_state=derived_seed(seed, len(trials)),
    )
    xs = [_to_skopt(space, t.params) for t in finished]
    ys = [loss[t.number] for t in finished]
    pending = [t for t in trials if t.state == TrialState.RUNNING and t.params]
    if pending and ys:
        xs += [_to_skopt(space, t.params) for t in pending]
        ys += [min(ys)] * len(pending)
    if xs:
        optimizer.tell(xs, ys)
    points = optimizer.ask(n_points=n) if n > 1 else [optimizer.ask()]
    return [_from_skopt(space, p) for p in points]
