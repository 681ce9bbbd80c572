"""The collector's run: wait for the training processes while streaming their metrics.

A thread runs `kubetune.procwait.wait_for_training` (every registered training process, never
unregistered sidecars); meanwhile the main thread wakes every `Settings.file_poll` seconds to
read what a metrics file gained (TensorFlow event directories: on changes, watchfiles'
inotify, plus a once-a-second re-check), feeds new lines through the parser into the running
summary, sends rate-limited intermediate reports (the first one `report_interval` after the
start, so a trial shorter than that is written once, at the end: each write is a request and
its CPU in every trial pod) and evaluates early-stopping rules. When the
wait ends it reads what is left (including a last line without `\\n`), writes the final
report with retries and decides the exit code (`ExitCode`).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # as `main` does: no `signal` enums at start
import os
import time

from kubetune import lightlog, plainthreads, procwait
from kubetune.observations import ObservationSummary
from kubetune.plain import Frozen
from kubetune.typenames import TYPE_CHECKING, Protocol
from kubetune_pns_collector import parsing, reporting, stopping, summaries, tailing

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TextIO

log = lightlog.get(__name__)

Run = parsing.Run


class ExitCode:
    """The collector's exit statuses (ints: `enum` would cost instructions in every pod)."""

    OK = 0
    TRAINING_FAILED = 1  # a training process failed (what was collected is still reported)
    USAGE = 2  # bad flags, filter regex or rule
    REPORT_FAILED = 3  # the observation could not be written
    WAIT_FAILED = 4  # a training process never registered, or the overall timeout expired


class Source(Protocol):
    """Where metric values come from; `read` yields them a block at a time (bounded memory)."""

    def read(self, final: bool) -> Iterator[list[Run]]: ...

    def watch_dirs(self) -> list[str]: ...

    def polled(self) -> bool:
        """Whether reading it again costs little enough to do on a timer (a file's new
        bytes), rather than only when watchfiles reports a change (a directory tree)."""
        ...

    def close(self) -> None: ...


class TextSource:
    """A metrics file (StdOut's tee target or the user's File), TEXT or JSON lines.

    With `echo` every line read is also written there: for StdOut collection the sidecar's own
    log then carries the training output, which is the container Katib's SDK
    (`KatibClient.get_job_logs`) and users of `kubectl logs` read, as with upstream's
    `metrics-logger-and-collector`.
    """

    def __init__(
        self, path: str | os.PathLike[str], parser: parsing.Parser, echo: TextIO | None = None
    ) -> None:
        self.tail = tailing.FileTail(path)
        self.parser = parser
        self.echo = echo

    def read(self, final: bool) -> Iterator[list[Run]]:
        for block in self.tail.read(final):
            if self.echo is not None:
                self.echo.write(block)
                self.echo.flush()
            yield self.parser.parse_runs(block)

    def watch_dirs(self) -> list[str]:
        return [os.path.dirname(self.tail.path) or "."]

    def polled(self) -> bool:
        # One stat and, when it grew, one read: cheaper on a timer than importing watchfiles
        # and running its notifier thread (about half of a 1-s trial's collector CPU).
        return True

    def close(self) -> None:
        self.tail.close()


class EventSource:
    """TensorFlow event files under a directory."""

    def __init__(self, root: str | os.PathLike[str], names: list[str]) -> None:
        from kubetune_pns_collector import tfevents  # only for this kind: it costs CPU to import

        self.events = tfevents.EventDirectory(root, names)

    def read(self, final: bool) -> Iterator[list[Run]]:
        yield parsing.runs_of(self.events.read())

    def watch_dirs(self) -> list[str]:
        return [os.fspath(self.events.root)]

    def polled(self) -> bool:
        return False  # a scan of the whole tree: only on changes

    def close(self) -> None:
        self.events.close()


class Settings(Frozen):
    """`file_poll`: seconds between reads of a polled source (watchfiles' debounce was as
    long)."""

    __slots__ = (
        "expected",
        "file_poll",
        "log_dir",
        "poll",
        "register_timeout",
        "report_interval",
        "report_timeout",
        "stop_grace",
        "timeout",
    )

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        expected: int = 1,
        register_timeout: float = 600.0,
        timeout: float | None = None,
        poll: float = 0.02,
        report_interval: float = 10.0,
        report_timeout: float = 60.0,
        stop_grace: float = 60.0,
        file_poll: float = 0.2,
    ) -> None:
        self.log_dir = os.fspath(log_dir)
        self.expected = expected
        self.register_timeout = register_timeout
        self.timeout = timeout
        self.poll = poll
        self.report_interval = report_interval
        self.report_timeout = report_timeout
        self.stop_grace = stop_grace
        self.file_poll = file_poll


class Outcome(Frozen):
    __slots__ = ("code", "early_stopped", "message", "observation", "wait")

    def __init__(
        self,
        code: int,  # an ExitCode
        message: str,
        observation: ObservationSummary | None,
        wait: procwait.WaitResult | None,
        early_stopped: bool = False,
    ) -> None:
        self.code = code
        self.message = message
        self.observation = observation
        self.wait = wait
        self.early_stopped = early_stopped


class _Either:
    """watchfiles' stop_event: stop when the wait ended or we were told to stop."""

    def __init__(self, *events: plainthreads.Event) -> None:
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


