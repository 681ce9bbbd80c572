"""Pydantic models of the Katib v1beta1 API (kubeflow.org): Experiment, Suggestion, Trial.

`load(manifest)` picks the model by `kind` and turns schema problems into a `ManifestError`
whose lines name the field path, never a traceback.

Every name here is imported on first use (PEP 562): pydantic and its models cost CPU, and the
metrics collector, started in every trial pod, needs only `kubetune.api.enums`.
"""

from __future__ import annotations

from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from kubetune.api.base import API_VERSION, GROUP, VERSION, Condition, ObjectMeta, WireModel
    from kubetune.api.errors import ManifestError, describe
    from kubetune.api.experiment import Experiment
    from kubetune.api.loading import KINDS, load
    from kubetune.api.suggestion import Suggestion
    from kubetune.api.trial import Trial

_LAZY = {
    **dict.fromkeys(
        ("API_VERSION", "GROUP", "VERSION", "Condition", "ObjectMeta", "WireModel"),
        "kubetune.api.base",
    ),
    "ManifestError": "kubetune.api.errors",
    "describe": "kubetune.api.errors",
    "Experiment": "kubetune.api.experiment",
    "Suggestion": "kubetune.api.suggestion",
    "Trial": "kubetune.api.trial",
    "KINDS": "kubetune.api.loading",
    "load": "kubetune.api.loading",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # `__import__` with a fromlist answers the submodule itself; `importlib` (with `warnings`)
    # would be one more import in every trial pod's collector.
    return getattr(__import__(module, fromlist=[name]), name)


__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "VERSION",
    "Condition",
    "Experiment",
    "ManifestError",
    "ObjectMeta",
    "Suggestion",
    "Trial",
    "WireModel",
    "describe",
    "load",
]
