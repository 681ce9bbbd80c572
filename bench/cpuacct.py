"""CPU time per process group, exited processes included: cgroup v1 ``cpuacct``.

A bench that compares whole systems must count the CPU of processes that ran for a second
and are gone (a trial's collector, its training process) as well as the long-lived
controllers. A cpuacct cgroup charges every process in it, and its children, until they exit;
its ``cpuacct.usage`` keeps the total. So each group of processes gets a cgroup under
``/sys/fs/cgroup/cpuacct/<base>/``: the control plane's processes are put there once, and the
node agent's pods are sorted into a group per component (``PodSorter``) as they appear, by
their command line. Needs root and cgroup v1 with the cpuacct controller mounted.

A process is sorted the moment it execs its program (the kernel's process-events connector,
``ExecEvents``), not at the sorter's next poll: a container's launcher execs the container's
program in the same process, and what that program spends before it is moved stays with the
launcher's group. Polling every 50 ms left up to 50 ms of each program's start there, most of
a short-lived Python sidecar's start and all of a Go one's. The poll stays as the fallback.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/cpuacct")
# The node agent's own machinery around each container (pod sandbox, namespace entry, the
# launcher before it execs the container's program): the stand-in kubelet's and runtime's.
RUNTIME = "runtime"
RUNTIME_MARKERS = ("setpriv", "unshare", "nsenter", "launch.py", "sleep\0infinity")
OTHER = "other"


class CpuGroups:
    """cpuacct cgroups ``<base>/<group>``; removed again by ``close`` (processes left in
    them go back to the root group)."""

    def __init__(self, base: str) -> None:
        if not (ROOT / "cpuacct.usage").exists():
            raise SystemExit(
                f"no cgroup v1 cpuacct controller at {ROOT}: this bench needs it (and root)"
            )
        self.base = ROOT / base
        self.base.mkdir(exist_ok=True)
        self.groups: dict[str, Path] = {}

    def group(self, name: str) -> Path:
        path = self.groups.get(name)
        if path is None:
            path = self.base / name
            path.mkdir(parents=True, exist_ok=True)
            self.groups[name] = path
        return path

    def add(self, name: str, pid: int) -> None:
        """Move one process (all its threads) into the group; its later children follow."""
        with contextlib.suppress(ProcessLookupError, OSError):
            (self.group(name) / "cgroup.procs").write_text(str(pid))

    def pids(self, name: str) -> list[int]:
        try:
            return [int(p) for p in (self.group(name) / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def seconds(self) -> dict[str, float]:
        """CPU-s charged to each group so far (user + system, exited processes included)."""
        return {
            name: int((path / "cpuacct.usage").read_text()) / 1e9
            for name, path in self.groups.items()
        }

    def close(self) -> None:
        for name, path in sorted(self.groups.items(), key=lambda kv: -len(str(kv[1]))):
            for pid in self.pids(name):
                with contextlib.suppress(OSError):
                    (ROOT / "cgroup.procs").write_text(str(pid))
            with contextlib.suppress(OSError):
                path.rmdir()
        subdirs = [p for p in self.base.rglob("*") if p.is_dir()]
        for path in sorted(subdirs, key=lambda p: -len(str(p))):
            with contextlib.suppress(OSError):
                path.rmdir()
        with contextlib.suppress(OSError):
            self.base.rmdir()
        self.groups.clear()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""


# The kernel's process-events connector (linux/connector.h, linux/cn_proc.h).
NETLINK_CONNECTOR = 11
CN_IDX_PROC = CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_EVENT_EXEC = 0x00000002
NLMSG_DONE = 3
NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port
CN_MSG_HEADER = struct.Struct("=IIIIHH")  # idx, val, sequence, ack, length, flags
EVENT_HEADER = struct.Struct("=IIQ")  # what, cpu, timestamp (ns)
EXEC_EVENT = struct.Struct("=ii")  # pid, tgid


class ExecEvents:
    """Every exec on the machine, as it happens: a netlink socket subscribed to the proc
    connector (root only). ``pids`` yields the process id of each exec until ``close``."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        self.sock.bind((0, CN_IDX_PROC))
        listen = struct.pack("=I", PROC_CN_MCAST_LISTEN)
        message = CN_MSG_HEADER.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(listen), 0) + listen
        header = NLMSG_HEADER.pack(NLMSG_HEADER.size + len(message), NLMSG_DONE, 0, 0, 0)
        self.sock.send(header + message)
        self.sock.settimeout(0.2)

    def pids(self, stopping: threading.Event) -> Iterator[int]:
        start = NLMSG_HEADER.size + CN_MSG_HEADER.size
        while not stopping.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # ENOBUFS: events were dropped; the poll catches those up
                continue
            if len(data) < start + EVENT_HEADER.size + EXEC_EVENT.size:
                continue
            what, _, _ = EVENT_HEADER.unpack_from(data, start)
            if what == PROC_EVENT_EXEC:
                _, tgid = EXEC_EVENT.unpack_from(data, start + EVENT_HEADER.size)
                yield tgid

    def close(self) -> None:
        self.sock.close()


