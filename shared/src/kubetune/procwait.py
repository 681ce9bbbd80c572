"""Wait for every training process of a pod to end, and tell how each one ended.

Why: a pod may hold several training containers next to sidecars that never exit (Argo's
``wait``, istio-proxy). Katib's first multi-PID waiter gave up after the first PID ended; this
one waits for *all* registered training processes and ignores every process nobody registered.

On-disk protocol (shared by the command wrapper the webhook injects and by the collector):

* Directory: the shared log dir, :data:`DEFAULT_LOG_DIR` (``/var/log/katib``) by default, an
  emptyDir mounted into the training container(s) and the collector.
* Registration file: ``<dir>/<pid>.pid`` where ``<pid>`` is the PID of the wrapper shell (``$$``)
  as seen in the pod's shared process namespace. Only files matching ``^[0-9]+\\.pid$`` count.
* Record: the first line of that file, ``\\n``-terminated (anything after it is ignored):

  - ``running``: written by the wrapper when it starts, before it runs the real command;
  - ``completed``: the command exited 0 (Katib's marker, kept for compatibility);
  - ``early-stopped``: the collector stopped the trial on purpose (Katib's marker); the wrapper
    keeps this record when it finds it at the end instead of overwriting it;
  - ``exit <code>``: the command exited with code 1..128;
  - ``signal <n>``: the command was killed by signal ``n`` (``sh`` reports ``128+n``).

  Every record except ``running`` is an *end record* and is final.
* Writing: the wrapper writes each record with one ``printf`` straight into the file, as
  Katib's ``echo completed >`` does (a temp file renamed over it took an ``mv`` process, a fork
  and exec in every trial pod, twice per trial). A reader can then see the file empty or cut
  short while a write is under way, so a record counts only once its line ends in ``\n``; once
  the process is gone the file is read as it is. Python writers (the collector's
  ``early-stopped`` mark, :func:`register`) still write ``<dir>/.<pid>.pid.tmp`` and rename it.
  Dot files are never registrations.

The waiter's reading of it:

* a registered process is finished when its end record exists, or when the process is gone;
* gone with no end record (still ``running``, empty, unreadable, garbled) means *vanished*, which
  counts as failed: ``SIGKILL``/OOM of the wrapper shell leaves exactly that;
* a process is "gone" when its PID no longer exists, is a zombie, or now belongs to a process
  created after the registration was written (PID reuse: the start time in
  ``/proc/<pid>/stat``, which on binding is compared with the registration's time, only
  accurate to about a second through the boot time, hence :data:`_CREATE_TIME_SLACK`, and
  after binding must stay the same). Read straight from ``/proc`` (Linux), not through psutil,
  whose import every trial pod's collector paid for.

How it waits: every ``poll`` seconds until the expected processes have registered; then, where
the kernel has pidfds (Linux >= 5.3), on a descriptor per process that becomes readable when it
exits, scanning for more registrations only every :data:`SCAN_WHILE_WAITING` seconds. Polling
every 20 ms for a whole run cost 2.6 % of a core per trial pod (0.26 CPU-s per 10 s); the
wrapper records the end before it exits, so the exit wakes the waiter with the record there.

The shell side of the protocol, the wrapper the webhook injects, is
:mod:`kubetune.wrapperscript`.
"""

from __future__ import annotations

import os
import select
import time

from kubetune.plain import Frozen
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import ClassVar

DEFAULT_LOG_DIR = "/var/log/katib"
RUNNING = "running"
COMPLETED = "completed"
EARLY_STOPPED = "early-stopped"
PID_FILE_SUFFIX = ".pid"
TMP_SUFFIX = ".tmp"


def _number_after(prefix: str, text: str, suffix: str = "") -> int | None:
    """The ASCII digits between `prefix` and `suffix` that make up all of `text`, as an int;
    else None, also for more than 18 digits (no PID or status has them, and `int` refuses
    strings of over 4,300). Plain string checks, no regexes: compiling them was paid in every
    pod."""
    if not (text.startswith(prefix) and text.endswith(suffix)):
        return None
    digits = text[len(prefix) : len(text) - len(suffix)]
    return int(digits) if len(digits) <= 18 and digits.isascii() and digits.isdigit() else None


# A start time derives from /proc/stat's whole-second boot time, so allow this much error
# when deciding whether a live PID is younger than its registration (i.e. a reused PID).
_CREATE_TIME_SLACK = 2.0
# Seconds between registration scans while every pending process is waited on by its pidfd.
SCAN_WHILE_WAITING = 0.25


