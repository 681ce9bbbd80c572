"""An Experiment's parameters as internal distributions, and values back and forth as Katib text.

Neighbours: `sampling` asks samplers for points in these internal distributions (`to_optuna`
gives Optuna's own); `studying` replays Katib assignments into the study with `to_internal`;
assignments are written with `to_external`; `draw` is a uniform point for the algorithms that
need no model (random, hyperband's first rung, pbt's first generation).

The distributions here are plain dataclasses with Optuna's field names, so that a process
running random or grid never imports Optuna (about half a CPU-second at every start).

Mapping (nothing is dropped; upstream's Optuna service refused normal/logNormal, #2666):
- int / double, uniform or logUniform: `IntDistribution` / `FloatDistribution` with `log`, and
  the step where Optuna allows it (it refuses step together with log: then the point is drawn on
  the log scale and rounded to the step grid `min + k*step`).
- normal / logNormal: the internal variable is the normal CDF `u` in [Φ(-3), Φ(3)] and the
  value is `μ + σ·Φ⁻¹(u)` with μ = (min+max)/2, σ = (max−min)/6 (hyperopt's
  choice), on the log scale for logNormal. A uniform draw of `u` is thus a normal draw truncated to
  [min, max] (upstream hyperopt did not truncate), and model-based samplers learn in `u`, a
  monotone transform of the value. int and stepped doubles are rounded to their grid afterwards.
- discrete / categorical: `CategoricalDistribution` of the list (as text).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from kubetune.api.experiment import Distribution, ParameterSpec, ParameterType

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

_STANDARD = NormalDist()
_U_LOW = _STANDARD.cdf(-3.0)
_U_HIGH = _STANDARD.cdf(3.0)


@dataclass(frozen=True)
class FloatDistribution:
    """Reals in [low, high]: on the log scale when `log`, on `low + k*step` when `step`."""

    low: float
    high: float
    step: float | None = None
    log: bool = False


@dataclass(frozen=True)
class IntDistribution:
    """Integers `low + k*step` in [low, high], drawn on the log scale when `log`."""

    low: int
    high: int
    step: int = 1
    log: bool = False


@dataclass(frozen=True)
class CategoricalDistribution:
    choices: tuple[str, ...]


Internal = FloatDistribution | IntDistribution | CategoricalDistribution


@dataclass(frozen=True)
class Dimension:
    """One parameter: its internal distribution and the conversions to and from Katib text."""

    name: str
    distribution: Internal
    to_external: Callable[[Any], str]
    to_internal: Callable[[str], Any]


def format_float(value: float) -> str:
    """Short text for a float that went through a step grid (0.1+0.2 prints as 0.3)."""
    return repr(round(value, 10))


def _quantizer(
    low: float, high: float, step: float | None, integer: bool
) -> Callable[[float], str]:
    def external(value: float) -> str:
        value = min(max(value, low), high)
        if step:
            k = round((value - low) / step)
            value = low + k * step
            if value > high + 1e-9:
                value -= step
        if integer:
            return str(round(value))
        return format_float(value) if step else repr(float(value))

    return external


def _numeric(parameter: ParameterSpec) -> Dimension:
    space = parameter.feasible_space
    integer = parameter.parameter_type == ParameterType.INT
    low, high = float(space.min or 0), float(space.max or 0)
    step = float(space.step) if space.step not in (None, "") else None
    if integer and not step:
        step = 1.0
    distribution = space.distribution or Distribution.UNIFORM
    log = distribution in (Distribution.LOG_UNIFORM, Distribution.LOG_NORMAL)
    quantize = _quantizer(low, high, step, integer)

    if distribution in (Distribution.NORMAL, Distribution.LOG_NORMAL):
        lo, hi = (math.log(low), math.log(high)) if log else (low, high)
        mu, sigma = (lo + hi) / 2, (hi - lo) / 6 or 1.0

        def normal_external(u: float) -> str:
            z = mu + sigma * _STANDARD.inv_cdf(min(max(u, _U_LOW), _U_HIGH))
            return quantize(math.exp(z) if log else z)

        def normal_internal(text: str) -> float:
            value = float(text)
            z = math.log(value) if log else value
            return min(max(_STANDARD.cdf((z - mu) / sigma), _U_LOW), _U_HIGH)

        return Dimension(
            parameter.name, FloatDistribution(_U_LOW, _U_HIGH), normal_external, normal_internal
        )

    internal: Internal
    if integer:
        int_dist: IntDistribution
        istep = int(step or 1)
        if log and istep != 1:
            int_dist = IntDistribution(int(low), int(high), log=True)
        else:
            top = int(low) + (int(high) - int(low)) // istep * istep
            int_dist = IntDistribution(int(low), top, step=istep, log=log)

        def int_internal(text: str) -> int:
            return round(float(text))

        return Dimension(parameter.name, int_dist, lambda v: quantize(float(v)), int_internal)
    if step and not log:
        last = low + math.floor((high - low) / step + 1e-9) * step
        internal = FloatDistribution(low, round(last, 10), step=step)
    else:
        internal = FloatDistribution(low, high, log=log)
    return Dimension(parameter.name, internal, lambda v: quantize(float(v)), float)


def _choice(parameter: ParameterSpec) -> Dimension:
    values = tuple(parameter.feasible_space.values or ())

    def internal(text: str) -> str:
        if text not in values:
            raise ValueError(f"{text!r} is not in the list of {parameter.name}")
        return text

    return Dimension(parameter.name, CategoricalDistribution(values), str, internal)


def build(parameters: Sequence[ParameterSpec]) -> list[Dimension]:
    """The dimensions of a (validated, see `kubetune.algorithmsettings`) search space."""
    return [
        _numeric(p) if p.parameter_type in (ParameterType.INT, ParameterType.DOUBLE) else _choice(p)
        for p in parameters
    ]


def to_optuna(distribution: Internal) -> BaseDistribution:
    """Optuna's distribution of the same name and fields (which validates them)."""
    from optuna import distributions as optuna_distributions

    if isinstance(distribution, CategoricalDistribution):
        return optuna_distributions.CategoricalDistribution(distribution.choices)
    if isinstance(distribution, IntDistribution):
        return optuna_distributions.IntDistribution(
            distribution.low, distribution.high, step=distribution.step, log=distribution.log
        )
    return optuna_distributions.FloatDistribution(
        distribution.low, distribution.high, step=distribution.step, log=distribution.log
    )


