"""Warm start (a kubetune extension of v1beta1): known results fed to the algorithm before its
first assignment, from earlier Experiments or ConfigMaps in the Experiment's namespace.

Kept in its own module so the Experiment and Suggestion models only gain one optional field
each: a Katib manifest without `spec.warmStart` is unchanged. The ConfigMap format and the
rules are in `kubetune.knownresults`.
"""

from __future__ import annotations

from typing import Literal

from kubetune.api.base import WireModel


class WarmStartSpec(WireModel):
    """`spec.warmStart`: where the known results come from (same namespace only)."""

    experiments: list[str] | None = None
    config_maps: list[str] | None = None


class WarmStartSource(WireModel):
    """What one source gave: results imported, results skipped and why nothing came."""

    kind: Literal["Experiment", "ConfigMap"]
    name: str
    imported: int = 0
    skipped: int = 0
    message: str | None = None


class WarmStartStatus(WireModel):
    """`status.warmStart`: written by the algorithm on its Suggestion, mirrored by the
    experiment-controller on the Experiment. Imported results are not Trials."""

    imported: int = 0
    skipped: int = 0
    sources: list[WarmStartSource] | None = None
