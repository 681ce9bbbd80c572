"""Algorithm settings: every algorithm's names, types, ranges and defaults, and parameter checks."""

from __future__ import annotations

import json

import pytest

from kubetune import algorithmsettings
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import ParameterSpec
from kubetune_testkit import capped


def _s(**values: str) -> list[AlgorithmSetting]:
    return [AlgorithmSetting(name=k, value=v) for k, v in values.items()]


def _p(name: str, kind: str, **space: object) -> ParameterSpec:
    return ParameterSpec.model_validate(
        {"name": name, "parameterType": kind, "feasibleSpace": space}
    )


LR = _p("lr", "double", min="0.01", max="0.05")
LAYERS = _p("layers", "int", min="1", max="4")
OPT = _p("opt", "categorical", list=["sgd", "adam"])
BATCH = _p("batch", "discrete", list=["16", "32"])


REQUIRED = {
    "hyperband": _s(resource_name="layers", r_l="2"),
    "pbt": _s(suggestion_trial_dir="/ckpt", n_population="5", truncation_threshold="0.2"),
}


@pytest.mark.parametrize("algorithm", algorithmsettings.ALGORITHMS)
def test_every_algorithm_runs_with_only_its_required_settings(algorithm: str) -> None:
    stepped = _p("lr", "double", min="0.01", max="0.05", step="0.01")
    required = REQUIRED.get(algorithm, [])
    assert algorithmsettings.validate(algorithm, required, [stepped, LAYERS, OPT, BATCH]) == []
    parsed = algorithmsettings.parse(algorithm, required, None)
    assert set(parsed) == {s.name for s in algorithmsettings.SETTINGS[algorithm]}


def test_katib_names_and_kubetunes_are_the_ones_known() -> None:
    assert set(algorithmsettings.ALGORITHMS) == {
        "nsga2",
        "nsga3",
        "random",
        "grid",
        "tpe",
        "multivariate-tpe",
        "cmaes",
        "sobol",
        "bayesianoptimization",
        "hyperband",
        "pbt",
        "darts",
        "enas",
    }


@pytest.mark.parametrize(
    ("algorithm", "settings", "expected"),
    [
        ("tpe", _s(n_startup_trials="5"), {"n_startup_trials": 5}),
        ("tpe", _s(n_EI_candidates="12", gamma="0.3"), {"n_ei_candidates": 12, "gamma": 0.3}),
        ("multivariate-tpe", _s(random_state="7"), {"random_state": 7}),
        ("cmaes", _s(restart_strategy="None", sigma="0.5"), {"restart_strategy": "none"}),
        ("cmaes", _s(restart_strategy="ipop"), {"restart_strategy": "ipop", "sigma": None}),
        ("sobol", _s(scramble="false"), {"scramble": False}),
        ("nsga2", _s(seed="3", crossover_prob="0"), {"random_state": 3, "crossover_prob": 0.0}),
        ("nsga3", _s(population_size="8"), {"population_size": 8, "dividing_parameter": 3}),
        (
            "bayesianoptimization",
            _s(base_estimator="RF", n_initial_points="3", acq_func="EI"),
            {"base_estimator": "RF", "n_initial_points": 3, "acq_func": "EI"},
        ),
        ("bayesianoptimization", [], {"base_estimator": "GP", "acq_optimizer": "auto"}),
        ("random", _s(random_state="10"), {"random_state": 10}),
        ("tpe", _s(n_startup_trials="5.0"), {"n_startup_trials": 5}),
    ],
    ids=[
        "tpe-startup",
        "tpe-hyperopt-spelling",
        "mtpe-seed",
        "cmaes-None",
        "cmaes-ipop",
        "sobol-scramble",
        "nsga2-seed-alias",
        "nsga3-defaults",
        "bo-settings",
        "bo-defaults",
        "random-seed",
        "integral-float-text",
    ],
)
def test_parse_types_and_defaults(
    algorithm: str, settings: list[AlgorithmSetting], expected: dict[str, object]
) -> None:
    parsed = algorithmsettings.parse(algorithm, settings, [LR, LAYERS])
    for key, value in expected.items():
        assert parsed[key] == value
        assert type(parsed[key]) is type(value)


