"""The objective of every trial, in order, with the best-so-far line, as a PNG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubetune.api.common import ObjectiveSpec
from kubetune.observations import better, parse_number
from kubetune_cli.reading import TrialRow, UserError


def best_so_far(objective: ObjectiveSpec, values: Sequence[float | None]) -> list[float | None]:
    out: list[float | None] = []
    incumbent: float | None = None
    for value in values:
        if value is not None and better(objective, value, incumbent):
            incumbent = value
        out.append(incumbent)
    return out


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise UserError("plotting needs matplotlib: pip install 'kubetune-cli[plot]'") from e
    return plt


def plot_history(
    history: Mapping[str, Sequence[tuple[int, str, str]]], title: str, path: Path
) -> None:
    """Each metric's kept values by step (one axis per metric: their scales differ)."""
    plt = _pyplot()
    figure, axes = plt.subplots(
        len(history), 1, figsize=(8, 2.6 * len(history) + 0.6), squeeze=False, sharex=True
    )
    for ax, (name, points) in zip(axes[:, 0], history.items(), strict=True):
        numeric = [(step, parse_number(value)) for step, value, _ in points]
        kept = [(step, v) for step, v in numeric if v is not None]
        ax.plot([p[0] for p in kept], [p[1] for p in kept], marker=".", markersize=3)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step (report index)")
    axes[0, 0].set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot(rows: Sequence[TrialRow], objective: ObjectiveSpec, title: str, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise UserError("plotting needs matplotlib: pip install 'kubetune-cli[plot]'") from e
    values = [r.objective for r in rows]
    xs = list(range(1, len(rows) + 1))
    figure, axes = plt.subplots(figsize=(8, 4.5))
    points = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
    if points:
        axes.scatter([p[0] for p in points], [p[1] for p in points], label="trial", s=18)
    running = best_so_far(objective, values)
    steps = [(x, v) for x, v in zip(xs, running, strict=True) if v is not None]
    if steps:
        axes.step(
            [s[0] for s in steps],
            [s[1] for s in steps],
            where="post",
            color="tab:red",
            label="best so far",
        )
    axes.set_xlabel("trial (in creation order)")
    axes.set_ylabel(f"{objective.objective_metric_name} ({objective.type or 'objective'})")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
