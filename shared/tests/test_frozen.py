"""Cached objects are read-only: a write raises; `thaw` and `copy.deepcopy` give a plain copy."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest

from kubetune.runtime.frozen import FrozenDict, FrozenError, FrozenList, freeze, thaw

TRIAL: dict[str, Any] = {
    "metadata": {"name": "t", "labels": {"exp": "e"}, "ownerReferences": [{"name": "e"}]},
    "spec": {"parameterAssignments": [{"name": "lr", "value": "0.1"}]},
    "status": {"conditions": [{"type": "Created", "status": "True"}]},
}

WRITES: list[Callable[[Any], object]] = [
    lambda o: o.__setitem__("x", 1),
    lambda o: o.__delitem__("metadata"),
    lambda o: o.pop("metadata"),
    lambda o: o.popitem(),
    lambda o: o.setdefault("x", 1),
    lambda o: o.update(x=1),
    lambda o: o.clear(),
    lambda o: o["metadata"].__setitem__("name", "other"),
    lambda o: o["metadata"]["labels"].update(exp="other"),
    lambda o: o["metadata"]["ownerReferences"].append({}),
    lambda o: o["metadata"]["ownerReferences"][0].__setitem__("name", "x"),
    lambda o: o["spec"]["parameterAssignments"].__setitem__(0, {}),
    lambda o: o["spec"]["parameterAssignments"].extend([{}]),
    lambda o: o["spec"]["parameterAssignments"].insert(0, {}),
    lambda o: o["spec"]["parameterAssignments"].pop(),
    lambda o: o["spec"]["parameterAssignments"].remove({}),
    lambda o: o["spec"]["parameterAssignments"].sort(),
    lambda o: o["spec"]["parameterAssignments"].reverse(),
    lambda o: o["spec"]["parameterAssignments"].clear(),
    lambda o: o["status"]["conditions"].__delitem__(0),
]


@pytest.mark.parametrize("write", WRITES)
def test_every_write_into_a_frozen_object_raises(write: Callable[[Any], object]) -> None:
    frozen = freeze(copy.deepcopy(TRIAL))
    with pytest.raises(FrozenError, match="thaw"):
        write(frozen)
    assert frozen == TRIAL


def test_in_place_operators_raise_too() -> None:
    frozen = freeze(copy.deepcopy(TRIAL))
    conditions = frozen["status"]["conditions"]
    with pytest.raises(FrozenError):
        conditions += [{}]
    with pytest.raises(FrozenError):
        conditions *= 2
    metadata = frozen["metadata"]
    with pytest.raises(FrozenError):
        metadata |= {"x": 1}
    assert frozen == TRIAL


def test_a_frozen_object_reads_and_encodes_as_a_plain_one() -> None:
    frozen = freeze(copy.deepcopy(TRIAL))
    assert isinstance(frozen, dict) and isinstance(frozen["status"]["conditions"], list)
    assert json.loads(json.dumps(frozen)) == TRIAL
    assert frozen.get("spec", {})["parameterAssignments"][0]["value"] == "0.1"
    assert freeze(frozen) is frozen, "freezing twice costs nothing"


@pytest.mark.parametrize("copier", [thaw, copy.deepcopy, lambda o: pickle.loads(pickle.dumps(o))])
def test_thaw_and_deepcopy_give_a_plain_changeable_copy(copier: Callable[[Any], Any]) -> None:
    frozen = freeze(copy.deepcopy(TRIAL))
    mine = copier(frozen)
    assert mine == TRIAL
    for value in (mine, mine["metadata"], mine["status"]["conditions"]):
        assert type(value) in (dict, list)
    mine["metadata"]["labels"]["exp"] = "changed"
    mine["status"]["conditions"].append({"type": "Running"})
    assert frozen == TRIAL


def test_shallow_copies_are_changeable_at_the_top_only() -> None:
    frozen = freeze(copy.deepcopy(TRIAL))
    top = copy.copy(frozen)
    top["spec"] = {}
    assert frozen == TRIAL
    with pytest.raises(FrozenError):
        top["metadata"]["name"] = "x"
    assert type(copy.copy(frozen["status"]["conditions"])) is list


def test_thaw_copies_read_only_mappings_and_tuples_that_transforms_share() -> None:
    shared = MappingProxyType({"conditions": (MappingProxyType({"type": "Succeeded"}),)})
    frozen = freeze({"status": shared})
    assert frozen["status"] is shared, "a transform's shared read-only part stays shared"
    assert thaw(frozen) == {"status": {"conditions": [{"type": "Succeeded"}]}}


def test_the_frozen_types_are_the_plain_ones_underneath() -> None:
    assert issubclass(FrozenDict, dict) and issubclass(FrozenList, list)
