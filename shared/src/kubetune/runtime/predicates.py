"""Watch predicates (`Controller.watch(..., predicate=...)`) built from the fields a reconcile
reads: an update that changes none of them wakes no pass, and costs it no reads.

Why: a controller watches objects that others write often (an Experiment's status changes with
every Trial; a Suggestion's with every assignment); most of those writes change nothing the
watching controller decides on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetune.kube import Obj
from kubetune.runtime.controlling import Predicate


def _at(obj: Any, keys: list[str]) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def _without(obj: Mapping[str, Any], paths: list[list[str]]) -> dict[str, Any]:
    out = dict(obj)
    for head in {path[0] for path in paths}:
        rest = [path[1:] for path in paths if path[0] == head]
        if any(not tail for tail in rest):
            out.pop(head, None)
        elif isinstance(out.get(head), Mapping):
            out[head] = _without(out[head], rest)
    return out


def fields_changed(*paths: str) -> Predicate:
    """Passes an update that changes the value at one of `paths` (dotted: "status.conditions")."""
    split = [path.split(".") for path in paths]

    def changed(old: Obj, new: Obj) -> bool:
        return any(_at(old, keys) != _at(new, keys) for keys in split)

    return changed


def changed_beyond(*paths: str) -> Predicate:
    """Passes an update that changes anything but the values at `paths` (dotted)."""
    split = [path.split(".") for path in paths]

    def changed(old: Obj, new: Obj) -> bool:
        return _without(old, split) != _without(new, split)

    return changed
