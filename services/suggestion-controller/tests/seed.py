"""The Suggestion condition sequences of the seed resume-from-volume, step by step.

Written out literally (not taken from the controller's constants) so a changed type, status,
reason or message fails the tests. On restart the seed's prose says Running True and its code
`ConditionFalse`; the code is followed, as upstream's controller does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Step = tuple[str, ...]

FROM_VOLUME_END = "Suggestion is succeeded, suggestion volume is not deleted, can be restarted"

FIRST_RUN: list[Step] = [
    ("set", "Created", "True", "SuggestionCreated", "Suggestion is created"),
    ("set", "DeploymentReady", "False", "DeploymentNotReady", "Deployment is not ready"),
    ("set", "DeploymentReady", "True", "DeploymentReady", "Deployment is ready"),
    ("set", "Running", "True", "SuggestionRunning", "Suggestion is running"),
    ("set", "Running", "False", "Suggestion is succeeded", "Suggestion is succeeded"),
    ("set", "DeploymentReady", "False", "Suggestion is succeeded", "Suggestion is succeeded"),
    ("set", "Succeeded", "True", "Experiment is succeeded", FROM_VOLUME_END),
]
RESTART: list[Step] = [
    ("set", "Running", "False", "Experiment is restarting", "Suggestion is not running"),
    ("remove", "Succeeded"),
    *FIRST_RUN[1:],
]


def steps(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> list[Step]:
    """The moves from one `status.conditions` (wire form) to the next, in the order the
    controller made them: ("set", type, status, reason, message) for each new or changed entry
    (a set entry moves to the end of the list), then ("remove", type) for each entry gone."""
    old = {c["type"]: c for c in before}
    new = {c["type"] for c in after}
    out: list[Step] = [
        ("set", c["type"], c["status"], c.get("reason") or "", c.get("message") or "")
        for c in after
        if old.get(c["type"]) != c
    ]
    out += [("remove", c["type"]) for c in before if c["type"] not in new]
    return out


def history(versions: Sequence[Sequence[dict[str, Any]]]) -> list[Step]:
    """Every move across successive versions of the conditions, starting from none."""
    out: list[Step] = []
    previous: Sequence[dict[str, Any]] = []
    for conds in versions:
        out += steps(previous, conds)
        previous = conds
    return out
