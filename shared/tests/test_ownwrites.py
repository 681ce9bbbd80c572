"""A write's answer stands in for a cache that still holds the version it replaced, and only
then (pure: the objects are dicts as a watch cache holds them)."""

from __future__ import annotations

from kubetune.kube import Obj
from kubetune.runtime import OwnWrites


def _obj(rv: str, requests: int) -> Obj:
    return {"metadata": {"name": "s", "resourceVersion": rv}, "spec": {"requests": requests}}


def test_the_answer_stands_in_while_the_cache_holds_the_replaced_version() -> None:
    writes = OwnWrites()
    writes.wrote("s", "1", _obj("2", 3))
    assert writes.newest("s", _obj("1", 2)) == _obj("2", 3)
    assert writes.newest("s", _obj("1", 2)) == _obj("2", 3)  # until the cache moves on


def test_a_cache_past_the_write_wins_and_the_answer_is_forgotten() -> None:
    writes = OwnWrites()
    writes.wrote("s", "1", _obj("2", 3))
    assert writes.newest("s", _obj("5", 4)) == _obj("5", 4)  # someone wrote after us
    assert writes.newest("s", _obj("1", 2)) == _obj("1", 2)  # forgotten: no stale answer later


def test_an_object_gone_from_the_cache_stays_gone() -> None:
    writes = OwnWrites()
    writes.wrote("s", "1", _obj("2", 3))
    assert writes.newest("s", None) is None
    assert writes.newest("other", _obj("1", 1)) == _obj("1", 1)
