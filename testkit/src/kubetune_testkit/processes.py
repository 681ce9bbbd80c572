"""A service's console script run as its own process against the test cluster.

Tests run the real command line (the one the image runs), so flags, signals and exit codes are
tested as shipped; the process's output goes to a log file the test prints on failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path


def console_script(name: str) -> str:
    """The path of an installed console script: this interpreter's, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(
            f"console script {name!r} is not installed: install its package in this env "
            "(tox.ini lists each env's packages)"
        )
    return found


def free_port() -> int:
    """A TCP port free on loopback now, for a server started right after: localcluster's pick,
    below the kernel's ephemeral range (a port the kernel picks from that range can be handed to
    any process's outgoing connection before the server binds it; CI runs many at once)."""
    from localcluster.cluster import free_port as below_ephemeral  # wherever a cluster runs

    return below_ephemeral()


@dataclass
class ServiceProcess:
    """One console script; each `start` is a new run logging to `<log_dir>/<name>-<ident>N.log`."""

    script: str
    args: list[str]
    log_dir: Path
    ident: str = "a"
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    logs_of: list[Path] = field(default_factory=list)

    def start(self, *extra: str) -> ServiceProcess:
        """Start a run (the previous one must have ended), with `extra` arguments appended."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.runs += 1
        log = self.log_dir / f"{Path(self.script).name}-{self.ident}{self.runs}.log"
        self.logs_of.append(log)
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [console_script(self.script), *self.args, *extra],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
            )
        return self

    def _env(self) -> dict[str, str]:
        """The run's environment, with Python's fault handler on: a run that outlives its
        SIGTERM gets SIGABRT, which makes the handler write every thread's stack to the log."""
        return {**(os.environ if self.env is None else self.env), "PYTHONFAULTHANDLER": "1"}

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        """The current run's process."""
        assert self.proc is not None, f"{self.script} was never started"
        return self.proc

    def kill(self) -> None:
        """SIGKILL: the harshest restart, no cleanup at all."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM and wait; the exit code (None when never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGABRT)  # the fault handler dumps the stacks
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.kill()
                raise AssertionError(
                    f"{self.script} still ran {timeout:.0f} s after SIGTERM; its threads' "
                    f"stacks are at the end of its log:\n{self.logs()}"
                ) from None
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        """All the runs' output (the current run's may still grow)."""
        return "\n".join(p.read_text(errors="replace") for p in self.logs_of if p.exists())

    def logs(self, tail: int = 6000) -> str:
        """The end of each run's log, for a failure message."""
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-tail:]}"
            for p in self.logs_of
            if p.exists()
        )
