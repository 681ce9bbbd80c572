"""A watch's predicate on a real API server: the informer hands it the cached object an update
replaces, and only the updates it accepts wake the reconcile."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from kubetune.kube import CONFIGMAPS, Kube, Obj
from kubetune.runtime import Context, Controller, Key, Result
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_only_updates_the_predicate_accepts_are_reconciled(
    kube: Kube, namespace: str, stop: threading.Event
) -> None:
    compared: list[tuple[str, str]] = []
    passes: list[str] = []

    def data_changed(old: Obj, new: Obj) -> bool:
        compared.append((old["data"]["v"], new["data"]["v"]))
        return bool(old["data"] != new["data"])

    def reconcile(ctx: Context, key: Key) -> Result:
        obj = ctx.read(CONFIGMAPS, key)
        passes.append(obj["data"]["v"] if obj else "gone")
        return Result.done()

    controller = Controller("predicates", reconcile, workers=1)
    controller.watch(CONFIGMAPS, namespace=namespace, predicate=data_changed)
    controller.start_informers(kube, stop)
    controller.start_workers(stop)
    wait_for("the cache", lambda: controller.synced() or None)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"v": "1"}}
    kube.create(CONFIGMAPS, body, namespace)
    wait_for("the creation's pass", lambda: passes == ["1"] or None)
    for index in range(5):  # a label each time: new resourceVersions, same data
        kube.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"n": str(index)}}}, namespace)
    kube.patch(CONFIGMAPS, "a", {"data": {"v": "2"}}, namespace)
    wait_for("the data change's pass", lambda: "2" in passes or None)
    kube.delete(CONFIGMAPS, "a", namespace)
    wait_for("the deletion's pass", lambda: "gone" in passes or None)
    # Every update was compared with the object it replaced; only the data change passed.
    assert compared == [("1", "1")] * 5 + [("1", "2")]
    assert passes == ["1", "2", "gone"]
    controller.queue.shutdown()
