"""Pod sandboxes and container processes on Linux namespaces (util-linux, as root).

A pod gets a pause process, PID 1 of a new PID + mount namespace (``unshare --pid --fork
--mount-proc --mount --propagation private``); killing it ends every process of the pod and
drops its mount namespace. A container is ``nsenter``-ed into that namespace and gets a
mount namespace of its own (its volumes are bind-mounted there only). With
``shareProcessNamespace`` it lives in the pod's PID namespace (top-level processes have
ppid 0 and see each other); otherwise it gets a nested PID namespace where it is PID 1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import IO, Any

import psutil

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")
WRAPPERS = ("nsenter", "unshare")


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    if not path:
        raise RuntimeError(f"{name} (util-linux) is required by the node agent")
    return path


def _child_of(pid: int, timeout: float = 5.0) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while True:
        try:
            kids = psutil.Process(pid).children()
        except psutil.NoSuchProcess as exc:
            raise RuntimeError(f"process {pid} exited before its child appeared") from exc
        if kids:
            return kids[0]
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} has no child after {timeout}s")
        time.sleep(0.002)


@dataclass
class Sandbox:
    """The pod's pause process and the unshare parent that holds it."""

    holder: subprocess.Popen[bytes]
    pause_pid: int
    pause_ctime: float

    @classmethod
    def create(cls, record_file: str) -> Sandbox:
        """Start the pause process; record its PID so a restarted agent can reap it."""
        # setpriv: the holder dies with the agent thread that started it (even on SIGKILL of
        # the agent); --kill-child: the pause process, and so the whole pod, dies with it.
        holder = subprocess.Popen(
            [
                _tool("setpriv"),
                "--pdeathsig",
                "KILL",
                "--",
                _tool("unshare"),
                "--pid",
                "--fork",
                "--kill-child=KILL",
                "--mount-proc",
                "--mount",
                "--propagation",
                "private",
                "sleep",
                "infinity",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        pause = _child_of(holder.pid)
        # The child is first a fork of unshare; wait until it has become sleep (/proc ready).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if pause.name() == "sleep":
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.002)
        sb = cls(holder, pause.pid, pause.create_time())
        with open(record_file, "w", encoding="utf-8") as fh:
            json.dump({"pid": sb.pause_pid, "ctime": sb.pause_ctime}, fh)
        return sb

    def alive(self) -> bool:
        """The pause process still runs."""
        return self.holder.poll() is None

    def kill(self) -> None:
        """SIGKILL the pause process: the kernel kills the whole pod namespace."""
        try:
            p = psutil.Process(self.pause_pid)
            if abs(p.create_time() - self.pause_ctime) < 0.01:
                p.kill()
        except psutil.NoSuchProcess:
            pass
        try:
            self.holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait()


def reap_recorded(record_file: str) -> bool:
    """Kill a pause process recorded by an earlier agent run, if it still exists."""
    try:
        with open(record_file, encoding="utf-8") as fh:
            rec = json.load(fh)
        p = psutil.Process(int(rec["pid"]))
        if abs(p.create_time() - float(rec["ctime"])) < 0.01:
            p.kill()
            return True
    except (OSError, ValueError, KeyError, psutil.NoSuchProcess):
        pass
    return False


class ContainerProcess:
    """One run of one container: the nsenter process on the host and its main process."""

    def __init__(
        self,
        sandbox: Sandbox,
        share_pid: bool,
        spec: dict[str, Any],
        spec_file: str,
        log: IO[bytes],
    ) -> None:
        with open(spec_file, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        argv = [
            _tool("nsenter"),
            "-t",
            str(sandbox.pause_pid),
            "--pid",
            "--mount",
            "--",
            _tool("unshare"),
            "--mount",
            "--propagation",
            "private",
        ]
        if not share_pid:
            argv += ["--pid", "--fork", "--mount-proc"]
        argv += ["--", sys.executable, "-I", "-S", LAUNCHER, spec_file]
        self.share_pid = share_pid
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
        self._main: int | None = None

    @property
    def id(self) -> str:
        """A containerID-like handle."""
        return f"proc://{self.popen.pid}"

    def main_pid(self) -> int | None:
        """Host PID of the container's main process (below the nsenter/unshare wrappers)."""
        if self._main is not None:
            return self._main
        try:
            proc = psutil.Process(self.popen.pid)
            depth = 1 if self.share_pid else 2
            for _ in range(depth):
                kids = proc.children()
                if not kids:
                    return None
                proc = kids[0]
        except psutil.NoSuchProcess:
            return None
        self._main = proc.pid
        return self._main

    def signal(self, sig: int) -> None:
        """Signal the main process (PID 1 of its namespace if not shared)."""
        pid = self.main_pid()
        if pid is None:
            deadline = time.monotonic() + 1
            while pid is None and time.monotonic() < deadline and self.popen.poll() is None:
                time.sleep(0.01)
                pid = self.main_pid()
        try:
            if pid is not None:
                os.kill(pid, sig)
            elif sig == signal.SIGKILL and self.popen.poll() is None:
                self.popen.kill()
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        """Block until it ends; the exit code as a container runtime reports it."""
        rc = self.popen.wait()
        return 128 - rc if rc < 0 else rc
