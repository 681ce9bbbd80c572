"""The informer cache on a real API server hands out read-only objects: through `get`,
`select`, `objects`, the events and a reconcile's `Context`, a write raises instead of changing
what every other reader sees."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from kubetune.kube import CONFIGMAPS, Kube, Obj
from kubetune.runtime import Context, Controller, FrozenError, Key, Result, thaw
from kubetune.runtime.watching import Event, Informer
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def _configmap(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "frozen"}},
        "data": {"v": "1"},
    }


def _writes(obj: Obj) -> list[Callable[[], object]]:
    return [
        lambda: obj.__setitem__("data", {}),
        lambda: obj["data"].__setitem__("v", "2"),
        lambda: obj["metadata"]["labels"].pop("app"),
        lambda: obj["metadata"].setdefault("annotations", {}),
    ]


def test_every_read_of_the_cache_is_read_only(
    kube: Kube, namespace: str, stop: threading.Event
) -> None:
    events: list[Event] = []
    informer = Informer(kube, CONFIGMAPS, events.append, namespace=namespace)
    kube.create(CONFIGMAPS, _configmap("listed"), namespace)
    informer.start(stop)
    assert informer.synced.wait(30)
    kube.create(CONFIGMAPS, _configmap("watched"), namespace)
    wait_for("the watched object", lambda: informer.get(namespace, "watched"))

    reads = {
        "get (listed)": informer.get(namespace, "listed"),
        "get (watched)": informer.get(namespace, "watched"),
        "select": informer.select(namespace, {"app": "frozen"})[0],
        "objects": next(o for o in informer.objects() if o["metadata"]["name"] == "listed"),
        "event": next(e.object for e in events if e.object["metadata"]["name"] == "watched"),
    }
    for where, obj in reads.items():
        assert obj is not None, where
        for write in _writes(obj):
            with pytest.raises(FrozenError):
                write()
    assert informer.get(namespace, "listed")["data"] == {"v": "1"}  # type: ignore[index]

    mine = thaw(informer.get(namespace, "listed"))
    mine["data"]["v"] = "2"
    assert kube.replace(CONFIGMAPS, mine, namespace)["data"] == {"v": "2"}
    wait_for(
        "the update in the cache",
        lambda: (informer.get(namespace, "listed") or {}).get("data") == {"v": "2"},
    )


def test_a_reconcile_reads_cached_objects_read_only_and_fresh_ones_plain(
    kube: Kube, namespace: str, stop: threading.Event
) -> None:
    kube.create(CONFIGMAPS, _configmap("c"), namespace)
    seen: list[str] = []

    def reconcile(ctx: Context, key: Key) -> Result:
        cached = ctx.read(CONFIGMAPS, key)
        fresh = ctx.read(CONFIGMAPS, key, fresh=True)
        assert cached is not None and fresh is not None
        try:
            cached["data"]["v"] = "changed"
            seen.append("written into the cache")
        except FrozenError:
            seen.append("refused")
        fresh["data"]["v"] = "mine"  # a GET's answer belongs to the caller
        return Result.done()

    controller = Controller("frozen", reconcile, namespace=namespace)
    controller.watch(CONFIGMAPS, namespace=namespace)
    controller.start_informers(kube, stop)
    wait_for("the cache", controller.synced)
    controller.start_workers(stop)
    try:
        wait_for("a reconcile of the ConfigMap", lambda: seen)
        assert seen[0] == "refused"
        (informer,) = controller.informers
        assert informer.get(namespace, "c")["data"] == {"v": "1"}  # type: ignore[index]
    finally:
        controller.queue.shutdown()
