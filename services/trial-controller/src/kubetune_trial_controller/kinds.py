"""Job kinds: the allow-list entries (`Kind.version.group`, Katib's `trialResources`) and the kind
a Trial's runSpec asks for.

Why an allow-list: the controller creates whatever object a Trial's runSpec describes, so the
operator of the cluster decides which kinds a Trial may create (and the controller's RBAC must
grant exactly those). Neighbours: `reconciling` asks `allowed()`; `main` parses the flag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JobKind:
    kind: str
    version: str
    group: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        """The allow-list spelling, `Kind.version.group` (`Kind.version` for the core group)."""
        return (
            f"{self.kind}.{self.version}.{self.group}"
            if self.group
            else (f"{self.kind}.{self.version}")
        )


class KindError(ValueError):
    """An allow-list entry or a runSpec that does not name a kind properly."""


def parse_entry(entry: str) -> JobKind:
    """`Job.v1.batch` -> JobKind("Job", "v1", "batch"); the group may contain dots.

    Raises:
        KindError: fewer than two parts, or an empty part.
    """
    parts = entry.strip().split(".", 2)
    if len(parts) < 2 or not all(parts):
        raise KindError(f"trial resource {entry!r} is not of the form Kind.version.group")
    return JobKind(parts[0], parts[1], parts[2] if len(parts) == 3 else "")


def parse_allow_list(entries: Iterable[str]) -> frozenset[JobKind]:
    """Every non-blank entry parsed; the first bad entry raises KindError."""
    return frozenset(parse_entry(e) for e in entries if e.strip())


def split_flag(value: str) -> list[str]:
    """The `--trial-resources` flag: entries separated by commas or whitespace."""
    return [part for part in value.replace(",", " ").split() if part]


def of_run_spec(run_spec: Mapping[str, Any] | None) -> JobKind:
    """The kind a runSpec asks for.

    Raises:
        KindError: runSpec missing, or without `apiVersion` / `kind`.
    """
    if not isinstance(run_spec, Mapping) or not run_spec:
        raise KindError("spec.runSpec is empty")
    api_version, kind = run_spec.get("apiVersion"), run_spec.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise KindError("spec.runSpec.apiVersion is missing")
    if not isinstance(kind, str) or not kind:
        raise KindError("spec.runSpec.kind is missing")
    group, _, version = api_version.rpartition("/")
    return JobKind(kind, version, group)