class Outcome:
    """How a registered training process ended: one of the five below, compared with `is`.

    A plain class, not an `enum.Enum`: importing `enum` and building an enum class cost
    instructions in every trial pod's collector, for five constants."""

    __slots__ = ("value",)

    COMPLETED: ClassVar[Outcome]
    EARLY_STOPPED: ClassVar[Outcome]
    EXITED: ClassVar[Outcome]  # non-zero exit code
    SIGNALED: ClassVar[Outcome]
    VANISHED: ClassVar[Outcome]  # gone without an end record

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"<Outcome {self.value}>"

    @property
    def failed(self) -> bool:
        """Early stopping is a deliberate, successful end, as in Katib."""
        return self is not Outcome.COMPLETED and self is not Outcome.EARLY_STOPPED


Outcome.COMPLETED = Outcome("completed")
Outcome.EARLY_STOPPED = Outcome("early-stopped")
Outcome.EXITED = Outcome("exited")
Outcome.SIGNALED = Outcome("signaled")
Outcome.VANISHED = Outcome("vanished")


class Record(Frozen):
    """One parsed registration record."""

    __slots__ = ("code", "outcome", "raw", "running")

    def __init__(
        self,
        running: bool,
        outcome: Outcome | None = None,
        code: int | None = None,  # exit code for EXITED, signal number for SIGNALED
        raw: str = "",
    ) -> None:
        self.running = running
        self.outcome = outcome
        self.code = code
        self.raw = raw


class ProcessResult(Frozen):
    """The end of one registered training process."""

    __slots__ = ("code", "outcome", "pid", "record")

    def __init__(self, pid: int, outcome: Outcome, code: int | None, record: str) -> None:
        self.pid = pid
        self.outcome = outcome
        self.code = code
        self.record = record

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    def describe(self) -> str:
        if self.outcome is Outcome.EXITED:
            return f"pid {self.pid} exited with code {self.code}"
        if self.outcome is Outcome.SIGNALED:
            return f"pid {self.pid} was killed by signal {self.code}"
        if self.outcome is Outcome.VANISHED:
            return f"pid {self.pid} vanished without recording its end (record {self.record!r})"
        return f"pid {self.pid} {self.outcome.value}"


class WaitResult(Frozen):
    """Every registered training process and how it ended, ordered by PID."""

    __slots__ = ("processes",)

    def __init__(self, processes: tuple[ProcessResult, ...]) -> None:
        self.processes = processes

    @property
    def succeeded(self) -> bool:
        return bool(self.processes) and not self.failures

    @property
    def failures(self) -> tuple[ProcessResult, ...]:
        return tuple(p for p in self.processes if p.failed)

    @property
    def early_stopped(self) -> bool:
        return any(p.outcome is Outcome.EARLY_STOPPED for p in self.processes)


class WaitError(Exception):
    """Base of the waiter's errors."""


class NoTrainingProcess(WaitError):
    """No training process registered within ``register_timeout``: the wrapper never ran."""

    def __init__(self, log_dir: str, register_timeout: float, seen: int, expected: int) -> None:
        self.log_dir = log_dir
        self.register_timeout = register_timeout
        self.seen = seen
        self.expected = expected
        super().__init__(
            f"{seen} of {expected} training process(es) registered in {log_dir} within "
            f"{register_timeout:g}s (no <pid>{PID_FILE_SUFFIX} file appeared); is the training "
            "container's command wrapped?"
        )


class WaitTimeout(WaitError):
    """The overall timeout expired; ``still_running`` names the PIDs not yet finished."""

    def __init__(self, timeout: float, still_running: tuple[int, ...], partial: WaitResult) -> None:
        self.timeout = timeout
        self.still_running = still_running
        self.partial = partial
        pids = ", ".join(str(p) for p in still_running)
        super().__init__(
            f"timed out after {timeout:g}s waiting for training process(es) {pids} "
            f"({len(partial.processes)} finished)"
        )


def pid_file(log_dir: str | os.PathLike[str], pid: int) -> str:
    """The registration file of ``pid`` (a `str`: `pathlib`, with the `urllib.parse` it loads,
    cost every trial pod's collector 3 ms of CPU at start)."""
    return os.path.join(log_dir, f"{pid}{PID_FILE_SUFFIX}")


def format_exit_status(returncode: int) -> str:
    """End record for a return code: ``sh``'s ``$?`` (128+n = signal n) or Python's (-n)."""
    if returncode == 0:
        return COMPLETED
    if returncode < 0:
        return f"signal {-returncode}"
    if returncode > 128:
        return f"signal {returncode - 128}"
    return f"exit {returncode}"