class Collector:
    """One collection run; `run()` returns the outcome (it never raises for expected faults)."""

    def __init__(
        self,
        settings: Settings,
        source: Source | None,
        summary: summaries.RunningSummary,
        reporter: reporting.Reporter | None,
        stopper: stopping.EarlyStopper | None = None,
        stop: plainthreads.Event | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        self.summary = summary
        self.reporter = reporter
        self.stopper = stopper
        self.stop = stop or plainthreads.Event()  # set by SIGTERM
        self.waited = plainthreads.Event()
        self._result: procwait.WaitResult | None = None
        self._error: BaseException | None = None
        self._last_report = time.monotonic()  # the first intermediate report waits too
        self.early_stopped = False
        self.last_exit_seen: float | None = None  # monotonic time the wait ended (for bench)
        self._stopping: list[int] = []

    # --- waiting ---------------------------------------------------------------------------
    def _wait(self) -> None:
        s = self.settings
        try:
            self._result = procwait.wait_for_training(
                s.log_dir,
                timeout=s.timeout,
                register_timeout=s.register_timeout,
                poll=s.poll,
                expected=s.expected,
            )
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            self._error = e
        finally:
            self.last_exit_seen = time.monotonic()
            self.waited.set()

    # --- streaming -------------------------------------------------------------------------
    def _pump(self, final: bool = False) -> None:
        if self.source is None:
            return
        for runs in self.source.read(final):
            if not runs:
                continue
            if self.stopper is not None and not self.early_stopped:
                for name, _, values in runs:
                    if name in self.stopper.names and any(
                        self.stopper.observe(name, v) for v in values
                    ):
                        self._stop_training()
                        break
            self.summary.add_runs(runs)
        if not final:
            self._maybe_report()

    def _maybe_report(self) -> None:
        if self.reporter is None or not self.summary.changed:
            return
        now = time.monotonic()
        if now - self._last_report < self.settings.report_interval:
            return
        self._last_report = now
        self.summary.changed = False
        self.reporter.try_report(self.summary.observation(), self.summary.history.to_wire())

    def _stop_training(self) -> None:
        """Every rule fired: mark each running training process early-stopped, then SIGTERM it
        (the wrapper passes SIGTERM on to the command and keeps the mark)."""
        assert self.stopper is not None
        self.early_stopped = True
        log.info(
            "early-stopping rules fired (%s): stopping the training processes",
            ", ".join(f"{r.name} {r.comparison} {r.value:g}" for r in self.stopper.fired),
        )
        pids = []
        for pid in procwait.scan_registrations(self.settings.log_dir):
            record = procwait.read_record(self.settings.log_dir, pid)
            if record is not None and record.running:
                procwait.mark_early_stopped(self.settings.log_dir, pid)
                pids.append(pid)
                try:
                    os.kill(pid, _signal.SIGTERM)
                except ProcessLookupError:
                    pass
                except PermissionError:
                    log.warning("cannot stop pid %d (another user; needs CAP_KILL)", pid)
        self._stopping = pids

    def _watch(self) -> None:
        stop_event = _Either(self.waited, self.stop)
        dirs = []
        if self.source is not None:
            for d in self.source.watch_dirs():
                try:
                    os.makedirs(d, exist_ok=True)
                    dirs.append(d)
                except OSError as e:
                    log.warning("cannot watch %s (%s); re-reading it every second instead", d, e)
        if not dirs or self.source is None or self.source.polled():
            every = self.settings.file_poll if dirs else 1.0
            while not stop_event.is_set():
                self._pump()
                self.waited.wait(every)
            return
        import watchfiles  # only for event directories: its import costs CPU in every pod

        for _changes in watchfiles.watch(
            *dirs,
            watch_filter=None,
            debounce=200,
            step=20,
            rust_timeout=1000,
            yield_on_timeout=True,
            stop_event=stop_event,
            raise_interrupt=False,
        ):
            self._pump()

    # --- the run ---------------------------------------------------------------------------
    def run(self) -> Outcome:
        plainthreads.start(self._wait)
        try:
            self._watch()
        finally:
            if self.early_stopped and self._stopping:
                self._wait_gone(self._stopping)
            self._pump(final=True)
            if self.source is not None:
                self.source.close()
        return self._finish()

    def _wait_gone(self, pids: list[int]) -> None:
        """Give early-stopped processes time to finish writing (polls; never reaps them)."""
        deadline = time.monotonic() + self.settings.stop_grace
        left = list(pids)
        while left and time.monotonic() < deadline:
            left = [pid for pid in left if procwait.is_running(pid)]
            if left:
                self.stop.wait(0.02)
        if left:
            log.warning("training process(es) %s still running after early stop", left)

    def _finish(self) -> Outcome:
        observation = self.summary.observation() if self.source is not None else None
        wait_message = ""
        code = ExitCode.OK
        if self.stop.is_set() and not self.waited.is_set():
            wait_message = "stopped by signal before the training processes ended"
        elif self._error is not None:
            code = ExitCode.WAIT_FAILED
            wait_message = str(self._error)
        elif self._result is not None and self._result.failures:
            code = ExitCode.TRAINING_FAILED
            wait_message = "training failed: " + "; ".join(
                p.describe() for p in self._result.failures
            )
        elif self._result is not None:
            wait_message = "training ended: " + "; ".join(
                p.describe() for p in self._result.processes
            )
        if self.reporter is not None and observation is not None:
            try:
                self.reporter.report(
                    observation, self.settings.report_timeout, self.summary.history.to_wire()
                )
                if self.early_stopped:
                    # After the final report, as upstream: the Trial is complete once marked,
                    # and its observation is then already the full one.
                    self.reporter.mark_early_stopped(self.settings.report_timeout)
                    wait_message = f"early stopped; {wait_message}"
            except reporting.ReportError as e:
                message = f"{wait_message}; {e}" if wait_message else str(e)
                code = ExitCode.REPORT_FAILED if code == ExitCode.OK else code
                return Outcome(code, message, observation, self._result, self.early_stopped)
        return Outcome(code, wait_message, observation, self._result, self.early_stopped)
