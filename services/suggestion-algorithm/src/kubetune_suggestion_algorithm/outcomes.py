"""What a finished Trial tells an algorithm, apart from any algorithm (no Optuna import)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """What a finished Trial tells the study: a value, or failure (value None); `further`:
    the values of the objectives after the first (multi-objective Experiments)."""

    value: float | None
    further: tuple[float, ...] = ()

    def told(self) -> float | list[float]:
        """The value(s) `study.tell` takes: one per objective of the study."""
        assert self.value is not None
        return [self.value, *self.further] if self.further else self.value
