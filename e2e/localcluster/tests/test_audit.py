"""``up --audit``: the API server logs each request once, with who made it, at Metadata level.

Benches count requests by client from this log (``apiserver_request_total`` has no client
label), so each request must appear exactly once (no RequestReceived/ResponseStarted stages)
and carry the user, the verb and the resource, without bodies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import build
from localcluster import cluster as lc

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def audited() -> Iterator[lc.State]:
    if not build.have_binaries():
        pytest.fail("control-plane binaries are not built: run `localcluster build`")
    state_dir = Path(tempfile.mkdtemp(prefix="localcluster-audit-"))
    proc = subprocess.run(
        [sys.executable, "-m", "localcluster", "--state-dir", str(state_dir), "up", "--audit",
         "--no-nodeagent"],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    try:
        assert proc.returncode == 0, proc.stderr
        state = lc.State.load(state_dir)
        assert state is not None
        yield state
    finally:
        lc.down(state_dir, quiet=True)


def _events(state: lc.State) -> list[dict[str, Any]]:
    with open(state.audit_log, encoding="utf-8") as log:
        return [json.loads(line) for line in log]


def test_each_request_is_logged_once_with_its_client(audited: lc.State) -> None:
    name = f"audit-probe-{os.getpid()}"
    subprocess.run(
        [audited.kubectl, "--kubeconfig", audited.kubeconfig, "create", "configmap", name,
         "--from-literal=secret-looking=value"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    mine = [
        e
        for e in _events(audited)
        if (e.get("objectRef") or {}).get("name") == name and e["verb"] == "create"
    ]
    assert len(mine) == 1, mine
    event = mine[0]
    assert event["stage"] == "ResponseComplete"
    assert event["level"] == "Metadata"
    assert event["user"]["username"] == "localcluster-admin"
    assert event["userAgent"].startswith("kubectl/")
    assert event["objectRef"]["resource"] == "configmaps"
    assert "requestObject" not in event
    assert "value" not in json.dumps(event)
