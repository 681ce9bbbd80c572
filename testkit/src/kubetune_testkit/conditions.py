"""Reading status conditions of any object as a dict, the way tests assert on them."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def conditions_of(obj: Obj | None) -> dict[str, Obj]:
    """The object's conditions by type (the last one of a type wins)."""
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def is_true(obj: Obj | None, type_: str) -> bool:
    """Whether the condition `type_` is there with status True."""
    return conditions_of(obj).get(type_, {}).get("status") == "True"


def true_condition(obj: Obj | None, type_: str) -> Obj | None:
    """The condition `type_` when its status is True, else None."""
    found = conditions_of(obj).get(type_)
    return found if found and found.get("status") == "True" else None


def last_condition(obj: Obj | None) -> tuple[str, str, str] | None:
    """(type, status, reason) of the last condition: a kubetune object's current state."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    if not conditions:
        return None
    last = conditions[-1]
    return (last["type"], last["status"], last.get("reason", ""))


def job_succeeded(job: Obj | None) -> bool:
    """Whether a batch/v1 Job has a succeeded pod (it completed)."""
    return bool(((job or {}).get("status") or {}).get("succeeded"))
