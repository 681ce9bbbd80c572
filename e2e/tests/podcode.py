"""What trial containers run, on the local cluster and on an existing one (kind).

The local cluster's pods are host processes, so a container runs this interpreter and the
training script of this checkout. On an existing cluster (KUBETUNE_E2E_EXISTING_CLUSTER=1)
pods are real containers: they run ``python3`` of their image, the training script passed
inline (``python3 -c <source> <args>``), in ``KUBETUNE_E2E_TRAINING_IMAGE`` (an image with
NumPy and scikit-learn, e.g. the suggestion-algorithm image e2e/kind/run-e2e.sh names).

A wrapped training container's command is one shell line (Katib joins command and args with
spaces and runs them with ``sh -c``), so inline code is given as ``sh -c <quoted line>``: the
same program whether the container is wrapped or not.
"""

from __future__ import annotations

import os
import shlex
import sys

from kubetune_testkit.deploying import ROOT

TRAINING = ROOT / "examples" / "training" / "digits.py"
EXISTING = os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1"
PYTHON_IMAGE = os.environ.get("KUBETUNE_E2E_PYTHON_IMAGE", "python:3.11")
TRAINING_IMAGE = os.environ.get("KUBETUNE_E2E_TRAINING_IMAGE", PYTHON_IMAGE)


def python() -> str:
    """The interpreter a container runs."""
    return "python3" if EXISTING else sys.executable


def python_code(code: str, *args: str) -> list[str]:
    """argv running ``code`` with ``args``, wrapped by the webhook or not."""
    return ["sh", "-c", shlex.join([python(), "-c", code, *args])]


def python_words(code: str, *args: str) -> list[str]:
    """argv running ``code`` with ``args`` as the wrapper's shell line only: each element one
    quoted shell word, for a command another program's command is put before (Argo's
    executor), where ``sh -c`` would no longer come first."""
    return [shlex.quote(a) for a in [python(), "-c", code, *args]]


def training(*args: str) -> list[str]:
    """argv running examples/training/digits.py with ``args`` (shell-safe words)."""
    if EXISTING:
        return python_code(TRAINING.read_text(), *args)
    return [sys.executable, str(TRAINING), *args]
