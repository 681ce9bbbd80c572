"""A pass reads the objects it owns, and the namespace's algorithm ServiceAccount and
RoleBinding, from caches: once they exist, further passes send no GET for them (before, every
pass sent one GET of each). Counted at a proxy in front of the API server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetune.kube import SUGGESTIONS, Kube
from kubetune_testkit.apiproxy import ApiProxy
from kubetune_testkit.conditions import is_true
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.standins.services import StandInExperimentController
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}},
]
CACHED = (
    "services",
    "persistentvolumeclaims",
    "persistentvolumes",
    "serviceaccounts",
    "rolebindings",
)


@pytest.fixture
def api_proxy(cluster: Any, tmp_path: Path) -> Iterator[ApiProxy]:
    proxy = ApiProxy(cluster.kubeconfig, tmp_path)
    yield proxy
    proxy.close()


def _named_gets(proxy: ApiProxy, plural: str) -> int:
    """GETs of one object (not lists or watches) of `plural`."""
    return sum(
        1
        for r in proxy.all_requests()
        if r.method == "GET" and not r.is_watch and f"/{plural}/" in r.path
    )


def test_passes_read_owned_objects_and_the_account_from_caches(
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    api_proxy: ApiProxy,
    start_controller: Callable[..., ServiceProcess],
    standin: StandInExperimentController,
) -> None:
    start_controller(namespace, api_proxy.kubeconfig(tmp_path / "through-proxy"))
    standin.create("random", "FromVolume", PARAMETERS, {"random_state": "1"}, requests=1)
    wait_for("Suggestion Running", lambda: is_true(standin.suggestion(), "Running"), 120)
    before = {plural: _named_gets(api_proxy, plural) for plural in CACHED}
    for i in range(5):
        passes = _named_gets(api_proxy, "suggestions")  # each pass GETs its Suggestion once
        kube.patch(
            SUGGESTIONS, "exp", {"metadata": {"annotations": {"test/pass": str(i)}}}, namespace
        )
        wait_for("another pass", lambda n=passes: _named_gets(api_proxy, "suggestions") > n)
    wait_for("Suggestion still Running", lambda: is_true(standin.suggestion(), "Running"))
    after = {plural: _named_gets(api_proxy, plural) for plural in CACHED}
    assert after == before, f"GETs during 5 passes: before {before}, after {after}"
