"""The objective of every trial, in order, with the best-so-far line, as a PNG; for several
objectives, the trials and their Pareto front (two: a scatter; three or more: parallel
coordinates, each objective on its own axis scaled to its range)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubetune import multiobjective, pareto
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


def front_of(rows: Sequence[TrialRow], objective: ObjectiveSpec) -> tuple[list[TrialRow], set[str]]:
    """The Succeeded trials with every objective's value, and the names of those on the front
    (the experiment-controller's rule: `kubetune.pareto` on the values to minimise)."""
    maximize = multiobjective.maximized(objective)
    scored = [
        r
        for r in rows
        if r.state == "Succeeded" and len(r.values) == len(maximize) and None not in r.values
    ]
    points = [
        multiobjective.minimised([v for v in r.values if v is not None], maximize) for r in scored
    ]
    return scored, {scored[i].name for i in pareto.front(points)}


def plot_front(rows: Sequence[TrialRow], objective: ObjectiveSpec, title: str, path: Path) -> None:
    plt = _pyplot()
    targets = multiobjective.targets(objective)
    labels = [f"{name} ({kind})" for name, kind in targets]
    scored, front = front_of(rows, objective)
    if not scored:
        raise UserError("no Succeeded trial has a value for every objective yet")
    others = [r for r in scored if r.name not in front]
    best = sorted((r for r in scored if r.name in front), key=lambda r: r.name)
    figure, axes = plt.subplots(figsize=(8, 4.8))
    if len(targets) == 2:
        for group, style in ((others, {"color": "tab:gray", "label": "trial"}),
                             (best, {"color": "tab:red", "label": "Pareto front"})):  # fmt: skip
            axes.scatter([r.values[0] for r in group], [r.values[1] for r in group], s=20, **style)
        ordered = sorted(best, key=lambda r: (r.values[0] or 0.0, r.values[1] or 0.0))
        axes.plot([r.values[0] for r in ordered], [r.values[1] for r in ordered], color="tab:red")
        axes.set_xlabel(labels[0])
        axes.set_ylabel(labels[1])
    else:
        columns = list(zip(*(r.values for r in scored), strict=True))
        lows = [min(c) for c in columns if None not in c]
        spans = [(max(c) - low) or 1.0 for c, low in zip(columns, lows, strict=True)]
        xs = list(range(len(targets)))

        def scaled(row: TrialRow) -> list[float]:
            return [
                ((v or 0.0) - lo) / sp for v, lo, sp in zip(row.values, lows, spans, strict=True)
            ]

        for row in others:
            axes.plot(xs, scaled(row), color="tab:gray", alpha=0.35, linewidth=0.8)
        for row in best:
            axes.plot(xs, scaled(row), color="tab:red", alpha=0.8, linewidth=1.4)
        axes.plot([], [], color="tab:gray", label="trial")
        axes.plot([], [], color="tab:red", label="Pareto front")
        axes.set_xticks(xs, labels)
        axes.set_ylabel("value, scaled to each objective's range")
    axes.set_title(f"{title}: {len(front)} of {len(scored)} trials on the Pareto front")
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
