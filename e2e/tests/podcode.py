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
import sys

from kubetune_testkit.deploying import ROOT
from kubetune_testkit.trialkinds import PodPython

TRAINING = ROOT / "examples" / "training" / "digits.py"
EXISTING = os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1"
PYTHON_IMAGE = os.environ.get("KUBETUNE_E2E_PYTHON_IMAGE", "python:3.11")
TRAINING_IMAGE = os.environ.get("KUBETUNE_E2E_TRAINING_IMAGE", PYTHON_IMAGE)


def python() -> str:
    """The interpreter a container runs."""
    return "python3" if EXISTING else sys.executable


POD_PYTHON = PodPython(python(), PYTHON_IMAGE)
"""How a trial container runs Python here (testkit's trialkinds builds the Experiments)."""
python_code = POD_PYTHON.code
python_words = POD_PYTHON.words


def training(*args: str) -> list[str]:
    """argv running examples/training/digits.py with ``args`` (shell-safe words)."""
    if EXISTING:
        return python_code(TRAINING.read_text(), *args)
    return [sys.executable, str(TRAINING), *args]