def _cpuacct_path(pid: int) -> str | None:
    """The process's cpuacct cgroup, relative to the hierarchy's root."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return path
    return None


class PodSorter(threading.Thread):
    """Moves the processes the node agent starts out of its group, into one per component.

    ``rules`` maps a command-line substring to a group (first match wins); the agent's own
    helpers and each container's launcher go to ``<prefix>runtime`` until they exec the
    container's program, anything unmatched to ``<prefix>other``. Polls every `interval` s:
    CPU a process uses before it is sorted stays with the group it was in. A second thread
    sorts each process of those groups the moment it execs (``ExecEvents``), where the kernel
    lets it.
    """

    def __init__(
        self,
        groups: CpuGroups,
        agent_group: str,
        agent_pid: int,
        rules: list[tuple[str, str]],
        prefix: str,
        interval: float = 0.05,
    ) -> None:
        super().__init__(daemon=True, name=f"pod-sorter-{prefix}")
        self.groups = groups
        self.agent_group = agent_group
        self.agent_pid = agent_pid
        self.rules = rules
        self.prefix = prefix
        self.interval = interval
        self.stopping = threading.Event()
        for _, name in rules:
            groups.group(prefix + name)
        groups.group(prefix + RUNTIME)
        groups.group(prefix + OTHER)
        self.unsorted = {
            "/" + str(groups.group(name).relative_to(ROOT))
            for name in (agent_group, prefix + RUNTIME)
        }
        self.lock = threading.Lock()
        self.execs: ExecEvents | None = None
        with contextlib.suppress(OSError):
            self.execs = ExecEvents()
        self.exec_thread = threading.Thread(
            target=self._sort_execs, daemon=True, name=f"exec-sorter-{prefix}"
        )

    def classify(self, pid: int) -> str | None:
        cmd = _cmdline(pid)
        if not cmd:
            return None
        if any(m in cmd for m in RUNTIME_MARKERS):
            return self.prefix + RUNTIME
        for marker, name in self.rules:
            if marker in cmd:
                return self.prefix + name
        return self.prefix + OTHER

    def sort(self, pid: int) -> None:
        if pid == self.agent_pid:
            return
        with self.lock:  # the poll and an exec event must not move one process apart
            group = self.classify(pid)
            if group is not None:
                self.groups.add(group, pid)

    def sort_once(self) -> None:
        waiting = self.groups.pids(self.agent_group) + self.groups.pids(self.prefix + RUNTIME)
        for pid in waiting:
            self.sort(pid)

    def _sort_execs(self) -> None:
        assert self.execs is not None
        for pid in self.execs.pids(self.stopping):
            if _cpuacct_path(pid) in self.unsorted:
                self.sort(pid)

    @property
    def on_exec(self) -> bool:
        """Whether processes are sorted as they exec (else only by the poll)."""
        return self.execs is not None

    def start(self) -> None:
        super().start()
        if self.execs is not None:
            self.exec_thread.start()

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self.sort_once()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)
        if self.execs is not None:
            self.exec_thread.join(timeout=5)
            self.execs.close()


@contextlib.contextmanager
def sorting(
    groups: CpuGroups, agent_group: str, agent_pid: int, rules: list[tuple[str, str]], prefix: str
) -> Iterator[PodSorter]:
    groups.add(agent_group, agent_pid)
    sorter = PodSorter(groups, agent_group, agent_pid, rules, prefix)
    sorter.start()
    try:
        yield sorter
    finally:
        sorter.stop()
