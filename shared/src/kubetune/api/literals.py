"""The values of the v1beta1 enumerations a trial pod's collector reads, as plain strings.

Why: `kubetune.api.enums` makes them `StrEnum`s for the models, and importing `enum` (with
`functools` and `collections` behind it) and building the classes cost about a fifth of the
instructions the collector's start executes in every trial pod. `enums` takes its members'
values from here, so there is one list.
"""

from __future__ import annotations

MINIMIZE = "minimize"
MAXIMIZE = "maximize"
UNKNOWN = ""
"""An objective without a type (`ObjectiveType.UNKNOWN`)."""
OBJECTIVE_TYPES = (MINIMIZE, MAXIMIZE, UNKNOWN)

MIN = "min"
MAX = "max"
LATEST = "latest"
METRIC_STRATEGIES = (MIN, MAX, LATEST)

EQUAL = "equal"
LESS = "less"
GREATER = "greater"
COMPARISONS = (EQUAL, LESS, GREATER)