@pytest.mark.parametrize(
    ("algorithm", "settings", "fragment"),
    [
        ("tpe", _s(n_startup_trials="abc"), "n_startup_trials: 'abc' is not an integer"),
        ("tpe", _s(n_startup_trials="-1"), "n_startup_trials: '-1' is out of range"),
        ("nsga2", _s(population_size="1"), "population_size: '1' is out of range"),
        ("nsga3", _s(mutation_prob="1.5"), "mutation_prob: '1.5' is out of range"),
        ("tpe", _s(n_startup_trials="1.5"), "is not an integer"),
        ("tpe", _s(gamma="1"), "gamma: '1' is out of range; set it to a number in (0, 1)"),
        ("tpe", _s(prior_weight="0"), "prior_weight"),
        ("tpe", _s(n_ei_candidates="0"), "n_ei_candidates"),
        ("tpe", _s(n_ei_candidates="3", n_EI_candidates="4"), "given twice"),
        ("random", _s(random_state="-3"), "random_state"),
        ("random", _s(foo="1"), "foo: unknown for algorithm random; known settings: random_state"),
        ("cmaes", _s(restart_strategy="sometimes"), "restart_strategy: 'sometimes' is not allowed"),
        ("cmaes", _s(sigma="0"), "sigma"),
        ("sobol", _s(scramble="maybe"), "scramble"),
        ("bayesianoptimization", _s(base_estimator="SVM"), "base_estimator"),
        ("bayesianoptimization", _s(acq_func="UCB"), "acq_func"),
        ("bayesianoptimization", _s(acq_optimizer="adam"), "acq_optimizer"),
        ("bayesianoptimization", _s(n_initial_points="-2"), "n_initial_points"),
        ("tpe", _s(gamma="nan"), "gamma"),
    ],
)
def test_invalid_settings_name_the_setting_and_the_fix(
    algorithm: str, settings: list[AlgorithmSetting], fragment: str
) -> None:
    problems = algorithmsettings.validate(algorithm, settings, [LR, LAYERS])
    assert len(problems) == 1, problems
    assert fragment in problems[0]
    assert (
        "set it to" in problems[0] or "known settings" in problems[0] or "keep one" in problems[0]
    )
    with pytest.raises(algorithmsettings.SettingsError) as caught:
        algorithmsettings.parse(algorithm, settings, [LR, LAYERS])
    assert caught.value.problems == problems


def test_unknown_algorithm() -> None:
    problems = algorithmsettings.validate("hyperopt", None, [LR])
    assert problems == [
        "algorithm 'hyperopt' is unknown; use one of random, grid, tpe, multivariate-tpe, "
        "cmaes, sobol, bayesianoptimization, hyperband, pbt, nsga2, nsga3, "
        "darts, enas"
    ]


def test_cmaes_needs_two_numeric_parameters() -> None:
    problems = algorithmsettings.validate("cmaes", None, [LR, OPT, BATCH])
    assert any("cmaes needs at least 2 int or double parameters (found 1)" in p for p in problems)
    assert algorithmsettings.validate("cmaes", None, [LR, LAYERS, OPT]) == []


def test_grid_needs_steps_on_doubles() -> None:
    problems = algorithmsettings.validate("grid", None, [LR, LAYERS])
    assert problems == [
        "parameter lr: algorithm grid needs feasibleSpace.step on double parameters; set a step"
    ]
    stepped = _p("lr", "double", min="0.01", max="0.05", step="0.01")
    assert algorithmsettings.validate("grid", None, [stepped, LAYERS, OPT]) == []


