"""Example objects of every kind and shape (Experiments, Suggestions, Trials as users and the
services write them), shared by the model, CRD, webhook and end-to-end tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).with_name("manifests")


def examples(kind: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(`file:name`, object) of every example, or of one kind, in a stable order."""
    out = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and kind in (None, doc.get("kind")):
                out.append((f"{path.stem}:{doc['metadata']['name']}", doc))
    return out
