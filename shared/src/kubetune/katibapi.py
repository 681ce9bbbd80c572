"""Katib's generated gRPC modules (`katib_api_pb2`, `katib_api_pb2_grpc` of `kubeflow-katib`)
without the SDK package around them, for every kubetune process that speaks Katib's gRPC API
(db-manager serves DBManager; the suggestion bridge calls Suggestion and EarlyStopping). The
`kubeflow-katib` package is an optional dependency (`kubetune[katib]`): only those import this.

`import kubeflow.katib.katib_api_pb2` first runs `kubeflow/katib/__init__.py`, which imports
the whole SDK and the Kubernetes client with it: 3.7 s on an idle core and minutes on a busy
node, all for two generated modules. A bare package object named `kubeflow.katib`, whose path
is the installed directory, lets Python import just those two (0.1 s). In a process that has
already imported the SDK the real package is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any

PACKAGE = "kubeflow.katib"


MISSING = "kubeflow-katib is not installed: its katib_api_pb2 module is needed"


def _installed_dirs() -> list[str]:
    """Where `kubeflow/katib` may be: directories, or places inside a zip on sys.path (the
    images keep pure-Python packages in one zip), so they are not checked as files here."""
    spec = importlib.util.find_spec("kubeflow")
    bases = (spec.submodule_search_locations or []) if spec else []
    if not bases:
        raise ImportError(MISSING)
    return [os.path.join(base, "katib") for base in bases]


def load() -> tuple[Any, Any]:
    """(katib_api_pb2, katib_api_pb2_grpc)."""
    if PACKAGE not in sys.modules:
        package = types.ModuleType(PACKAGE)
        package.__path__ = _installed_dirs()
        sys.modules[PACKAGE] = package
    try:
        return (
            importlib.import_module(f"{PACKAGE}.katib_api_pb2"),
            importlib.import_module(f"{PACKAGE}.katib_api_pb2_grpc"),
        )
    except ModuleNotFoundError as e:
        if e.name not in (f"{PACKAGE}.katib_api_pb2", f"{PACKAGE}.katib_api_pb2_grpc"):
            raise
        raise ImportError(MISSING) from e


pb, pb_grpc = load()