def _values(parameter: ParameterSpec) -> list[str]:
    axis = algorithmsettings.grid_axis(parameter)
    assert axis is not None
    return [axis.value(k) for k in range(axis.count)]


def test_grid_values_and_size() -> None:
    stepped = _p("lr", "double", min="0.1", max="0.3", step="0.1")
    assert _values(stepped) == ["0.1", "0.2", "0.3"]
    assert _values(LAYERS) == ["1", "2", "3", "4"]
    assert _values(_p("n", "int", min="0", max="10", step="5")) == ["0", "5", "10"]
    assert _values(_p("n", "int", min="0", max="11", step="5")) == ["0", "5", "10"]
    assert _values(OPT) == ["sgd", "adam"]
    assert algorithmsettings.grid_size([stepped, LAYERS, OPT, BATCH]) == 3 * 4 * 2 * 2
    assert algorithmsettings.grid_size([LR]) == 0
    assert algorithmsettings.grid_axis(LR) is None


def test_grid_too_large_is_a_problem() -> None:
    huge = _p("x", "double", min="0", max="1", step="1e-9")
    problems = algorithmsettings.validate("grid", None, [huge])
    assert problems == [
        "parameter x: the grid has 1000000001 points, more than the limit of 1000000 per "
        "parameter; set a larger feasibleSpace.step, narrow min..max, or use another algorithm "
        "(e.g. random)"
    ]


@pytest.mark.parametrize(
    ("parameter", "fragment"),
    [
        (_p("x", "double", min="0", max="1", distribution="logUniform"), "needs min > 0"),
        (_p("x", "int", min="0", max="8", distribution="logNormal"), "needs min > 0"),
        (_p("x", "double", min="2", max="1"), "greater than max"),
        (_p("x", "double", min="a", max="1"), "min and max must be numbers"),
        (_p("x", "double", min="0", max="1", step="-1"), "step must be a number > 0"),
        (_p("x", "categorical"), "list must not be empty"),
    ],
)
def test_parameter_problems(parameter: ParameterSpec, fragment: str) -> None:
    problems = algorithmsettings.validate("random", None, [parameter])
    assert any(fragment in p and "parameter x" in p for p in problems), problems


def test_duplicate_parameter_names() -> None:
    problems = algorithmsettings.validate("random", None, [LR, LR])
    assert problems == ["parameter lr: duplicate name; give each one its own"]


def test_status_only_entries_are_ignored_and_read() -> None:
    status = _s(search_exhausted="true")
    assert algorithmsettings.validate("grid", status, None) == []
    assert algorithmsettings.search_exhausted(status)
    assert not algorithmsettings.search_exhausted(_s(search_exhausted="false"))
    assert not algorithmsettings.search_exhausted(None)


# --- hyperband: upstream's ValidateAlgorithmSettings rules, with the fix in each message ------

EPOCHS = _p("epochs", "int", min="1", max="1")


def test_hyperband_katib_example_settings_are_valid() -> None:
    """hp-tuning/hyperband.yaml: eta 2, r_l 2 -> s_max 1 -> 2 trials at once, parallel 2."""
    settings = _s(resource_name="epochs", eta="2", r_l="2")
    assert algorithmsettings.validate("hyperband", settings, [LR, EPOCHS], 2) == []
    parsed = algorithmsettings.parse("hyperband", settings, [LR, EPOCHS])
    assert parsed == {"resource_name": "epochs", "eta": 2.0, "r_l": 2.0, "random_state": None}


