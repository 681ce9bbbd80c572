"""The UI's caches against the real API server, seen through a proxy that counts requests:
a broken watch resumes from its last resourceVersion, without listing again."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetune.kube import EXPERIMENTS, TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.apiproxy import ApiProxy
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def api_proxy(cluster: Any, tmp_path: Path) -> Iterator[ApiProxy]:
    proxy = ApiProxy(cluster.kubeconfig, tmp_path)
    yield proxy
    proxy.close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return e.code


def _experiment_names(base: str) -> set[str]:
    with urllib.request.urlopen(base + "/api/experiments", timeout=30) as answer:
        return {row["name"] for row in json.loads(answer.read())["experiments"]}


def test_a_broken_watch_resumes_without_a_relist(
    kube: Kube,
    namespace: str,
    api_proxy: ApiProxy,
    tmp_path: Path,
    start_ui: Callable[..., str],
) -> None:
    kube.create(EXPERIMENTS, builders.experiment("before", namespace), namespace)
    kube.create(TRIALS, builders.trial("before-1", experiment="before"), namespace)
    kubeconfig = api_proxy.kubeconfig(tmp_path / "through-proxy")
    base = start_ui(f"--kubeconfig={kubeconfig}", f"--watch-namespace={namespace}")
    wait_for("the UI's caches", lambda: _status(base + "/readyz") == 200)
    wait_for("both watches open", lambda: api_proxy.watches_in_flight() == 2)

    def lists() -> int:
        return sum(r.is_list for p in ("experiments", "trials") for r in api_proxy.seen(p))

    def watches() -> int:
        return sum(r.is_watch for p in ("experiments", "trials") for r in api_proxy.seen(p))

    listed, watched = lists(), watches()
    assert listed >= 2, "the caches were filled by a list"
    assert api_proxy.cut_watches() == 2

    # Changes made while the watches are down reach the UI through the resumed watches.
    kube.create(EXPERIMENTS, builders.experiment("after", namespace), namespace)
    kube.create(TRIALS, builders.trial("after-1", experiment="after"), namespace)
    wait_for("the new Experiment shown", lambda: "after" in _experiment_names(base))
    wait_for(
        "the new Trial shown",
        lambda: _status(f"{base}/api/trials/{namespace}/after-1") == 200,
    )
    assert watches() >= watched + 2, "both watches were opened again"
    resumed = [r for p in ("experiments", "trials") for r in api_proxy.seen(p) if r.is_watch]
    assert all(r.query.get("resourceVersion") for r in resumed[-2:]), resumed
    assert lists() == listed, "a broken watch listed everything again instead of resuming"
