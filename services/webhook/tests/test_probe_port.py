"""`webhook serve --probe-port` on a port another process holds: a clear error, exit 2."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubetune_testkit.processes import console_script, free_port
from kubetune_testkit.webhook import clean_env
from kubetune_webhook import certificates

pytestmark = pytest.mark.integration


def test_a_probe_port_in_use_stops_the_webhook_naming_the_flag(
    cluster: Any, tmp_path: Path
) -> None:
    files = certificates.issue(tmp_path, ["localhost"], ["127.0.0.1"])
    with socket.create_server(("127.0.0.1", 0)) as holder:
        taken = int(holder.getsockname()[1])
        argv = [console_script("webhook"), "serve", "--address=127.0.0.1"]
        argv += [f"--port={free_port()}", f"--probe-port={taken}"]
        argv += [f"--cert-file={files.cert}", f"--key-file={files.key}"]
        argv += [f"--kubeconfig={cluster.kubeconfig}"]
        done = subprocess.run(
            argv, env=clean_env(), capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot serve probes on 127.0.0.1:{taken} (--probe-port)" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
