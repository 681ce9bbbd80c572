"""Cross-package tests; the `cluster` and `namespace` fixtures come from the localcluster plugin."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
