"""The results.json format and the rule of which known results fit a search space."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetune import knownresults
from kubetune.api.experiment import ExperimentSpec, ParameterSpec
from kubetune.knownresults import KnownResult


def _p(name: str, kind: str, **space: object) -> ParameterSpec:
    return ParameterSpec.model_validate(
        {"name": name, "parameterType": kind, "feasibleSpace": space}
    )


SPACE = [
    _p("lr", "double", min="0.01", max="0.1"),
    _p("layers", "int", min="1", max="4"),
    _p("opt", "categorical", list=["sgd", "adam"]),
]


@pytest.mark.parametrize(
    ("assignments", "why"),
    [
        ({"lr": "0.05", "layers": "2", "opt": "sgd"}, None),
        ({"lr": "0.01", "layers": "4", "opt": "adam"}, None),
        ({"lr": "0.2", "layers": "2", "opt": "sgd"}, "lr=0.2 is outside [0.01, 0.1]"),
        ({"lr": "0.05", "layers": "2.5", "opt": "sgd"}, "layers=2.5 is not an integer"),
        ({"lr": "0.05", "layers": "0", "opt": "sgd"}, "layers=0 is outside [1, 4]"),
        ({"lr": "0.05", "layers": "2", "opt": "rmsprop"}, "opt=rmsprop is not in its list"),
        ({"lr": "0.05", "layers": "2"}, "no value for parameter opt"),
        (
            {"lr": "0.05", "layers": "2", "opt": "sgd", "dropout": "0.1"},
            "parameter dropout is not in the search space",
        ),
        ({"lr": "fast", "layers": "2", "opt": "sgd"}, "lr=fast is not a number"),
    ],
)
def test_misfit_names_the_parameter_outside_the_space(
    assignments: dict[str, str], why: str | None
) -> None:
    assert knownresults.misfit(SPACE, assignments) == why


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{", "ConfigMap c: results.json is not JSON"),
        ('{"version": 2, "results": []}', "ConfigMap c: version must be 1, found 2"),
        ('{"version": 1}', "ConfigMap c: results must be a list"),
        (
            '{"version": 1, "results": [{"metrics": []}]}',
            "ConfigMap c: results[0].parameterAssignments: must be a list of {name, value}",
        ),
        (
            '{"version": 1, "results": [{"parameterAssignments": [{"value": 1}], "metrics": []}]}',
            "ConfigMap c: results[0].parameterAssignments[0]: must be an object with a name",
        ),
    ],
)
def test_a_bad_document_is_refused_naming_the_field(text: str, error: str) -> None:
    with pytest.raises(knownresults.FormatError) as caught:
        knownresults.parse(text, "ConfigMap c")
    assert str(caught.value).startswith(error)


def test_numbers_as_text_and_non_numbers_are_read_as_the_rest_of_kubetune_does() -> None:
    text = json.dumps(
        {
            "version": 1,
            "results": [
                {
                    "parameterAssignments": [{"name": "layers", "value": 3}],
                    "metrics": [
                        {"name": "a", "value": "0.5"},
                        {"name": "b", "value": "nan"},
                        {"name": "c", "value": True},
                    ],
                }
            ],
        }
    )
    (result,) = knownresults.parse(text, "ConfigMap c")
    assert result.assignments == {"layers": "3"}
    assert result.metrics == {"a": 0.5, "b": None, "c": None}
    assert result.origin == "ConfigMap c[0]"


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


@given(
    st.lists(
        st.tuples(
            st.dictionaries(_TEXT, _TEXT, max_size=3),
            st.dictionaries(_TEXT, st.floats(allow_nan=False, allow_infinity=False), max_size=3),
            _TEXT.filter(bool),
        ),
        max_size=5,
    )
)
def test_an_exported_document_reads_back_the_same(
    points: list[tuple[dict[str, str], dict[str, float], str]],
) -> None:
    results = [KnownResult(dict(a), dict(m), origin) for a, m, origin in points]
    spec = ExperimentSpec.model_validate({"parameters": [p.to_wire() for p in SPACE]})
    text = json.dumps(knownresults.document(spec, results))
    assert knownresults.parse(text, "x") == results
