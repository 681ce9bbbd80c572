"""The `pns-collector` console script as the pod runs it: flags, start-up errors, exit codes."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubetune import procwait

SCRIPT = shutil.which("pns-collector") or str(Path(sys.executable).parent / "pns-collector")


def base_args(log_dir: Path) -> list[str]:
    return [
        SCRIPT,
        "--trial-name=t1",
        "--namespace=ns",
        "--objective-metric=loss",
        "--objective-type=minimize",
        "--additional-metrics=accuracy;val-loss",
        "--metric-strategies=loss=min;accuracy=max",
        "--collector-kind=StdOut",
        f"--metrics-path={log_dir / 'metrics.log'}",
        f"--log-dir={log_dir}",
        "--expected-processes=1",
    ]


@pytest.fixture
def unreachable_kubeconfig(tmp_path: Path) -> Path:
    """An API server address nobody listens on: every report attempt fails to connect."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    return path


def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def test_help() -> None:
    out = run([SCRIPT, "--help"])
    assert out.returncode == 0
    for flag in ("--trial-name", "--expected-processes", "--early-stop-rule", "--filter"):
        assert flag in out.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--filter=(bad"], "filter '(bad' is not a valid regular expression"),
        (["--filter=(\\w+)=1"], "needs two groups"),
        (["--early-stop-rule=loss;x;less;1"], "value 'x' is not a finite number"),
        (["--metric-strategies=loss=median"], "want name=min|max|latest"),
        (["--collector-kind=File", "--format=JSON", "--filter=(a)(b)"], "cannot be used with"),
    ],
    ids=["regex", "groups", "rule", "strategy", "json-filter"],
)
def test_bad_input_is_a_clear_error_at_start_up(
    log_dir: Path, extra: list[str], message: str
) -> None:
    t0 = time.monotonic()
    out = run([*base_args(log_dir), *extra])
    assert out.returncode == 2
    assert message in out.stdout
    assert time.monotonic() - t0 < 20, "fails before waiting for any training process"


def test_report_that_cannot_be_written_exits_3(
    log_dir: Path, procs, unreachable_kubeconfig: Path
) -> None:
    procs.wrapped(log_dir, "echo loss=0.5")
    out = run([*base_args(log_dir), f"--kubeconfig={unreachable_kubeconfig}", "--report-timeout=1"])
    assert out.returncode == 3, out.stdout
    assert "cannot write the observation of trial ns/t1 after" in out.stdout


def test_failed_training_exits_1_even_when_the_report_fails_too(
    log_dir: Path, procs, unreachable_kubeconfig: Path
) -> None:
    procs.wrapped(log_dir, "echo loss=0.5; exit 4")
    out = run(
        [*base_args(log_dir), f"--kubeconfig={unreachable_kubeconfig}", "--report-timeout=0.5"]
    )
    assert out.returncode == 1, out.stdout
    assert "exited with code 4" in out.stdout


def test_collector_kind_none_only_waits(log_dir: Path, procs) -> None:
    procs.wrapped(log_dir, "sleep 0.2", tee=False)
    out = run([*base_args(log_dir), "--collector-kind=None", "--log-format=json"])
    assert out.returncode == 0, out.stdout
    assert '"level": "info"' in out.stdout and "completed" in out.stdout


def test_sigterm_exits_0(log_dir: Path, procs) -> None:
    procs.wrapped(log_dir, "sleep 60", tee=False)
    p = procs.popen([*base_args(log_dir), "--collector-kind=None"], stdout=subprocess.PIPE)
    assert p.stdout is not None
    assert b"collecting" in p.stdout.readline(), "started"
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    assert b"signal 15" in p.stdout.read()
    p.stdout.close()


def test_never_registering_training_exits_4(log_dir: Path) -> None:
    out = run([*base_args(log_dir), "--collector-kind=None", "--register-timeout=0.5"])
    assert out.returncode == 4
    assert "0 of 1 training process(es) registered" in out.stdout
    assert procwait.scan_registrations(log_dir) == {}


def test_the_collector_loads_neither_pydantic_nor_the_kubernetes_client() -> None:
    """Every trial pod starts a collector: on 2 cores at 8 trials of 3 s its start was a sixth
    of the machine, most of it importing those two (kubetune.incluster, kubetune.api.enums)."""
    script = (
        "import sys, kubetune_pns_collector.main\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'kubernetes'}))\n"
    )
    done = run([sys.executable, "-c", script])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