def parse_record(text: str, *, whole_lines_only: bool = False) -> Record:
    """Parse a record; anything unknown is treated like ``running`` (no valid end recorded).

    `whole_lines_only` while the writer may still be writing: a first line without its ``\n``
    may be cut short (``exit 1`` of ``exit 137``), so it is read as ``running``.
    """
    if whole_lines_only and "\n" not in text:
        return Record(running=True, raw=text.strip())
    line = text.split("\n", 1)[0].strip()
    if line == COMPLETED:
        return Record(running=False, outcome=Outcome.COMPLETED, raw=line)
    if line == EARLY_STOPPED:
        return Record(running=False, outcome=Outcome.EARLY_STOPPED, raw=line)
    if (code := _number_after("exit ", line)) is not None:
        # "exit 0" is not a marker anyone writes; read it as completed rather than failing.
        if code == 0:
            return Record(running=False, outcome=Outcome.COMPLETED, raw=line)
        return Record(running=False, outcome=Outcome.EXITED, code=code, raw=line)
    if (number := _number_after("signal ", line)) is not None:
        return Record(running=False, outcome=Outcome.SIGNALED, code=number, raw=line)
    return Record(running=True, raw=line)


def write_record(log_dir: str | os.PathLike[str], pid: int, record: str) -> str:
    """Atomically (temp file + rename) write ``record`` as the first line of ``pid``'s file."""
    target = pid_file(log_dir, pid)
    tmp = os.path.join(log_dir, f".{pid}{PID_FILE_SUFFIX}{TMP_SUFFIX}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(record.strip() + "\n")
        fh.flush()
    os.replace(tmp, target)
    return target


def register(log_dir: str | os.PathLike[str], pid: int | None = None) -> str:
    """Register ``pid`` (default: this process) as a running training process."""
    os.makedirs(log_dir, exist_ok=True)
    return write_record(log_dir, os.getpid() if pid is None else pid, RUNNING)


def record_end(log_dir: str | os.PathLike[str], pid: int, returncode: int) -> str:
    """Record how ``pid``'s command ended, keeping an ``early-stopped`` mark the collector set."""
    current = read_record(log_dir, pid)
    if current is not None and current.outcome is Outcome.EARLY_STOPPED:
        return pid_file(log_dir, pid)
    return write_record(log_dir, pid, format_exit_status(returncode))


def mark_early_stopped(log_dir: str | os.PathLike[str], pid: int) -> str:
    """Mark ``pid`` as early-stopped (the collector does this before it stops the process)."""
    return write_record(log_dir, pid, EARLY_STOPPED)


def read_record(log_dir: str | os.PathLike[str], pid: int) -> Record | None:
    """The current record of ``pid``, or None when it has no registration file."""
    try:
        text = _read(pid_file(log_dir, pid))
    except FileNotFoundError:
        return None
    return parse_record(text)


def scan_registrations(log_dir: str | os.PathLike[str]) -> dict[int, str]:
    """All registration files in ``log_dir`` by PID (empty when the directory is missing)."""
    found: dict[int, str] = {}
    try:
        with os.scandir(log_dir) as it:
            for entry in it:
                pid = _number_after("", entry.name, PID_FILE_SUFFIX)
                if pid is not None:
                    found[pid] = os.fsdecode(entry.path)
    except FileNotFoundError:
        pass
    return found


class _Process(Frozen):
    """A live process, told apart from a later one given the same PID by its start time
    (clock ticks after boot, field 22 of ``/proc/<pid>/stat``)."""

    __slots__ = ("pid", "start")

    def __init__(self, pid: int, start: int) -> None:
        self.pid = pid
        self.start = start


class _Tracked:
    """A registration being watched; ``proc`` is bound once the live process was verified."""

    __slots__ = ("checked", "path", "pid", "pidfd", "proc", "result")

    def __init__(self, pid: int, path: str) -> None:
        self.pid = pid
        self.path = path
        self.proc: _Process | None = None
        self.checked = False
        self.result: ProcessResult | None = None
        self.pidfd: int | None = None  # readable once the process exits; None where none


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks after boot) of `pid`, None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # `comm` (field 2) is in parentheses and may hold spaces and parentheses itself.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[19])
    except (IndexError, ValueError):
        return None


def _gone(state: str) -> bool:
    return state in ("Z", "X", "x")  # zombie, dead


_BOOT_TIME: list[float] = []


def _boot_time() -> float:
    """Seconds since the epoch at boot (``btime`` of /proc/stat), read once."""
    if not _BOOT_TIME:
        with open("/proc/stat", "rb") as fh:
            for line in fh:
                if line.startswith(b"btime "):
                    _BOOT_TIME.append(float(line.split()[1]))
                    break
            else:
                _BOOT_TIME.append(0.0)
    return _BOOT_TIME[0]


def _bind_process(pid: int, registered_at: float) -> _Process | None:
    """The live process that wrote the registration, or None when it is gone or reused."""
    stat = _stat(pid)
    if stat is None or _gone(stat[0]):
        return None
    created = _boot_time() + stat[1] / os.sysconf("SC_CLK_TCK")
    if created > registered_at + _CREATE_TIME_SLACK:
        return None  # this PID was given to a newer process; ours is gone
    return _Process(pid, stat[1])


