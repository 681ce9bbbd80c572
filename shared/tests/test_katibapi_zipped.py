"""Katib's generated modules load from a zip on sys.path, as in kubetune's images (assemble.py
puts pure-Python packages, kubeflow-katib's among them, in one zip): db-manager crashed at
start on a real node when the loader looked for them as files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

MODULES = {
    "kubeflow/__init__.py": "",
    # The SDK's own package init is never run: only the two generated modules are wanted.
    "kubeflow/katib/__init__.py": "raise RuntimeError('the whole SDK was imported')",
    "kubeflow/katib/katib_api_pb2.py": "WHERE = __file__",
    "kubeflow/katib/katib_api_pb2_grpc.py": "WHERE = __file__",
}


def run_with(path: Path) -> subprocess.CompletedProcess[str]:
    code = "from kubetune import katibapi; print(katibapi.pb.WHERE, katibapi.pb_grpc.WHERE)"
    return subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_generated_modules_load_from_a_zip(tmp_path: Path) -> None:
    archive = tmp_path / "site-packages.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name, text in MODULES.items():
            z.writestr(name, text)
    done = run_with(archive)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        f"{archive}/kubeflow/katib/katib_api_pb2.py",
        f"{archive}/kubeflow/katib/katib_api_pb2_grpc.py",
    ]


def test_without_the_generated_modules_the_error_names_the_package(tmp_path: Path) -> None:
    archive = tmp_path / "site-packages.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("kubeflow/__init__.py", "")
    done = run_with(archive)
    assert "kubeflow-katib is not installed" in done.stderr, done.stderr
