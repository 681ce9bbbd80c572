"""The settings each suggestion algorithm accepts: names, types, ranges, defaults.

Two readers agree through this module: the suggestion-controller validates an Experiment's
`algorithm.algorithmSettings` before it marks the Suggestion Running (invalid -> Failed with
"Validation failed: <problems>"), and the suggestion-algorithm parses the same settings into typed
values for Optuna / scikit-optimize. Every problem names the setting (or parameter) and the fix.

Names follow Katib: `tpe` accepts both the hyperopt spellings upstream routed it to (`gamma`,
`prior_weight`, `n_EI_candidates`) and Optuna's (`n_startup_trials`, `n_ei_candidates`); the two
spellings of the candidate count are one setting (`n_ei_candidates`).

`hyperband` (upstream's service): `r_l` and `resource_name` are required, `eta`
defaults to 3 (a value ≤ 0 also means 3), and `parallelTrialCount` must hold the first bracket's
`ceil(eta**s_max)` trials at once, `s_max = int(log(r_l) / log(eta))`. Where upstream's service
would crash or loop forever kubetune refuses up front: `eta` in (0, 2) and `r_l` < 1 make
`s_max` negative or divide by zero there. `random_state` is kubetune's (upstream's draws are
unseeded); Katib's service ignores names it does not know, so Experiments carrying it stay valid
for Katib.

`pbt` (upstream's service): `suggestion_trial_dir`, `n_population` (≥ 5) and
`truncation_threshold` ([0, 1]) are required, `resample_probability` ([0, 1]) is optional.
`suggestion_trial_dir` becomes a mountPath in every trial pod, so it must be absolute.

`darts` and `enas` (NAS, `kubetune.nas`): upstream's own checks and messages, word for word
(darts accepts any name; enas refuses unknown ones); `parse` gives their values as text, over
upstream's defaults, since each service converts them its own way.

`grid`: a grid is counted and its points computed (`grid_axis`), never listed, so checking one
costs the same for 3 points as for 9e18: the webhook answers in bounded time and memory. At
most GRID_LIMIT points per parameter and GRID_SIZE_LIMIT in all (upstream's services list the
whole product to count it, and refuse a maxTrialCount above the count; kubetune ends the
Experiment when the grid is used up instead, below).

Algorithm-owned status entries: the algorithm writes `status.algorithmSettings` of the Suggestion;
`SEARCH_EXHAUSTED` there (value "true") says the search space has no new points left (grid), so
the experiment-controller ends the Experiment (reason `ExperimentSuggestionEndReached`) instead of
waiting for assignments that will never come. Status-only names are ignored by `validate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kubetune import nas
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import Distribution, ParameterSpec, ParameterType

Value = int | float | str | bool | None

SEARCH_EXHAUSTED = "search_exhausted"
"""Status-only entry written by the algorithm when the search space is used up (value "true")."""
VALIDATION_FAILED = "kubetune_validation_failed"
"""Status-only entry written by the bridge sidecar when a Katib-protocol image refuses the
settings (its value: upstream's message, "ValidateAlgorithmSettings Error: ..."); the
suggestion-controller turns it into Failed, "Validation failed: <value>", as upstream."""
STATUS_ONLY = frozenset({SEARCH_EXHAUSTED, VALIDATION_FAILED})

GRID_LIMIT = 1_000_000
"""Most grid points one parameter may have (algorithm grid); more is a settings problem."""
GRID_SIZE_LIMIT = 2**31 - 1
"""Most points a whole grid may have: maxTrialCount is an int32, so no Experiment could try
more; a grid beyond that is a random subset of a lattice, which algorithm random does better."""


class SettingsError(ValueError):
    """Settings or parameters an algorithm cannot run with; `.problems` lists each one."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Setting:
    """One setting: its type, the allowed values and the default (None = library default)."""

    name: str
    kind: type  # int, float, str or bool
    default: Value = None
    check: Callable[[Value], bool] | None = None
    rule: str = ""  # the fix, in words: "an integer ≥ 0"
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    required: bool = False


def _ge0(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v >= 0


def _gt0(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v > 0


def _eta(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and (v <= 0 or v >= 2)


def _ge1(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v >= 1


def _ge2(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 2


def _ge5(v: Value) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 5


def _closed01(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1


def _absolute(v: Value) -> bool:
    return isinstance(v, str) and v.startswith("/") and ".." not in v.split("/")


def _open01(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1


_RANDOM_STATE = Setting("random_state", int, None, _ge0, "an integer ≥ 0")
_TPE = (
    Setting("n_startup_trials", int, 10, _ge0, "an integer ≥ 0"),
    Setting("n_ei_candidates", int, 24, _gt0, "an integer > 0", aliases=("n_EI_candidates",)),
    Setting("gamma", float, 0.25, _open01, "a number in (0, 1)"),
    Setting("prior_weight", float, 1.0, _gt0, "a number > 0"),
    _RANDOM_STATE,
)

_NSGA = (
    Setting("population_size", int, 50, _ge2, "an integer ≥ 2"),
    Setting("mutation_prob", float, None, _closed01, "a number in [0, 1] (default 1/parameters)"),
    Setting("crossover_prob", float, 0.9, _closed01, "a number in [0, 1]"),
    Setting("swapping_prob", float, 0.5, _closed01, "a number in [0, 1]"),
    Setting("random_state", int, None, _ge0, "an integer ≥ 0", aliases=("seed",)),
)

SETTINGS: dict[str, tuple[Setting, ...]] = {
    "random": (_RANDOM_STATE,),
    "grid": (_RANDOM_STATE,),
    "tpe": _TPE,
    "multivariate-tpe": _TPE,
    "cmaes": (
        Setting(
            "restart_strategy",
            str,
            "none",
            rule="one of ipop, bipop, none",
            choices=("ipop", "bipop", "none", "None"),
        ),
        Setting("sigma", float, None, _gt0, "a number > 0"),
        Setting("n_startup_trials", int, 0, _ge0, "an integer ≥ 0"),
        _RANDOM_STATE,
    ),
    "sobol": (
        Setting("scramble", bool, True, rule="true or false"),
        _RANDOM_STATE,
    ),
    "bayesianoptimization": (
        Setting(
            "base_estimator",
            str,
            "GP",
            rule="one of GP, RF, ET, GBRT",
            choices=("GP", "RF", "ET", "GBRT"),
        ),
        Setting("n_initial_points", int, 10, _ge0, "an integer ≥ 0"),
        Setting(
            "acq_func",
            str,
            "gp_hedge",
            rule="one of gp_hedge, LCB, EI, PI, EIps, PIps",
            choices=("gp_hedge", "LCB", "EI", "PI", "EIps", "PIps"),
        ),
        Setting(
            "acq_optimizer",
            str,
            "auto",
            rule="one of auto, sampling, lbfgs",
            choices=("auto", "sampling", "lbfgs"),
        ),
        _RANDOM_STATE,
    ),
    "hyperband": (
        Setting(
            "resource_name",
            str,
            None,
            rule="the name of the parameter that carries each trial's resource (e.g. epochs)",
            required=True,
        ),
        Setting(
            "r_l",
            float,
            None,
            _ge1,
            "a number ≥ 1: the largest resource one trial gets",
            required=True,
        ),
        Setting("eta", float, 3.0, _eta, "a number ≥ 2 (≤ 0 means the default 3)"),
        _RANDOM_STATE,
    ),
    "pbt": (
        Setting(
            "suggestion_trial_dir",
            str,
            None,
            _absolute,
            "an absolute path: where each trial finds its checkpoint directory",
            required=True,
        ),
        Setting("n_population", int, None, _ge5, "an integer ≥ 5", required=True),
        Setting(
            "truncation_threshold", float, None, _closed01, "a number in [0, 1]", required=True
        ),
        Setting(
            "resample_probability",
            float,
            None,
            _closed01,
            "a number in [0, 1] (leave it out to perturb by x0.8 or x1.2 instead)",
        ),
        _RANDOM_STATE,
    ),
    # Optuna's genetic samplers (multi-objective, kubetune's; `kubetune.multiobjective`).
    "nsga2": _NSGA,
    "nsga3": (
        *_NSGA,
        Setting("dividing_parameter", int, 3, _ge1, "an integer ≥ 1 (reference point spacing)"),
    ),
    "darts": tuple(Setting(k, str, v) for k, v in nas.DARTS_DEFAULTS.items()),
    "enas": tuple(Setting(k, str, v) for k, v in nas.ENAS_DEFAULTS.items()),
}
ALGORITHMS = tuple(SETTINGS)


def _lookup(algorithm: str) -> dict[str, Setting]:
    table: dict[str, Setting] = {}
    for setting in SETTINGS[algorithm]:
        table[setting.name] = setting
        for alias in setting.aliases:
            table[alias] = setting
    return table


def _convert(setting: Setting, text: str) -> Value:
    """The typed value of `text`, or raise ValueError."""
    if setting.kind is bool:
        lowered = text.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ValueError(text)
    if setting.kind is int:
        number = float(text)
        if not number.is_integer():
            raise ValueError(text)
        return int(number)
    if setting.kind is float:
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(text)
        return number
    return text


def _check_setting(algorithm: str, setting: Setting, name: str, text: str) -> tuple[Value, str]:
    what = {int: "an integer", float: "a number", bool: "true or false", str: "text"}[setting.kind]
    try:
        value = _convert(setting, text)
    except ValueError:
        return None, (
            f"algorithm setting {name}: {text!r} is not {what}; "
            f"set it to {setting.rule or what} for algorithm {algorithm}"
        )
    if setting.choices and value not in setting.choices:
        return None, (
            f"algorithm setting {name}: {text!r} is not allowed; "
            f"set it to {setting.rule} for algorithm {algorithm}"
        )
    if setting.check is not None and not setting.check(value):
        return None, (
            f"algorithm setting {name}: {text!r} is out of range; "
            f"set it to {setting.rule} for algorithm {algorithm}"
        )
    if setting.name == "restart_strategy" and value == "None":
        value = "none"
    return value, ""


def _number(text: str | None) -> float | None:
    try:
        number = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


@dataclass(frozen=True)
class GridAxis:
    """One parameter's grid points, computed rather than listed: a range of 10**18 ints costs
    what a range of 3 does, so counting a grid and taking its k-th point stay O(1)."""

    name: str
    count: int
    low: int | float = 0
    step: int | float = 1
    decimals: int | None = None  # doubles: rounding to the step's decimals; None for ints
    values: tuple[str, ...] = ()  # discrete and categorical: the list

    def value(self, k: int) -> str:
        """The k-th point (0 ≤ k < count), as Katib text."""
        if not 0 <= k < self.count:
            raise IndexError(f"grid point {k} of parameter {self.name} (it has {self.count})")
        if self.values:
            return self.values[k]
        if self.decimals is None:
            return str(self.low + k * self.step)
        return repr(round(self.low + k * self.step, self.decimals))


def grid_axis(parameter: ParameterSpec) -> GridAxis | None:
    """The grid of one parameter, or None when it has no finite grid.

    int: min..max by step (default 1); double: min..max by step (required); discrete and
    categorical: the list. Double points are rounded to the step's decimals so 0.1+0.2 prints
    as 0.3. Counting is arithmetic (in fractions where floats overflow: 1e308 / 1e-308 counts too).
    """
    space = parameter.feasible_space
    name = parameter.name
    if parameter.parameter_type in (ParameterType.DISCRETE, ParameterType.CATEGORICAL):
        values = tuple(space.values or ())
        return GridAxis(name, len(values), values=values) if values else None
    low, high, step = _number(space.min), _number(space.max), _number(space.step)
    if low is None or high is None or low > high:
        return None
    if parameter.parameter_type == ParameterType.INT:
        istep = int(step) if step is not None and step >= 1 else 1
        return GridAxis(name, (int(high) - int(low)) // istep + 1, int(low), istep)
    if parameter.parameter_type != ParameterType.DOUBLE or step is None or step <= 0:
        return None
    span = (high - low) / step
    if math.isfinite(span):  # a tolerance for float noise: 1 / 1e-6 is 999999.9999999999
        count = math.floor(span + 1e-9 * max(1.0, span)) + 1
    else:  # too many points for a float: counted exactly
        count = math.floor((Fraction(high) - Fraction(low)) / Fraction(step)) + 1
    decimals = max(0, -math.floor(math.log10(step))) + 6 if step < 1 else 6
    return GridAxis(name, count, low, step, decimals)


def grid_size(parameters: Sequence[ParameterSpec]) -> int:
    """Number of grid combinations (0 when some parameter has no finite grid), by arithmetic."""
    size = 1
    for parameter in parameters:
        axis = grid_axis(parameter)
        if axis is None:
            return 0
        size *= axis.count
    return size


def _points(count: int, log10: float | None = None) -> str:
    """A point count for a message: exact up to 10**15, else its order of magnitude."""
    if log10 is None:
        if count < 10**15:
            return str(count)
        log10 = math.log10(count)
    return f"about {10 ** (log10 % 1):.1f}e{int(log10)}"


def _check_grid(parameters: Sequence[ParameterSpec]) -> list[str]:
    """Refuse a grid no Experiment could go through, before anything enumerates it; O(number of
    parameters): the product stops growing at the limit, its size in words is a sum of logs."""
    axes = [a for a in map(grid_axis, parameters) if a is not None]
    problems = []
    for axis in axes:
        if axis.count > GRID_LIMIT:
            fix = (
                "shorten feasibleSpace.list"
                if axis.values
                else "set a larger feasibleSpace.step, narrow min..max"
            )
            problems.append(
                f"parameter {axis.name}: the grid has {_points(axis.count)} points, more than "
                f"the limit of {GRID_LIMIT} per parameter; {fix}, or use another algorithm "
                "(e.g. random)"
            )
    if problems:
        return problems
    size = 1
    for axis in axes:
        size *= axis.count
        if size > GRID_SIZE_LIMIT:
            break
    else:
        return []
    largest = sorted(axes, key=lambda a: -a.count)
    named = ", ".join(f"{a.name} {a.count}" for a in largest[:5])
    more = f" and {len(largest) - 5} more" if len(largest) > 5 else ""
    log10 = sum(math.log10(a.count) for a in axes)
    total = _points(math.prod(a.count for a in axes)) if log10 < 15 else _points(0, log10)
    return [
        f"algorithm grid: all possible search combinations are {total} (points per parameter: "
        f"{named}{more}), "
        f"more than the limit of {GRID_SIZE_LIMIT}; set larger steps, narrow ranges, drop "
        "parameters, or use another algorithm (e.g. random)"
    ]


def _check_parameters(algorithm: str, parameters: Sequence[ParameterSpec]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for parameter in parameters:
        if parameter.name in seen:
            problems.append(f"parameter {parameter.name}: duplicate name; give each one its own")
        seen.add(parameter.name)
        space = parameter.feasible_space
        numeric = parameter.parameter_type in (ParameterType.INT, ParameterType.DOUBLE)
        if numeric:
            low, high = _number(space.min), _number(space.max)
            if low is None or high is None:
                problems.append(
                    f"parameter {parameter.name}: min and max must be numbers for algorithm "
                    f"{algorithm}"
                )
                continue
            if low > high:
                problems.append(f"parameter {parameter.name}: min {low} is greater than max {high}")
            distribution = space.distribution or Distribution.UNIFORM
            if distribution in (Distribution.LOG_UNIFORM, Distribution.LOG_NORMAL) and low <= 0:
                problems.append(
                    f"parameter {parameter.name}: distribution {distribution.value} needs min > 0; "
                    "raise min or use uniform/normal"
                )
            if space.step not in (None, "") and (_number(space.step) or 0) <= 0:
                problems.append(f"parameter {parameter.name}: step must be a number > 0")
        elif not space.values:
            problems.append(f"parameter {parameter.name}: feasibleSpace.list must not be empty")
        grid_double = algorithm == "grid" and parameter.parameter_type == ParameterType.DOUBLE
        if grid_double and space.step in (None, ""):
            problems.append(
                f"parameter {parameter.name}: algorithm grid needs feasibleSpace.step on "
                "double parameters; set a step"
            )
    if algorithm == "grid" and not problems:
        problems += _check_grid(parameters)
    if algorithm == "cmaes":
        numeric_count = sum(
            p.parameter_type in (ParameterType.INT, ParameterType.DOUBLE) for p in parameters
        )
        if numeric_count < 2:
            problems.append(
                "algorithm cmaes needs at least 2 int or double parameters "
                f"(found {numeric_count}); add one or choose another algorithm"
            )
    return problems


def validate(
    algorithm_name: str,
    settings: Sequence[AlgorithmSetting] | None,
    parameters: Sequence[ParameterSpec] | None,
    parallel_trial_count: int | None = None,
) -> list[str]:
    """Every problem with these settings and parameters for this algorithm ([] = runnable).

    Each problem names the setting or parameter and says what to set instead.
    `parallel_trial_count` (the Experiment's, defaulted) is checked where an algorithm needs a
    minimum (hyperband); None skips that check.
    """
    if algorithm_name not in SETTINGS:
        return [
            f"algorithm {algorithm_name!r} is unknown; use one of {', '.join(ALGORITHMS)}",
        ]
    if algorithm_name in nas.ALGORITHMS:
        return nas.validate_settings(algorithm_name, settings)
    table = _lookup(algorithm_name)
    problems: list[str] = []
    seen: dict[str, str] = {}
    for item in settings or ():
        if item.name in STATUS_ONLY:
            continue
        setting = table.get(item.name)
        if setting is None:
            known = ", ".join(s.name for s in SETTINGS[algorithm_name]) or "none"
            problems.append(
                f"algorithm setting {item.name}: unknown for algorithm {algorithm_name}; "
                f"known settings: {known}"
            )
            continue
        if setting.name in seen:
            problems.append(
                f"algorithm setting {item.name}: given twice (also as {seen[setting.name]}); "
                "keep one"
            )
            continue
        seen[setting.name] = item.name
        _, problem = _check_setting(algorithm_name, setting, item.name, item.value)
        if problem:
            problems.append(problem)
    for setting in SETTINGS[algorithm_name]:
        if setting.required and setting.name not in seen:
            problems.append(
                f"algorithm setting {setting.name}: required for algorithm {algorithm_name}; "
                f"set it to {setting.rule}"
            )
    if parameters is not None:
        problems += _check_parameters(algorithm_name, parameters)
    if algorithm_name == "hyperband" and not problems:
        problems += _check_hyperband(settings or (), parameters, parallel_trial_count)
    return problems


def hyperband_s_max(eta: float, r_l: float) -> int:
    """Upstream's `s_max = int(log(r_l) / log(eta))`, float rounding included (log(1000)/log(10)
    is 2.9999999999999996, so s_max is 2 there too): the brackets must be upstream's."""
    return int(math.log(r_l) / math.log(eta))


def hyperband_eta(value: Value) -> float:
    """eta as upstream's service uses it: a float, and 3 for anything ≤ 0."""
    eta = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 3.0
    return eta if eta > 0 else 3.0


def _check_hyperband(
    settings: Sequence[AlgorithmSetting],
    parameters: Sequence[ParameterSpec] | None,
    parallel_trial_count: int | None,
) -> list[str]:
    """The cross-field rules of upstream's ValidateAlgorithmSettings (settings already typed)."""
    table = _lookup("hyperband")
    values = {
        table[s.name].name: _check_setting("hyperband", table[s.name], s.name, s.value)[0]
        for s in settings
        if s.name in table
    }
    problems: list[str] = []
    resource = str(values["resource_name"])
    if parameters is not None and resource not in {p.name for p in parameters}:
        names = ", ".join(p.name for p in parameters) or "(none)"
        problems.append(
            f"algorithm setting resource_name: {resource!r} is not a parameter of the "
            f"Experiment; set it to one of {names}"
        )
    eta = hyperband_eta(values.get("eta", 3.0))
    r_l = float(values["r_l"] or 1)
    first_bracket = math.ceil(eta ** hyperband_s_max(eta, r_l))
    if parallel_trial_count is not None and parallel_trial_count < first_bracket:
        problems.append(
            f"parallelTrialCount: {parallel_trial_count} is less than {first_bracket}, the "
            f"trials of hyperband's first bracket (eta={eta:g}, r_l={r_l:g}); set "
            f"parallelTrialCount to at least {first_bracket} or lower r_l"
        )
    return problems


def parse(
    algorithm_name: str,
    settings: Sequence[AlgorithmSetting] | None,
    parameters: Sequence[ParameterSpec] | None = None,
) -> dict[str, Value]:
    """Typed settings by canonical name, every known setting present (defaults filled in).

    Raises:
        SettingsError: `validate` found problems (listed in `.problems`).
    """
    problems = validate(algorithm_name, settings, parameters)
    if problems:
        raise SettingsError(problems)
    if algorithm_name in nas.ALGORITHMS:
        texts: dict[str, Value] = {s.name: s.default for s in SETTINGS[algorithm_name]}
        texts.update({s.name: str(s.value) for s in settings or () if s.name not in STATUS_ONLY})
        return texts
    table = _lookup(algorithm_name)
    values: dict[str, Value] = {s.name: s.default for s in SETTINGS[algorithm_name]}
    for item in settings or ():
        if item.name in STATUS_ONLY:
            continue
        setting = table[item.name]
        values[setting.name], _ = _check_setting(algorithm_name, setting, item.name, item.value)
    return values


def validation_failure(status_settings: Sequence[AlgorithmSetting] | None) -> str | None:
    """The refusal a Katib-protocol image gave (through the bridge), or None."""
    for s in status_settings or ():
        if s.name == VALIDATION_FAILED:
            return str(s.value)
    return None


def search_exhausted(status_settings: Sequence[AlgorithmSetting] | None) -> bool:
    """Whether the algorithm said (Suggestion `status.algorithmSettings`) it has no points left."""
    return any(
        s.name == SEARCH_EXHAUSTED and s.value.lower() == "true" for s in status_settings or ()
    )