def _alive(proc: _Process) -> bool:
    """Still there, not a zombie, and still the same process (same start time)."""
    stat = _stat(proc.pid)
    return stat is not None and stat[1] == proc.start and not _gone(stat[0])


def is_running(pid: int) -> bool:
    """Whether a process `pid` exists and is not a zombie (no PID-reuse check)."""
    stat = _stat(pid)
    return stat is not None and not _gone(stat[0])


def _check(t: _Tracked) -> ProcessResult | None:
    """The result of ``t`` if it has finished, else None."""
    try:
        st = os.stat(t.path)
        text = _read(t.path)
    except FileNotFoundError:
        text, st = "", None
    rec = parse_record(text, whole_lines_only=True)  # the wrapper may be writing it right now
    if not rec.running and rec.outcome is not None:
        return ProcessResult(t.pid, rec.outcome, rec.code, rec.raw)
    if not t.checked:
        t.checked = True
        registered_at = st.st_mtime if st is not None else time.time()
        t.proc = _bind_process(t.pid, registered_at)
        if t.proc is not None:
            # Opened after the process was verified, so a PID reused in between is caught
            # by the `_alive` check below (it compares start times).
            t.pidfd = _pidfd_open(t.pid)
    gone = t.proc is None or not _alive(t.proc)
    if not gone:
        return None
    # Re-read: the end may have been recorded between our read and the exit.
    again = parse_record(_read_quiet(t.path))
    if not again.running and again.outcome is not None:
        return ProcessResult(t.pid, again.outcome, again.code, again.raw)
    return ProcessResult(t.pid, Outcome.VANISHED, None, again.raw)


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _read_quiet(path: str) -> str:
    try:
        return _read(path)
    except OSError:
        return ""


def wait_for_training(
    log_dir: str | os.PathLike[str] = DEFAULT_LOG_DIR,
    *,
    timeout: float | None = None,
    register_timeout: float = 600.0,
    poll: float = 0.02,
    expected: int = 1,
) -> WaitResult:
    """Block until every registered training process has ended and report each one's end.

    ``expected`` is how many training processes must register (the webhook knows how many
    containers it wrapped); the wait also covers any more that register before the last one
    ends. ``register_timeout`` bounds the wait for the ``expected`` registrations (the default is
    generous because the training container's image may still be pulling); ``timeout`` bounds
    the whole wait. Processes without a registration file are never looked at.

    Raises NoTrainingProcess or WaitTimeout; a failed process is a result, not an exception.
    """
    if poll <= 0:
        raise ValueError(f"poll must be > 0, got {poll}")
    if expected < 1:
        raise ValueError(f"expected must be >= 1, got {expected}")
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    register_deadline = start + register_timeout
    tracked: dict[int, _Tracked] = {}
    try:
        while True:
            for pid, path in scan_registrations(log_dir).items():
                if pid not in tracked:
                    tracked[pid] = _Tracked(pid, path)
            for t in tracked.values():
                if t.result is None:
                    t.result = _check(t)
            pending = sorted(pid for pid, t in tracked.items() if t.result is None)
            if len(tracked) >= expected and not pending:
                return _result(tracked)
            now = time.monotonic()
            if len(tracked) < expected and now >= register_deadline:
                raise NoTrainingProcess(
                    os.fsdecode(log_dir), register_timeout, len(tracked), expected
                )
            if deadline is not None and now >= deadline:
                assert timeout is not None
                raise WaitTimeout(timeout, tuple(pending), _result(tracked))
            pidfds = [tracked[pid].pidfd for pid in pending]
            by_exit = len(tracked) >= expected and None not in pidfds
            next_wake = now + (SCAN_WHILE_WAITING if by_exit else poll)
            if deadline is not None:
                next_wake = min(next_wake, deadline)
            if len(tracked) < expected:
                next_wake = min(next_wake, register_deadline)
            if by_exit:
                _wait_for_exit([fd for fd in pidfds if fd is not None], next_wake - now)
            else:
                time.sleep(max(0.0, next_wake - now))
    finally:
        _close_pidfds(tracked)


def _pidfd_open(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:  # gone already, or no pidfds here (ENOSYS): the waiter polls
        return None
    return fd


def _close_pidfds(tracked: Mapping[int, _Tracked]) -> None:
    for t in tracked.values():
        if t.pidfd is not None:
            os.close(t.pidfd)
            t.pidfd = None


def _wait_for_exit(pidfds: list[int], seconds: float) -> None:
    """Return when one of the processes exits, or after `seconds`."""
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    poller.poll(max(0, int(seconds * 1000)))


def _result(tracked: Mapping[int, _Tracked]) -> WaitResult:
    done = [t.result for t in tracked.values() if t.result is not None]
    return WaitResult(tuple(sorted(done, key=lambda r: r.pid)))
