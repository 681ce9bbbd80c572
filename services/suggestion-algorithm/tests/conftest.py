"""Fixtures of the integration tests: the `suggestion-algorithm` console script of Suggestion
`exp` in the test's namespace, and that Suggestion with its Experiment (the test plays the
experiment-controller). `kube` and `crds` come from `kubetune_testkit`'s plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube
from kubetune_testkit import builders
from kubetune_testkit.processes import ServiceProcess


@pytest.fixture
def algorithm(
    cluster: Any,
    namespace: str,
    crds: None,
    tmp_path: Path,
    services: Callable[..., ServiceProcess],
) -> Callable[..., ServiceProcess]:
    """A factory: `algorithm(*extra)` starts a run of the random search for Suggestion `exp`
    (its state under the test's tmp dir; a resync every 2 s); each call is a new process."""

    def start(*extra: str) -> ServiceProcess:
        return services(
            "suggestion-algorithm",
            "--kubeconfig",
            cluster.kubeconfig,
            "--suggestion",
            "exp",
            "--namespace",
            namespace,
            "--algorithm",
            "random",
            "--data-dir",
            str(tmp_path / "data"),
            "--probe-port",
            "0",
            "--resync-period",
            "2",
        ).start(*extra)

    return start


@pytest.fixture
def search(kube: Kube, namespace: str, crds: None) -> Callable[..., None]:
    """`search(parameters, settings, requests)` creates Experiment and Suggestion `exp` of a
    random search maximizing `acc`, as the experiment-controller does."""

    def create(parameters: list[dict[str, Any]], settings: dict[str, str], requests: int) -> None:
        algorithm = builders.algorithm_spec("random", settings)
        objective = builders.objective("acc", strategies=False)
        experiment = builders.experiment(
            "exp", namespace, objective_spec=objective, algorithm=algorithm, parameters=parameters
        )
        kube.create(EXPERIMENTS, experiment, namespace)
        suggestion = builders.suggestion("exp", namespace, algorithm=algorithm, requests=requests)
        kube.create(SUGGESTIONS, suggestion, namespace)

    return create
