"""Fuzz: whatever manifest arrives, the defaulter and validator answer, they never raise."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webhook_cases import NS, StaticCluster, experiment

from kubetune import config as katib_config
from kubetune_webhook import defaulting, patching, validating

CONFIG = katib_config.default()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            "",
            "random",
            "StdOut",
            "File",
            "Job",
            "${trialParameters.x}",
            "(a)=(b)",
            "[",
            "double",
            "FromVolume",
            "/p",
        ]
    ),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=10), children, max_size=4),
    ),
    max_leaves=12,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += _paths(value, (*prefix, index))
    return out


BASE = experiment()
PATHS = [p for p in _paths(BASE) if p]


@st.composite
def mutated_experiments(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(PATHS))
        node: Any = doc
        try:
            for part in path[:-1]:
                node = node[part]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


manifests = st.one_of(
    mutated_experiments(), json_values, st.fixed_dictionaries({"spec": json_values})
)


def _check(manifest: Any, old: Any, operation: str) -> None:
    problems = validating.validate(
        manifest, old, operation=operation, namespace=NS, config=CONFIG, cluster=StaticCluster()
    )
    assert isinstance(problems, list) and all(isinstance(p, str) and p for p in problems)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests, st.sampled_from(["CREATE", "UPDATE"]))
def test_validator_only_allows_or_denies(manifest: Any, operation: str) -> None:
    _check(manifest, BASE if operation == "UPDATE" else None, operation)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests)
def test_defaulted_manifest_is_validated_without_raising(manifest: Any) -> None:
    patch = defaulting.patch(manifest)
    defaulted = patching.apply(manifest, patch)
    assert defaulting.patch(defaulted) == []
    _check(defaulted, None, "CREATE")
    _check(defaulted, manifest, "UPDATE")
