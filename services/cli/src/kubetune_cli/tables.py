"""Plain-text tables: left-aligned columns sized to their content, like `kubectl get`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from kubetune.metricbounds import is_number
from kubetune_cli.reading import TrialRow

SIGNIFICANT_DIGITS = 4
"""Digits a table shows of a number with a fraction: `0.7698433199853741` reads `0.7698`.
`-o json` keeps every value as stored."""

_FRACTION_OR_EXPONENT = re.compile(r"[.eE]")


def render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [header, *rows]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def format_value(value: float | None) -> str:
    """A number for a table (`-` when missing): `SIGNIFICANT_DIGITS` of it, and whole numbers up
    to 10^15 in full rather than as `1.235e+05`."""
    if value is None:
        return "-"
    text = f"{value:.{SIGNIFICANT_DIGITS}g}"
    if "e+" in text and abs(value) < 1e15:
        return f"{value:.0f}"
    return text


def readable(value: str) -> str:
    """A stored value (a parameter or a metric, always text) for a table: a number with a
    fraction or an exponent shortened by `format_value`; integers, categories, `unavailable`
    and non-finite numbers as written (an integer parameter such as a batch size is exact)."""
    if not is_number(value) or not _FRACTION_OR_EXPONENT.search(value):
        return value
    number = float(value)
    return format_value(number) if math.isfinite(number) else value


def _parameter_names(rows: Sequence[TrialRow]) -> list[str]:
    names: list[str] = []
    for row in rows:
        names += [p for p in row.parameters if p not in names]
    return names


def _cells(row: TrialRow, parameter_names: Sequence[str]) -> list[str]:
    return [
        row.name,
        row.state,
        *(readable(row.parameters.get(p, "")) for p in parameter_names),
        format_value(row.objective),
    ]


def trial_table(rows: Sequence[TrialRow], metric: str) -> str:
    parameter_names = _parameter_names(rows)
    header = ["TRIAL", "STATE", *(p.upper() for p in parameter_names), metric.upper()]
    return render(header, [_cells(row, parameter_names) for row in rows])


class StreamedTable:
    """A trial table printed a page at a time: the first page fixes the columns and their
    widths (a longer cell later only widens its own line), so rows show before all are read."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        self.parameter_names: list[str] | None = None
        self.widths: list[int] = []

    def lines(self, rows: Sequence[TrialRow]) -> list[str]:
        out: list[str] = []
        if self.parameter_names is None:
            self.parameter_names = _parameter_names(rows)
            header = ["TRIAL", "STATE", *(p.upper() for p in self.parameter_names)]
            header.append(self.metric.upper())
            self.widths = [len(cell) for cell in header]
            for row in rows:
                cells = _cells(row, self.parameter_names)
                self.widths = [max(w, len(c)) for w, c in zip(self.widths, cells, strict=True)]
            out.append(self._line(header))
        out += [self._line(_cells(row, self.parameter_names)) for row in rows]
        return out

    def _line(self, cells: Sequence[str]) -> str:
        return "   ".join(c.ljust(w) for c, w in zip(cells, self.widths, strict=True)).rstrip()


SORT_KEYS = ("created", "name", "state", "metric")


def sort_rows(rows: Sequence[TrialRow], key: str, descending: bool) -> list[TrialRow]:
    if key == "metric":
        with_value = [r for r in rows if r.objective is not None]
        without = [r for r in rows if r.objective is None]
        ordered = sorted(with_value, key=lambda r: r.objective or 0.0, reverse=descending)
        return ordered + without
    attribute = {"created": "created", "name": "name", "state": "state"}[key]
    return sorted(rows, key=lambda r: str(getattr(r, attribute)), reverse=descending)


def history_table(history: Mapping[str, Sequence[tuple[int, str, str]]]) -> str:
    """One row per kept step (0-based report index), one column per metric; a metric whose
    value at that step was thinned away (or never reported) shows `-`."""
    names = list(history)
    by_step: dict[int, dict[str, tuple[str, str]]] = {}
    for name, points in history.items():
        for step, value, time in points:
            by_step.setdefault(step, {})[name] = (value, time)
    rows = []
    for step in sorted(by_step):
        cells = by_step[step]
        time = next(iter(cells.values()))[1]
        values = (readable(cells[n][0]) if n in cells else "-" for n in names)
        rows.append([str(step), time, *values])
    return render(["STEP", "TIME", *(n.upper() for n in names)], rows)