@pytest.mark.parametrize(
    ("settings", "parallel", "fragment"),
    [
        (_s(eta="3", r_l="9"), 9, "resource_name: required for algorithm hyperband"),
        (_s(resource_name="epochs"), 9, "r_l: required for algorithm hyperband"),
        (_s(resource_name="depth", r_l="9"), 9, "'depth' is not a parameter of the Experiment"),
        (_s(resource_name="epochs", r_l="0.5"), 9, "r_l: '0.5' is out of range"),
        (_s(resource_name="epochs", r_l="many"), 9, "r_l: 'many' is not a number"),
        (_s(resource_name="epochs", r_l="9", eta="1"), 9, "eta: '1' is out of range"),
        # eta 3, r_l 9: s_max = 2, the first bracket runs ceil(3**2) = 9 trials at once
        (_s(resource_name="epochs", r_l="9"), 8, "parallelTrialCount: 8 is less than 9"),
        # eta 10, r_l 1000: log(1000)/log(10) = 2.9999999999999996, so s_max = 2 (upstream too)
        (_s(resource_name="epochs", r_l="1000", eta="10"), 99, "less than 100"),
    ],
    ids=[
        "no-resource",
        "no-r_l",
        "resource-not-a-parameter",
        "r_l-below-1",
        "r_l-text",
        "eta-1",
        "parallel",
        "parallel-float-s_max",
    ],
)
def test_hyperband_problems_name_the_setting_and_the_fix(
    settings: list[AlgorithmSetting], parallel: int, fragment: str
) -> None:
    problems = algorithmsettings.validate("hyperband", settings, [LR, EPOCHS], parallel)
    assert len(problems) == 1, problems
    assert fragment in problems[0]
    assert "set " in problems[0]


def test_hyperband_parallel_is_enough_and_nonpositive_eta_means_3() -> None:
    settings = _s(resource_name="epochs", r_l="1000", eta="10")
    assert algorithmsettings.validate("hyperband", settings, [LR, EPOCHS], 100) == []
    # eta ≤ 0 -> 3 (upstream): s_max = int(log 9 / log 3) = 2 -> 9 at once
    settings = _s(resource_name="epochs", r_l="9", eta="-1")
    assert algorithmsettings.validate("hyperband", settings, [LR, EPOCHS], 9) == []
    assert "less than 9" in algorithmsettings.validate("hyperband", settings, [EPOCHS], 8)[0]
    assert algorithmsettings.hyperband_eta(-1.0) == 3.0
    assert algorithmsettings.hyperband_s_max(10.0, 1000.0) == 2
    assert algorithmsettings.hyperband_s_max(3.0, 81.0) == 4


# --- pbt: upstream's required settings and ranges -------------------------------------------


def test_pbt_katib_example_settings_are_valid() -> None:
    """hp-tuning/simple-pbt.yaml's settings."""
    settings = _s(
        suggestion_trial_dir="/var/log/katib/checkpoints/",
        n_population="40",
        truncation_threshold="0.2",
    )
    assert algorithmsettings.validate("pbt", settings, [LR], 2) == []
    parsed = algorithmsettings.parse("pbt", settings, [LR])
    assert parsed["n_population"] == 40 and parsed["resample_probability"] is None


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        (_s(n_population="5", truncation_threshold="0.2"), "suggestion_trial_dir: required"),
        (_s(suggestion_trial_dir="/c", truncation_threshold="0.2"), "n_population: required"),
        (_s(suggestion_trial_dir="/c", n_population="5"), "truncation_threshold: required"),
        (
            _s(suggestion_trial_dir="/c", n_population="4", truncation_threshold="0.2"),
            "n_population: '4' is out of range",
        ),
        (
            _s(suggestion_trial_dir="/c", n_population="5", truncation_threshold="1.5"),
            "truncation_threshold: '1.5' is out of range",
        ),
        (
            _s(
                suggestion_trial_dir="/c",
                n_population="5",
                truncation_threshold="0.2",
                resample_probability="-0.1",
            ),
            "resample_probability: '-0.1' is out of range",
        ),
        (
            _s(suggestion_trial_dir="ckpt", n_population="5", truncation_threshold="0.2"),
            "suggestion_trial_dir: 'ckpt' is out of range; set it to an absolute path",
        ),
    ],
    ids=["no-dir", "no-population", "no-threshold", "small", "threshold", "resample", "relative"],
)
def test_pbt_problems_name_the_setting_and_the_fix(
    settings: list[AlgorithmSetting], fragment: str
) -> None:
    problems = algorithmsettings.validate("pbt", settings, [LR], 2)
    assert len(problems) == 1, problems
    assert fragment in problems[0]


