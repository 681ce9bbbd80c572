"""Shared helpers: wrapped training processes run by the real sh wrapper, cleaned up after."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from kubetune import procwait, wrapperscript
from kubetune.api.common import ObjectiveSpec
from kubetune_pns_collector import collecting, parsing, summaries


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    d = tmp_path / "katib"
    d.mkdir()
    return d


class Procs:
    """Processes started by a test; every one (and its children) is killed afterwards."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def wrapped(
        self,
        log_dir: Path,
        command: str,
        *,
        tee: bool = True,
        shell: str = "sh",
        **kw: object,
    ) -> subprocess.Popen[bytes]:
        """A training container: `command` inside the webhook's wrapper (StdOut: tee)."""
        metrics = str(log_dir / "metrics.log") if tee else None
        script = wrapperscript.sh_wrap(command, str(log_dir), metrics_file=metrics)
        return self.popen([shell, "-c", script], **kw)

    def popen(self, argv: list[str], **kw: object) -> subprocess.Popen[bytes]:
        kw.setdefault("stdout", subprocess.DEVNULL)
        p = subprocess.Popen(argv, **kw)  # type: ignore[call-overload]
        self.started.append(p)
        return p  # type: ignore[no-any-return]

    @staticmethod
    def wait_registered(log_dir: Path, pid: int, timeout: float = 5.0) -> None:
        end = time.monotonic() + timeout
        while not os.path.exists(procwait.pid_file(log_dir, pid)):
            assert time.monotonic() < end, f"pid {pid} never registered"
            time.sleep(0.005)

    def cleanup(self) -> None:
        for p in self.started:
            if p.poll() is None:
                try:
                    for child in psutil.Process(p.pid).children(recursive=True):
                        child.kill()
                except psutil.NoSuchProcess:
                    pass
                p.kill()
            p.wait()


@pytest.fixture
def procs() -> Iterator[Procs]:
    ps = Procs()
    yield ps
    ps.cleanup()


def objective(
    name: str = "loss", kind: str = "minimize", more: tuple[str, ...] = ("accuracy",)
) -> ObjectiveSpec:
    return ObjectiveSpec(type=kind, objective_metric_name=name, additional_metric_names=list(more))


def _text_collector(
    log_dir: Path,
    *,
    expected: int = 1,
    path: Path | None = None,
    filters: tuple[str, ...] = (),
    register_timeout: float = 10.0,
    timeout: float | None = 30.0,
    spec: ObjectiveSpec | None = None,
) -> collecting.Collector:
    """A collector of a TEXT metrics file that reports nowhere (reporting is tested against
    the real API server in the integration tests)."""
    summary = summaries.RunningSummary(spec or objective())
    source = collecting.TextSource(
        path or log_dir / "metrics.log", parsing.TextParser(summary.names, filters)
    )
    settings = collecting.Settings(
        log_dir=log_dir, expected=expected, register_timeout=register_timeout, timeout=timeout
    )
    return collecting.Collector(settings, source, summary, None)


def _metric(observation: object, name: str) -> tuple[str | None, str | None, str | None]:
    for m in getattr(observation, "metrics", None) or []:
        if m.name == name:
            return (m.min, m.max, m.latest)
    raise AssertionError(f"no metric {name} in {observation}")


@pytest.fixture
def make_collector() -> Callable[..., collecting.Collector]:
    """`make_collector(log_dir, expected=.., path=.., filters=.., ...)`."""
    return _text_collector


@pytest.fixture
def metric_of() -> Callable[[object, str], tuple[str | None, str | None, str | None]]:
    """`metric_of(observation, name)` -> (min, max, latest)."""
    return _metric


@pytest.fixture
def spec() -> Callable[..., ObjectiveSpec]:
    """`spec(name="loss", kind="minimize", more=("accuracy",))`."""
    return objective
