"""Admission of `spec.warmStart` (a kubetune extension): names, sources, algorithms, updates."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_cases import NS, StaticCluster, experiment

from kubetune import config as katib_config
from kubetune import knownresults
from kubetune_webhook import validating

TPE = {"algorithmName": "tpe"}


def _problems(manifest: dict[str, Any], **kw: Any) -> list[str]:
    return validating.validate(
        manifest,
        kw.pop("old", None),
        operation=kw.pop("operation", "CREATE"),
        namespace=NS,
        config=katib_config.default(),
        cluster=StaticCluster(),
    )


@pytest.mark.parametrize("algorithm", knownresults.ALGORITHMS)
def test_algorithms_that_learn_from_known_results_accept_them(algorithm: str) -> None:
    manifest = experiment(
        algorithm={"algorithmName": algorithm},
        warmStart={"experiments": ["old"], "configMaps": ["old-results"]},
    )
    assert _problems(manifest) == []


@pytest.mark.parametrize("algorithm", ["random", "grid", "sobol", "cmaes", "hyperband"])
def test_other_algorithms_refuse_warm_start_by_name(algorithm: str) -> None:
    manifest = experiment(algorithm={"algorithmName": algorithm}, warmStart={"experiments": ["a"]})
    expected = (
        f"spec.warmStart: algorithm {algorithm} cannot use known results; use one of "
        "tpe, multivariate-tpe, bayesianoptimization, or remove spec.warmStart"
    )
    assert expected in _problems(manifest)


@pytest.mark.parametrize(
    ("warm_start", "expected"),
    [
        ({}, "spec.warmStart: names no source; list experiments and/or configMaps"),
        (
            {"configMaps": ["Bad_Name"]},
            "spec.warmStart.configMaps[0]: object name 'Bad_Name' is not valid: it must be a "
            "DNS-1123 subdomain",
        ),
        ({"experiments": ["a", "a"]}, "spec.warmStart.experiments[1]: a is listed twice"),
        (
            {"experiments": ["random"]},
            "spec.warmStart.experiments: names this Experiment (random); list earlier "
            "Experiments only",
        ),
        (
            {"configMaps": [f"c{i}" for i in range(knownresults.MAX_SOURCES + 1)]},
            f"spec.warmStart: {knownresults.MAX_SOURCES + 1} sources, more than "
            f"{knownresults.MAX_SOURCES}",
        ),
        ({"experiment": ["a"]}, "spec.warmStart.experiment: unknown field"),
    ],
    ids=["empty", "invalid-name", "twice", "itself", "too-many", "misspelt"],
)
def test_bad_warm_start_is_refused_naming_the_field(
    warm_start: dict[str, Any], expected: str
) -> None:
    problems = _problems(experiment(algorithm=TPE, warmStart=warm_start))
    assert any(expected in p for p in problems), problems


def test_a_katib_manifest_without_warm_start_is_unchanged() -> None:
    assert _problems(experiment()) == []


def test_warm_start_cannot_change_after_creation() -> None:
    old = experiment(algorithm=TPE, warmStart={"experiments": ["a"]})
    new = experiment(algorithm=TPE, warmStart={"experiments": ["b"]})
    problems = _problems(new, old=old, operation="UPDATE")
    assert any("spec.warmStart cannot change after creation" in p for p in problems), problems
