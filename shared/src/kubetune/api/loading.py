"""`load(manifest)`: a Katib manifest as its model, picked by `kind`, with schema problems as a
`ManifestError` whose lines name the field path, never a traceback."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kubetune.api.base import WireModel
from kubetune.api.errors import ManifestError, describe
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion
from kubetune.api.trial import Trial

KINDS: dict[str, type[WireModel]] = {
    "Experiment": Experiment,
    "Suggestion": Suggestion,
    "Trial": Trial,
}


def load(manifest: Any) -> Experiment | Suggestion | Trial:
    """Validate a manifest (a dict as parsed from YAML/JSON) into its model.

    Raises:
        ManifestError: the manifest is not an object, names an unknown kind, or has bad fields.
    """
    if not isinstance(manifest, dict):
        raise ManifestError(
            "manifest", [f"(root): expected an object, got {type(manifest).__name__}"]
        )
    kind = manifest.get("kind")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        known = ", ".join(KINDS)
        raise ManifestError("manifest", [f"kind: {kind!r} is not one of {known}"])
    try:
        loaded = model.model_validate(manifest)
    except ValidationError as e:
        raise ManifestError(str(kind), describe(e)) from e
    assert isinstance(loaded, Experiment | Suggestion | Trial)
    return loaded
