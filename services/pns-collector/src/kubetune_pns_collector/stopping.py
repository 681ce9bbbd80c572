"""Early-stopping rules (`--early-stop-rule name;value;comparison;startStep`), evaluated as
values stream in (docs/user-guide.md, Early stopping).

A rule fires once its metric, from its `startStep`-th report on, compares to `value` as asked;
for the objective metric the best value so far (by the objective type) is compared, as
upstream does for the median-stop algorithm. When every rule has fired the trial is stopped.
Deliberate difference: upstream checks a rule with a start step only at exactly that report
(its countdown goes negative afterwards and never matches again); we check every report from
that step on.
"""

from __future__ import annotations

from kubetune import observations
from kubetune.api.literals import COMPARISONS, GREATER, LESS, MAXIMIZE, MINIMIZE
from kubetune.plain import Frozen
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


class RuleError(ValueError):
    """An early-stopping rule flag that cannot be parsed; the message names it."""


class Rule(Frozen):
    __slots__ = ("comparison", "name", "start_step", "value")

    def __init__(self, name: str, value: float, comparison: str, start_step: int = 0) -> None:
        self.name = name
        self.value = value
        self.comparison = comparison
        self.start_step = start_step

    def holds(self, number: float) -> bool:
        if self.comparison == LESS:
            return number < self.value
        if self.comparison == GREATER:
            return number > self.value
        return number == self.value


def parse_rule(text: str) -> Rule:
    """`name;value;comparison[;startStep]`."""
    parts = text.split(";")
    if len(parts) not in (3, 4) or not parts[0]:
        raise RuleError(f"early-stop rule {text!r}: want name;value;comparison;startStep")
    value = observations.parse_number(parts[1])
    if value is None:
        raise RuleError(
            f"early-stop rule {text!r}: value {parts[1]!r} is not a finite number "
            '(ASCII digits with an optional fraction and exponent, e.g. "0.25")'
        )
    comparison = parts[2]
    if comparison not in COMPARISONS:
        raise RuleError(f"early-stop rule {text!r}: comparison must be equal, less or greater")
    try:
        start = int(parts[3]) if len(parts) == 4 and parts[3] else 0
    except ValueError as e:
        raise RuleError(f"early-stop rule {text!r}: startStep {parts[3]!r} is no integer") from e
    if start < 0:
        raise RuleError(f"early-stop rule {text!r}: startStep must be >= 0")
    return Rule(parts[0], value, comparison, start)


class EarlyStopper:
    """Feeds on metric values in order; `triggered` once every rule has fired."""

    def __init__(self, rules: Sequence[Rule], objective: str, objective_type: str):
        self.pending = list(rules)
        self.objective = objective
        self.objective_type = objective_type
        self.names = frozenset(r.name for r in rules)
        self._counts: dict[str, int] = {}
        self._best: float | None = None
        self.fired: list[Rule] = []

    @property
    def triggered(self) -> bool:
        return bool(self.fired) and not self.pending

    def observe(self, name: str, value: str) -> bool:
        """Take one value; True when this value made the last rule fire."""
        if name not in self.names or not self.pending:
            return False
        # The values the summary keeps, and of them the finite ones (the one rule for ranking).
        if observations.metric_error(name, value) is not None:
            return False
        number = observations.parse_number(value)
        if number is None:
            return False
        count = self._counts.get(name, 0) + 1
        self._counts[name] = count
        if name == self.objective:
            best = self._best
            if (
                best is None
                or (self.objective_type == MAXIMIZE and number > best)
                or (self.objective_type == MINIMIZE and number < best)
            ):
                self._best = number
            assert self._best is not None
            number = self._best
        for rule in [r for r in self.pending if r.name == name]:
            if count >= rule.start_step and rule.holds(number):
                self.pending.remove(rule)
                self.fired.append(rule)
        return self.triggered