def distributions(space: Sequence[Dimension]) -> dict[str, BaseDistribution]:
    """The space as Optuna's distributions, for a study's `ask`."""
    return {d.name: to_optuna(d.distribution) for d in space}


def draw(space: Sequence[Dimension], rng: random.Random) -> dict[str, Any]:
    """A uniform point in the internal space (distribution and step honoured)."""
    params: dict[str, Any] = {}
    for d in space:
        dist = d.distribution
        if isinstance(dist, CategoricalDistribution):
            params[d.name] = rng.choice(dist.choices)
        elif isinstance(dist, IntDistribution):
            if dist.log:
                value = math.exp(rng.uniform(math.log(dist.low), math.log(dist.high)))
                params[d.name] = min(max(round(value), dist.low), dist.high)
            else:
                params[d.name] = dist.low + rng.randint(0, (dist.high - dist.low) // dist.step) * (
                    dist.step
                )
        elif dist.log:
            params[d.name] = math.exp(rng.uniform(math.log(dist.low), math.log(dist.high)))
        elif dist.step is not None:
            count = round((dist.high - dist.low) / dist.step)
            params[d.name] = dist.low + rng.randint(0, count) * dist.step
        else:
            params[d.name] = rng.uniform(dist.low, dist.high)
    return params


def external(space: Sequence[Dimension], params: dict[str, Any]) -> dict[str, str]:
    return {d.name: d.to_external(params[d.name]) for d in space}


def internal(space: Sequence[Dimension], assignment: dict[str, str]) -> dict[str, Any]:
    """Raises KeyError/ValueError when an assignment does not fit the space."""
    return {d.name: d.to_internal(assignment[d.name]) for d in space}
