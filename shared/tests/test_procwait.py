"""The multi-PID waiter against real processes run through the real sh wrapper."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from kubetune import procwait, wrapperscript
from kubetune.procwait import (
    NoTrainingProcess,
    Outcome,
    WaitTimeout,
    format_exit_status,
    parse_record,
    wait_for_training,
)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    d = tmp_path / "katib"
    d.mkdir()
    return d


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            for child in psutil.Process(p.pid).children(recursive=True):
                child.kill()
            p.kill()
        p.wait()


def run_wrapped(
    procs: list[subprocess.Popen[bytes]], log_dir: Path, command: str
) -> subprocess.Popen[bytes]:
    """A training container: the real command inside the protocol's sh wrapper."""
    p = subprocess.Popen(["sh", "-c", wrapperscript.sh_wrap(command, str(log_dir))])
    procs.append(p)
    return p


def wait_registered(log_dir: Path, pid: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not os.path.exists(procwait.pid_file(log_dir, pid)):
        assert time.monotonic() < end, f"pid {pid} never registered"
        time.sleep(0.005)


def by_pid(result: procwait.WaitResult) -> dict[int, procwait.ProcessResult]:
    return {p.pid: p for p in result.processes}


def test_waits_for_all_processes_not_just_the_first(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    ps = [run_wrapped(procs, log_dir, f"sleep {s}") for s in ("0.2", "0.5", "0.9")]
    for p in ps:
        wait_registered(log_dir, p.pid)
    t0 = time.monotonic()
    result = wait_for_training(log_dir, timeout=10, expected=3)
    elapsed = time.monotonic() - t0
    assert all(p.poll() is not None or p.wait(1) is not None for p in ps)
    assert elapsed >= 0.8, "returned before the slowest process ended"
    assert [r.pid for r in result.processes] == sorted(p.pid for p in ps)
    assert all(r.outcome is Outcome.COMPLETED for r in result.processes)
    assert result.succeeded


def test_one_failure_does_not_end_the_wait(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    fail = run_wrapped(procs, log_dir, "sleep 0.1; exit 3")  # exit inside the command itself
    slow = run_wrapped(procs, log_dir, "sleep 0.7")
    wait_registered(log_dir, fail.pid)
    wait_registered(log_dir, slow.pid)
    result = wait_for_training(log_dir, timeout=10, expected=2)
    assert slow.poll() is not None or slow.wait(0.5) == 0
    got = by_pid(result)
    assert got[fail.pid].outcome is Outcome.EXITED and got[fail.pid].code == 3
    assert got[slow.pid].outcome is Outcome.COMPLETED
    assert not result.succeeded
    assert result.failures == (got[fail.pid],)
    assert "exited with code 3" in got[fail.pid].describe()


def test_command_killed_by_signal_is_recorded_by_the_wrapper(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    p = run_wrapped(procs, log_dir, "sh -c 'kill -KILL $$'")
    result = wait_for_training(log_dir, timeout=10, register_timeout=5)
    (r,) = result.processes
    assert (r.pid, r.outcome, r.code, r.record) == (p.pid, Outcome.SIGNALED, 9, "signal 9")
    assert r.failed
    assert p.wait(5) == 137


def test_wrapper_killed_without_recording_counts_as_failed(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    victim = run_wrapped(procs, log_dir, "sleep 30")
    other = run_wrapped(procs, log_dir, "sleep 0.3")
    wait_registered(log_dir, victim.pid)
    wait_registered(log_dir, other.pid)

    def kill_later() -> None:
        time.sleep(0.15)
        os.kill(victim.pid, signal.SIGKILL)  # no trap can record this; left a zombie, unreaped

    threading.Thread(target=kill_later).start()
    result = wait_for_training(log_dir, timeout=10, expected=2)
    got = by_pid(result)
    assert got[victim.pid].outcome is Outcome.VANISHED
    assert got[victim.pid].record == "running"
    assert got[other.pid].outcome is Outcome.COMPLETED
    assert result.failures == (got[victim.pid],)


def test_registrations_whose_process_ended_before_the_waiter_started(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    ok = run_wrapped(procs, log_dir, "true && exit 0")
    bad = run_wrapped(procs, log_dir, "sh -c 'exit 2'")
    assert ok.wait(5) == 0 and bad.wait(5) == 2  # reaped: both PIDs are gone now
    # A registration left "running" by a process that is long gone.
    dead = subprocess.Popen(["true"])
    dead.wait()
    procwait.register(log_dir, dead.pid)
    result = wait_for_training(log_dir, timeout=5, register_timeout=1, expected=3)
    got = by_pid(result)
    assert got[ok.pid].outcome is Outcome.COMPLETED
    assert got[bad.pid].outcome is Outcome.EXITED and got[bad.pid].code == 2
    assert got[dead.pid].outcome is Outcome.VANISHED


def test_unregistered_sidecar_that_never_exits_is_ignored(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    sidecar = subprocess.Popen(["sleep", "60"])  # like istio-proxy or Argo's wait
    procs.append(sidecar)
    (log_dir / "metrics.log").write_text("loss=0.1\n")
    (log_dir / ".123.pid.tmp").write_text("running\n")  # a half-written record is no registration
    train = run_wrapped(procs, log_dir, "sleep 0.2")
    result = wait_for_training(log_dir, timeout=5, register_timeout=5)
    assert [r.pid for r in result.processes] == [train.pid]
    assert result.succeeded
    assert sidecar.poll() is None


def test_timeout_names_the_processes_still_running(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    quick = run_wrapped(procs, log_dir, "true")
    stuck = run_wrapped(procs, log_dir, "sleep 30")
    wait_registered(log_dir, stuck.pid)
    quick.wait(5)
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout) as err:
        wait_for_training(log_dir, timeout=0.3, expected=2)
    assert 0.3 <= time.monotonic() - t0 < 1.0
    assert err.value.still_running == (stuck.pid,)
    assert [r.pid for r in err.value.partial.processes] == [quick.pid]
    assert str(stuck.pid) in str(err.value)


def test_no_registration_is_a_clear_error(log_dir: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(NoTrainingProcess) as err:
        wait_for_training(log_dir / "missing", register_timeout=0.2)
    assert time.monotonic() - t0 < 1.0
    assert "0 of 1 training process(es) registered" in str(err.value)


def test_waits_for_expected_registrations_that_come_late(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    first = run_wrapped(procs, log_dir, "true")
    late: list[subprocess.Popen[bytes]] = []

    def start_late() -> None:
        time.sleep(0.4)  # a second container that starts after the first one already ended
        late.append(run_wrapped(procs, log_dir, "sleep 0.1"))

    threading.Thread(target=start_late).start()
    result = wait_for_training(log_dir, timeout=10, register_timeout=5, expected=2)
    assert [r.pid for r in result.processes] == sorted([first.pid, late[0].pid])
    assert result.succeeded


def test_early_stopped_mark_survives_the_wrapper_and_is_not_a_failure(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    p = run_wrapped(procs, log_dir, "sleep 30")
    wait_registered(log_dir, p.pid)
    procwait.mark_early_stopped(log_dir, p.pid)
    deadline = time.monotonic() + 5
    # The training command itself: a child seen earlier may be the registration's short-lived
    # `mv`, and stopping that would leave `sleep 30` running past the wait below.
    while not (children := _descendants_named(p.pid, "sleep")):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for child in children:
        child.terminate()
    # As upstream's wrapper: an early-stopped command ends the container with 0, so the job
    # neither fails nor is retried (a Job's backoffLimit would start the training again).
    assert p.wait(5) == 0
    result = wait_for_training(log_dir, timeout=5)
    assert result.processes[0].outcome is Outcome.EARLY_STOPPED
    assert result.succeeded and result.early_stopped
    assert Path(procwait.pid_file(log_dir, p.pid)).read_text() == "early-stopped\n"


def test_reused_pid_is_not_mistaken_for_the_registered_process(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    newcomer = subprocess.Popen(["sleep", "30"])  # holds the PID the old registration names
    procs.append(newcomer)
    path = procwait.register(log_dir, newcomer.pid)
    an_hour_ago = time.time() - 3600
    os.utime(path, (an_hour_ago, an_hour_ago))  # registered long before this process existed
    result = wait_for_training(log_dir, timeout=2)
    assert result.processes[0].outcome is Outcome.VANISHED
    assert newcomer.poll() is None


def test_a_process_whose_name_has_parentheses_and_spaces_is_read_right(
    log_dir: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """/proc/<pid>/stat puts the name in parentheses; a name with ") " must not shift fields."""
    odd = tmp_path / "a) R 1 (b"
    odd.symlink_to("/bin/sleep")
    sleeper = subprocess.Popen([str(odd), "30"])
    procs.append(sleeper)
    path = procwait.register(log_dir, sleeper.pid)
    assert procwait.is_running(sleeper.pid)
    assert procwait._bind_process(sleeper.pid, os.stat(path).st_mtime) is not None
    sleeper.kill()
    end = time.monotonic() + 5
    while procwait.is_running(sleeper.pid):  # a zombie (not reaped yet) is not running
        assert time.monotonic() < end, "the killed process still counts as running"
        time.sleep(0.01)
    assert Path(f"/proc/{sleeper.pid}/stat").exists()  # the zombie, not a missing PID
    assert wait_for_training(log_dir, timeout=2).processes[0].outcome is Outcome.VANISHED
    sleeper.wait()


def test_waiting_imports_no_psutil(log_dir: Path) -> None:
    """The waiter reads /proc itself: psutil's import cost every trial pod's collector CPU, as
    would the wrapper's `shlex` (the shell side lives in `wrapperscript`)."""
    probe = (
        "import subprocess, sys\n"
        "from kubetune import procwait\n"
        "heavy = sorted({'psutil', 'shlex'} & set(sys.modules))\n"
        "from kubetune import wrapperscript\n"
        "p = subprocess.Popen(['sh', '-c', wrapperscript.sh_wrap('sleep 0.2', sys.argv[1])])\n"
        "result = procwait.wait_for_training(sys.argv[1], timeout=10)\n"
        "p.wait()\n"
        "print(result.succeeded, heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(log_dir)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "[]"], out.stderr


def test_last_exit_is_detected_within_100ms(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    latencies = []
    for i in range(5):
        d = log_dir / str(i)
        d.mkdir()
        p = run_wrapped(procs, d, "sleep 0.15")
        ended: list[float] = []

        def reap(p: subprocess.Popen[bytes] = p, ended: list[float] = ended) -> None:
            p.wait()
            ended.append(time.monotonic())

        threading.Thread(target=reap).start()
        wait_for_training(d, timeout=5, register_timeout=5)
        returned = time.monotonic()
        p.wait(5)
        time.sleep(0.01)
        latencies.append(max(0.0, returned - ended[0]))
    assert statistics.median(latencies) < 0.1, latencies


def _counting_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    scan = procwait.scan_registrations

    def counted(log_dir: str | os.PathLike[str]) -> dict[int, Path]:
        calls.append(1)
        return scan(log_dir)

    monkeypatch.setattr(procwait, "scan_registrations", counted)
    return calls


def test_a_registered_process_is_waited_on_by_its_exit_not_by_polling(
    log_dir: Path, procs: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polling every 20 ms for the whole run cost 2.6 % of a core per trial pod: once the
    expected processes registered, the waiter sleeps on their pidfds and scans only every
    SCAN_WHILE_WAITING seconds (polling would scan about 75 times in 1.5 s)."""
    p = run_wrapped(procs, log_dir, "sleep 1.5")
    wait_registered(log_dir, p.pid)
    scans = _counting_scans(monkeypatch)
    result = wait_for_training(log_dir, timeout=10)
    assert [(r.pid, r.outcome) for r in result.processes] == [(p.pid, Outcome.COMPLETED)]
    assert len(scans) <= 1.5 / procwait.SCAN_WHILE_WAITING + 4, len(scans)


def test_without_pidfds_the_waiter_polls_and_answers_the_same(
    log_dir: Path, procs: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    ok = run_wrapped(procs, log_dir, "sleep 0.3")
    bad = run_wrapped(procs, log_dir, "sleep 0.5; exit 4")
    wait_registered(log_dir, ok.pid)
    wait_registered(log_dir, bad.pid)
    scans = _counting_scans(monkeypatch)
    got = by_pid(wait_for_training(log_dir, timeout=10, expected=2))
    assert got[ok.pid].outcome is Outcome.COMPLETED
    assert (got[bad.pid].outcome, got[bad.pid].code) == (Outcome.EXITED, 4)
    assert len(scans) > 0.5 / procwait.SCAN_WHILE_WAITING + 4, "it did not poll"


def test_record_format_and_parsing() -> None:
    assert format_exit_status(0) == "completed"
    assert format_exit_status(1) == "exit 1"
    assert format_exit_status(128) == "exit 128"
    assert format_exit_status(137) == "signal 9"
    assert format_exit_status(-15) == "signal 15"
    assert parse_record("completed\n") == procwait.Record(
        False, Outcome.COMPLETED, None, "completed"
    )
    assert parse_record("early-stopped\nextra").outcome is Outcome.EARLY_STOPPED
    assert parse_record("exit 7\n").code == 7
    assert parse_record("signal 9\n").outcome is Outcome.SIGNALED
    for text in ("running\n", "", "exit\n", "garbage"):
        assert parse_record(text).running, text


def test_a_record_cut_short_counts_only_once_its_writer_is_gone(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """The wrapper writes its records in place (no `mv`): while it lives, a first line without
    its newline may be half of `exit 137` and is not an end; once it is gone the file is read
    as it is."""
    assert parse_record("exit 13", whole_lines_only=True).running
    assert parse_record("exit 137\n", whole_lines_only=True).code == 137
    assert parse_record("exit 13").code == 13
    # A live registered process whose file reads `exit 1` (no newline): still waited on.
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.6)"])
    procs.append(p)
    Path(procwait.pid_file(log_dir, p.pid)).write_text("exit 1")
    started = time.monotonic()
    result = wait_for_training(log_dir, timeout=10)
    assert time.monotonic() - started >= 0.4, "the cut-short record was taken as the end"
    assert [(r.pid, r.outcome, r.code) for r in result.processes] == [(p.pid, Outcome.EXITED, 1)]


def test_the_wrapper_writes_its_records_without_an_mv_process(log_dir: Path) -> None:
    script = wrapperscript.sh_wrap("true", str(log_dir), metrics_file=str(log_dir / "metrics.log"))
    assert " mv " not in script and ".pid.tmp" not in script
    done = subprocess.run(["sh", "-c", script], timeout=30, check=False)
    assert done.returncode == 0
    assert [p.read_text() for p in log_dir.glob("*.pid")] == ["completed\n"]
    assert not [p.name for p in log_dir.iterdir() if p.name.startswith(".")]


def test_write_record_is_atomic_and_leaves_no_temp_file(log_dir: Path) -> None:
    procwait.register(log_dir, 4242)
    procwait.record_end(log_dir, 4242, 3)
    assert sorted(os.listdir(log_dir)) == ["4242.pid"]
    assert procwait.read_record(log_dir, 4242) == parse_record("exit 3")
    procwait.mark_early_stopped(log_dir, 4242)
    procwait.record_end(log_dir, 4242, 143)  # the wrapper keeps the collector's mark
    assert Path(procwait.pid_file(log_dir, 4242)).read_text() == "early-stopped\n"
    assert procwait.read_record(log_dir, 1) is None


def test_invalid_arguments(log_dir: Path) -> None:
    with pytest.raises(ValueError):
        wait_for_training(log_dir, poll=0)
    with pytest.raises(ValueError):
        wait_for_training(log_dir, expected=0)


def test_wrapper_tees_output_to_the_metrics_file_and_keeps_the_exit_status(
    log_dir: Path,
) -> None:
    script = wrapperscript.sh_wrap(
        "echo loss=0.5; echo err >&2; exit 4", str(log_dir), metrics_file=str(log_dir / "m.log")
    )
    p = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=10)
    assert (p.returncode, out, err) == (4, b"loss=0.5\nerr\n", b"")
    assert (log_dir / "m.log").read_bytes() == b"loss=0.5\nerr\n"
    assert procwait.read_record(log_dir, p.pid) == parse_record("exit 4")
    assert sorted(x.name for x in log_dir.iterdir()) == sorted(["m.log", f"{p.pid}.pid"])


def test_sigterm_to_the_wrapper_reaches_the_command(
    log_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    ready = log_dir.parent / "ready"
    p = run_wrapped(procs, log_dir, f"trap 'exit 7' TERM; : > {ready}; sleep 30 & wait")
    deadline = time.monotonic() + 5
    while not ready.exists():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.005)
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 7
    assert procwait.read_record(log_dir, p.pid) == parse_record("exit 7")


def _descendants_named(pid: int, name: str) -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.name() == name:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.mark.parametrize(
    ("text", "running", "code"),
    [
        ("exit 3\n", False, 3),
        ("signal 9\n", False, 9),
        ("exit \n", True, None),
        ("exit 1a\n", True, None),
        ("exit -1\n", True, None),
        ("exit \uff11\n", True, None),  # a full-width digit is no exit code
        ("exit  1\n", True, None),
        ("signal\n", True, None),
        ("exit " + "9" * 5000 + "\n", True, None),  # no int of it (it would raise)
    ],
)
def test_only_ascii_digits_make_an_exit_or_signal_record(
    text: str, running: bool, code: int | None
) -> None:
    record = procwait.parse_record(text)
    assert (record.running, record.code) == (running, code)


def test_only_digit_named_pid_files_are_registrations(tmp_path: Path) -> None:
    for name in ("12.pid", "7.pid", "a12.pid", ".12.pid", "12.pid.tmp", "\uff11.pid", ".pid"):
        (tmp_path / name).write_text("running\n")
    assert sorted(procwait.scan_registrations(tmp_path)) == [7, 12]
