"""Katib's SDK (kubeflow-katib from PyPI) in a venv of its own, made once and cached.

The SDK needs kubernetes <= 36 and kubetune pins 37, so the SDK cannot share the test env;
its pins are e2e/katib-sdk/requirements.txt, and the venv lives under
~/.cache/kubetune/katib-sdk/<hash of those pins> (a changed pin makes a new one).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from kubetune_testkit.deploying import ROOT

REQUIREMENTS = ROOT / "e2e" / "katib-sdk" / "requirements.txt"
CLIENT = ROOT / "e2e" / "katib-sdk" / "tune_and_read.py"
CACHE = Path(os.environ.get("KUBETUNE_CACHE", Path.home() / ".cache" / "kubetune"))


def sdk_python() -> str:
    """The interpreter of the SDK's venv, made (pip from PyPI) when missing."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    venv = CACHE / "katib-sdk" / digest
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if stamp.exists():
        return str(python)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    # Not the project's constraints (tox sets PIP_CONSTRAINT): this env pins its own.
    env = {k: v for k, v in os.environ.items() if k != "PIP_CONSTRAINT"}
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
        check=True,
        env=env,
    )
    stamp.write_text(digest)
    return str(python)