def _validate_guarded(parameters: list[dict[str, object]]) -> list[str]:
    """`validate("grid", ...)` under an address-space cap (`capped`): a check that would list
    9e18 grid points fails of MemoryError instead of eating the machine."""
    setup = (
        "import json, sys\nfrom kubetune import algorithmsettings\n"
        "from kubetune.api.experiment import ParameterSpec"
    )
    code = (
        "parameters = [ParameterSpec.model_validate(p) for p in json.loads(sys.stdin.read())]\n"
        'print(json.dumps(algorithmsettings.validate("grid", None, parameters)))'
    )
    problems: list[str] = json.loads(capped.run(setup, code, json.dumps(parameters)))
    return problems


def _int_parameter(name: str, low: str, high: str) -> dict[str, object]:
    return {"name": name, "parameterType": "int", "feasibleSpace": {"min": low, "max": high}}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("high", ["9e18", "9000000000000000000"])
def test_grid_of_9e18_ints_is_refused_in_bounded_memory(high: str) -> None:
    """The attack that made the webhook allocate 9.1 GB: one int parameter 0..9e18, no step."""
    assert _validate_guarded([_int_parameter("x", "0", high)]) == [
        "parameter x: the grid has about 9.0e18 points, more than the limit of 1000000 per "
        "parameter; set a larger feasibleSpace.step, narrow min..max, or use another algorithm "
        "(e.g. random)"
    ]


@pytest.mark.timeout(300)
def test_grid_of_21_parameters_of_1001_values_is_refused_by_its_size() -> None:
    """Each parameter is small; the product (~1e63) is what no Experiment can go through."""
    parameters = [_int_parameter(f"p{i}", "0", "1000") for i in range(21)]
    assert _validate_guarded(parameters) == [
        "algorithm grid: all possible search combinations are about 1.0e63 (points per "
        "parameter: p0 1001, p1 1001, p2 1001, p3 1001, p4 1001 and 16 more), more than the "
        "limit of 2147483647; set larger steps, narrow ranges, drop parameters, or use another "
        "algorithm (e.g. random)"
    ]


def test_grid_just_under_the_size_limit_is_accepted_and_just_over_refused() -> None:
    under = [_p("a", "int", min="1", max="46340"), _p("b", "int", min="1", max="46340")]
    assert algorithmsettings.validate("grid", None, under) == []
    over = [_p("a", "int", min="1", max="46341"), _p("b", "int", min="1", max="46341")]
    (problem,) = algorithmsettings.validate("grid", None, over)
    assert problem.startswith("algorithm grid: all possible search combinations are 2147488281")


@pytest.mark.timeout(300)
def test_double_grid_with_a_vanishing_step_is_refused_with_its_count() -> None:
    """(max - min) / step overflows a float: counted exactly, not as an OverflowError."""
    space = {"min": "-1e308", "max": "1e308", "step": "5e-324"}
    problems = _validate_guarded([{"name": "x", "parameterType": "double", "feasibleSpace": space}])
    assert len(problems) == 1
    assert problems[0].startswith("parameter x: the grid has about 4.0e631 points, more than")


def test_grid_of_a_categorical_list_longer_than_the_limit_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(algorithmsettings, "GRID_LIMIT", 1)
    assert algorithmsettings.validate("grid", None, [OPT]) == [
        "parameter opt: the grid has 2 points, more than the limit of 1 per parameter; shorten "
        "feasibleSpace.list, or use another algorithm (e.g. random)"
    ]
    assert algorithmsettings.validate("random", None, [OPT]) == []
