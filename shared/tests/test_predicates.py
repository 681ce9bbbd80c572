"""A watch's predicate decides which updates reach the work queue (no API server needed: the
informer's events are handed to the controller's handler directly)."""

from __future__ import annotations

from kubetune.kube import CONFIGMAPS, Obj
from kubetune.runtime import Controller, Key, Result, changed_beyond, fields_changed
from kubetune.runtime.watching import ADDED, DELETED, MODIFIED, RESYNC, Event


def _cm(value: str, rv: str) -> Obj:
    return {
        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": rv},
        "data": {"v": value},
    }


def _value_changed(old: Obj, new: Obj) -> bool:
    return bool(old["data"] != new["data"])


def _own_key(obj: Obj) -> list[Key]:
    return [Key(obj["metadata"]["namespace"], obj["metadata"]["name"])]


def _queued(events: list[Event]) -> list[Key]:
    """The keys a watch with `_value_changed` as predicate enqueues for `events`, in order."""
    controller = Controller("t", lambda ctx, key: Result.done())
    controller.watch(CONFIGMAPS, predicate=_value_changed)
    watch = controller.watches[0]
    handler = controller._enqueue(_own_key, watch.predicate)
    keys = []
    for event in events:
        handler(event)
        key = controller.queue.get(0)
        if key is not None:
            assert isinstance(key, Key)
            keys.append(key)
            controller.queue.done(key)
    return keys


KEY = Key("ns", "a")


def test_an_update_the_predicate_rejects_enqueues_nothing() -> None:
    old, same, changed = _cm("1", "1"), _cm("1", "2"), _cm("2", "3")
    assert _queued([Event(MODIFIED, same, old)]) == []
    assert _queued([Event(MODIFIED, changed, same)]) == [KEY]


def test_a_resync_goes_through_the_predicate_with_the_object_as_both() -> None:
    obj = _cm("1", "1")
    assert _queued([Event(RESYNC, obj, obj)]) == []


def test_creations_and_deletions_always_enqueue() -> None:
    obj = _cm("1", "1")
    assert _queued([Event(ADDED, obj)]) == [KEY]
    assert _queued([Event(DELETED, obj, obj)]) == [KEY]


def test_a_watch_without_predicate_enqueues_every_update() -> None:
    controller = Controller("t", lambda ctx, key: Result.done())
    handler = controller._enqueue(_own_key)
    handler(Event(MODIFIED, _cm("1", "2"), _cm("1", "1")))
    assert controller.queue.get(0) == KEY


def _experiment(conditions: list[str], succeeded: int, rv: str) -> Obj:
    return {
        "metadata": {"name": "e", "namespace": "ns", "resourceVersion": rv},
        "spec": {"maxTrialCount": 3},
        "status": {
            "conditions": [{"type": c, "status": "True"} for c in conditions],
            "trialsSucceeded": succeeded,
        },
    }


def test_fields_changed_passes_only_a_change_at_one_of_its_paths() -> None:
    reads = fields_changed("spec", "status.conditions")
    old = _experiment(["Running"], 1, "1")
    assert not reads(old, _experiment(["Running"], 2, "2"))  # a count only
    assert reads(old, _experiment(["Running", "Succeeded"], 2, "2"))
    changed_spec = _experiment(["Running"], 1, "2")
    changed_spec["spec"] = {"maxTrialCount": 4}
    assert reads(old, changed_spec)
    assert reads({"metadata": {}}, old)  # a path that appears counts as a change


def test_changed_beyond_ignores_exactly_its_paths() -> None:
    reads = changed_beyond("metadata.resourceVersion", "status.trialsSucceeded")
    old = _experiment(["Running"], 1, "1")
    assert not reads(old, _experiment(["Running"], 2, "2"))
    assert reads(old, _experiment(["Running", "Succeeded"], 1, "2"))
    renamed = _experiment(["Running"], 1, "1")
    renamed["metadata"] = {**renamed["metadata"], "name": "f"}
    assert reads(old, renamed)  # the rest of metadata still counts
    assert old["metadata"]["resourceVersion"] == "1"  # the objects themselves are untouched
