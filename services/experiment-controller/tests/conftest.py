"""Fixtures of the integration tests: the controller running in-process. `kube` and `crds`
come from `kubetune_testkit`'s plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubetune.kube import Kube
from tests.standins import RunningController


@pytest.fixture
def controller(kube: Kube, namespace: str, crds: None) -> Iterator[RunningController]:
    running_controller = RunningController(kube, namespace).start()
    yield running_controller
    running_controller.stop()
