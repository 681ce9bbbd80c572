"""Where the repository's files are: tests read files of this checkout only."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
KUSTOMIZE = REPO / "kustomize"
BASE = KUSTOMIZE / "base"
CRDS = BASE / "crds"
EXAMPLES = REPO / "examples"

if not (CRDS.is_dir() and (REPO / "tox.ini").is_file()):
    raise ImportError(
        f"kubetune_testkit found no kubetune checkout at {REPO}: install it editable from the "
        "repository (`pip install -e testkit`), as tox.ini does"
    )
