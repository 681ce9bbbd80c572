"""Katib's SDK (kubeflow-katib from PyPI) in a venv of its own, made once and cached.

The SDK needs kubernetes <= 36 and kubetune pins 37, so the SDK cannot share the test env;
its pins are e2e/katib-sdk/requirements.txt, and the venv lives under
~/.cache/kubetune/katib-sdk/<hash of those pins> (a changed pin makes a new one).
`trial_metrics` is the SDK's `get_trial_metrics` as a test calls it from this host.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kubetune import naming
from kubetune_testkit import builders
from kubetune_testkit.accounts import service_account_token
from kubetune_testkit.deploying import ROOT

REQUIREMENTS = ROOT / "e2e" / "katib-sdk" / "requirements.txt"
CLIENT = ROOT / "e2e" / "katib-sdk" / "tune_and_read.py"
PUSHER = ROOT / "e2e" / "katib-sdk" / "push_and_read.py"
CACHE = Path(os.environ.get("KUBETUNE_CACHE", Path.home() / ".cache" / "kubetune"))
PUSHED_LOSSES = ("0.9", "0.5", "0.7", "0.3")
"""What the push tests' trial reports, one per epoch (PUSHER's `report` modes)."""


def one_trial_experiment(
    name: str, namespace: str, trial_spec: dict[str, Any], collector: str | None = "Push"
) -> dict[str, Any]:
    """One trial minimizing `loss` whose `training` container talks to db-manager with the SDK
    (collector kind Push by default), its pod retained for its log and address."""
    exp = builders.experiment(
        name,
        namespace,
        objective_spec=builders.objective("loss", "minimize", strategies=False),
        parameters=[builders.categorical("x", ["a"])],
        trial_parameters=builders.references(x="x"),
        primary_container="training",
        trial_spec=trial_spec,
        collector=collector,
        maxTrialCount=1,
        parallelTrialCount=1,
    )
    exp["spec"]["trialTemplate"]["retain"] = True
    return exp


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


def trial_metrics(cluster: Any, address: str, namespace: str, trial: str) -> list[list[str]]:
    """`KatibClient.get_trial_metrics` of the Trial at db-manager's `address`, as rows
    [time, name, value] (push_and_read.py `read`). From this host no pod address proves
    anything, so it sends a token of an account that may get Trials (the
    experiment-controller's) for db-manager's audience."""
    token = service_account_token(
        cluster,
        "kubetune-experiment-controller",
        "kubeflow",
        "10m",
        f"--audience={naming.DB_MANAGER_AUDIENCE}",
    )
    out = subprocess.run(
        [sdk_python(), str(PUSHER), "read", address, namespace, trial],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "KUBECONFIG": str(cluster.kubeconfig),
            "PATH": "/usr/bin:/bin",
            "KUBETUNE_DB_MANAGER_TOKEN": token,
        },
    )
    assert out.returncode == 0, out.stderr[-4000:]
    rows: list[list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return rows
