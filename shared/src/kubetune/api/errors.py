"""Turn pydantic's validation errors into `path: what is wrong` lines users can act on."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError


class ManifestError(ValueError):
    """A manifest that does not fit the v1beta1 schema; `problems` holds one line per field."""

    def __init__(self, kind: str, problems: Sequence[str]) -> None:
        self.kind = kind
        self.problems = list(problems)
        super().__init__(f"invalid {kind}: " + "; ".join(self.problems))


def field_path(loc: Sequence[int | str]) -> str:
    """`("spec", "parameters", 2, "feasibleSpace")` -> `spec.parameters[2].feasibleSpace`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif path:
            path += f".{part}"
        else:
            path = part
    return path or "(root)"


def describe(error: ValidationError) -> list[str]:
    """One `path: message` line per problem, with pydantic's internals left out."""
    lines = []
    for problem in error.errors(include_url=False):
        # Tagged unions and validators add non-field parts (e.g. "function-before[...]").
        loc = [p for p in problem["loc"] if isinstance(p, int) or "[" not in p]
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            message = "unknown field; check its spelling against the v1beta1 API"
        lines.append(f"{field_path(loc)}: {message}")
    return lines
