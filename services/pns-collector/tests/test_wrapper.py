"""The POSIX sh command wrapper (kubetune.wrapperscript.sh_wrap) run by real shells."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from kubetune import procwait, wrapperscript
from kubetune_pns_collector import collecting
from kubetune_testkit.waiting import wait_for

SHELLS = [s for s in ("dash", "bash", "busybox") if shutil.which(s)]


def run(
    log_dir: Path, argv: list[str], shell: str, *, tee: bool = True, stdin: bytes = b""
) -> tuple[subprocess.CompletedProcess[bytes], str]:
    command = " ".join(shlex.quote(a) for a in argv)
    metrics = str(log_dir / "metrics.log") if tee else None
    script = wrapperscript.sh_wrap(command, str(log_dir), metrics_file=metrics)
    sh = [shell, "sh"] if shell == "busybox" else [shell]
    p = subprocess.run([*sh, "-c", script], input=stdin, capture_output=True, timeout=20)
    (pid_file,) = log_dir.glob("*.pid")
    return p, pid_file.read_text()


@pytest.mark.parametrize("shell", SHELLS)
def test_args_exit_status_and_both_outputs_are_preserved(log_dir: Path, shell: str) -> None:
    code = (
        "import sys\n"
        "print('argv', sys.argv[1:], flush=True)\n"
        "print('loss=0.5', file=sys.stderr, flush=True)\n"
        "print('in', sys.stdin.read().strip(), flush=True)\n"
        "sys.exit(7)"
    )
    args = ["a b", "it's", "$HOME", "$(echo no)", "*", ""]
    p, record = run(log_dir, [sys.executable, "-c", code, *args], shell, stdin=b"fed\n")
    assert p.returncode == 7
    assert record == "exit 7\n"
    expected = f"argv {args!r}\nloss=0.5\nin fed\n"
    assert p.stdout.decode() == expected, "stdout and stderr go to the container's output"
    assert (log_dir / "metrics.log").read_text() == expected, "and to the metrics log"
    leftovers = sorted(x.name for x in log_dir.iterdir() if x.name != "metrics.log")
    assert len(leftovers) == 1 and leftovers[0].endswith(".pid"), "no FIFO or temp file left"


@pytest.mark.parametrize("shell", SHELLS)
def test_without_tee_output_stays_on_the_container(log_dir: Path, shell: str) -> None:
    p, record = run(log_dir, ["sh", "-c", "echo out; echo err >&2; exit 0"], shell, tee=False)
    assert (p.returncode, record) == (0, "completed\n")
    assert (p.stdout, p.stderr) == (b"out\n", b"err\n")
    assert not (log_dir / "metrics.log").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_signal_that_kills_the_command_is_recorded(log_dir: Path, shell: str) -> None:
    p, record = run(log_dir, ["sh", "-c", "kill -KILL $$"], shell)
    assert (p.returncode, record) == (137, "signal 9\n")


def _wait_channel(pid: int) -> str:
    """Where the kernel has process `pid` blocked ("" while it runs, or once it is gone)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip("0")
    except FileNotFoundError:
        return ""


def _settled(wrapper: int) -> bool:
    """Whether the wrapper shell is blocked waiting for its child and the training process
    sleeps in its `time.sleep`: the state a kubelet's SIGTERM finds, long after the start."""
    channel = _wait_channel(wrapper)
    if "wait" not in channel and "sigsuspend" not in channel:
        return False
    return any(
        "nanosleep" in _wait_channel(child.pid)
        for child in psutil.Process(wrapper).children(recursive=True)
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_sigterm_to_the_wrapper_reaches_the_training_process(
    log_dir: Path, shell: str, tmp_path: Path
) -> None:
    seen = tmp_path / "got-term"
    code = (
        "import signal, sys, time\n"
        "def on_term(*_):\n"
        f"    open({str(seen)!r}, 'w').write('term')\n"
        "    print('saving checkpoint', flush=True)\n"
        "    sys.exit(5)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    command = shlex.join([sys.executable, "-c", code])
    script = wrapperscript.sh_wrap(command, str(log_dir), metrics_file=str(log_dir / "metrics.log"))
    sh = [shell, "sh"] if shell == "busybox" else [shell]
    p = subprocess.Popen([*sh, "-c", script], stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert p.stdout.readline() == b"ready\n"
        # A kubelet's SIGTERM comes long after the start: send it once the wrapper is blocked
        # in its `wait` and the training process in its sleep (kernel wait channels), not
        # after a guessed delay. A SIGTERM within milliseconds of the start can still be lost
        # (under dash: a known gap).
        wait_for("the wrapper and the training settled", lambda: _settled(p.pid), 10)
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 5, "the training process's own exit status"
    finally:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()
    assert seen.read_text() == "term"
    assert procwait.read_record(log_dir, p.pid) == procwait.parse_record("exit 5")
    assert "saving checkpoint" in (log_dir / "metrics.log").read_text()


@pytest.mark.parametrize("shell", SHELLS)
def test_sigterm_default_action_is_recorded_as_signal_15(log_dir: Path, shell: str) -> None:
    script = wrapperscript.sh_wrap("sleep 60", str(log_dir), metrics_file=str(log_dir / "m.log"))
    sh = [shell, "sh"] if shell == "busybox" else [shell]
    p = subprocess.Popen([*sh, "-c", script])
    try:
        end_registered = Path(procwait.pid_file(log_dir, p.pid))
        for _ in range(500):
            if end_registered.exists():
                break
            subprocess.run(["sleep", "0.01"], check=True)
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 143
    finally:
        p.kill()
        p.wait()
    assert end_registered.read_text() == "signal 15\n"


def test_every_line_is_in_the_metrics_log_when_the_end_is_recorded(log_dir: Path) -> None:
    """The wrapper waits for tee to drain before recording the end, so a collector that reads
    after seeing the end record never misses the last lines."""
    code = "import sys\nfor i in range(20000): sys.stdout.write(f'step={i} loss={i}\\n')"
    script = wrapperscript.sh_wrap(
        shlex.join([sys.executable, "-c", code]),
        str(log_dir),
        metrics_file=str(log_dir / "metrics.log"),
    )
    p = subprocess.Popen(["sh", "-c", script], stdout=subprocess.DEVNULL)
    result = procwait.wait_for_training(log_dir, timeout=20, register_timeout=10)
    lines = (log_dir / "metrics.log").read_text().splitlines()
    p.wait(10)
    assert result.succeeded
    assert len(lines) == 20000 and lines[-1] == "step=19999 loss=19999"


def wrapped_argv(log_dir: Path, argv: list[str]) -> list[str]:
    """The container command the webhook makes of a training argv (StdOut collector)."""
    return wrapperscript.wrap_argv(argv, str(log_dir), metrics_file=str(log_dir / "metrics.log"))


def test_an_argv_over_128_kib_reaches_the_training_process_unchanged(log_dir: Path) -> None:
    """Linux refuses any single exec argument over 128 KiB (MAX_ARG_STRLEN): 2,000 parameters
    of 100 bytes joined into one `sh -c` string did exactly that. The wrapper joins them
    inside the shell (Katib's one line), so each element stays its own exec argument."""
    params = [f"--p{i}=" + "x" * 100 for i in range(2000)] + ["it's", "$HOME", ""]
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    argv = [sys.executable, "-c", shlex.quote(code), *(shlex.quote(p) for p in params)]
    assert len(" ".join(argv).encode()) > 128 * 1024
    p = subprocess.run(wrapped_argv(log_dir, argv), capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == params
    (pid_file,) = log_dir.glob("*.pid")
    assert pid_file.read_text() == "completed\n"


@pytest.mark.parametrize(
    ("make", "code"),
    [("missing", 127), ("not-executable", 126)],
)
def test_a_command_that_cannot_start_is_a_recorded_failure(
    log_dir: Path, tmp_path: Path, make: str, code: int, make_collector
) -> None:
    """exec failures end the wrapper like a failed command: 127 not found, 126 not executable,
    recorded as the end, so the collector reports a failed training instead of waiting."""
    binary = tmp_path / "train"
    if make == "not-executable":
        binary.write_text("#!/bin/sh\necho never\n")
        binary.chmod(0o644)
    p = subprocess.run(wrapped_argv(log_dir, [str(binary), "--lr=0.1"]), capture_output=True)
    assert p.returncode == code
    result = procwait.wait_for_training(log_dir, timeout=5, register_timeout=5)
    (failure,) = result.failures
    assert (failure.outcome, failure.code) == (procwait.Outcome.EXITED, code)
    assert str(binary) in (log_dir / "metrics.log").read_text(), "the shell's reason is logged"
    outcome = make_collector(log_dir, register_timeout=5, timeout=5).run()
    assert outcome.code == collecting.ExitCode.TRAINING_FAILED
    assert f"exited with code {code}" in outcome.message


# A race, so many tries; KUBETUNE_SIGTERM_TRIES=500 hunts it on a slow machine.
SIGTERM_TRIES = int(os.environ.get("KUBETUNE_SIGTERM_TRIES", "60"))
_TERM_COUNTER = """\
import signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
print("ready", flush=True)
deadline = time.monotonic() + 30
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.05)  # room for a duplicate SIGTERM to arrive
open(sys.argv[1], "w").write(str(len(got)))
sys.exit(5)
"""


@pytest.mark.parametrize("shell", [s for s in SHELLS if s != "busybox"])
def test_a_sigterm_right_after_the_first_output_is_forwarded_exactly_once(
    tmp_path: Path, shell: str
) -> None:
    """The trial wrapper as injected, signalled the moment the training process has printed:
    the wrapper may not yet know its child's PID, or may be about to wait for it. The training
    program must get that SIGTERM once (never lost, never twice) and its exit code recorded."""
    script = tmp_path / "train.py"
    script.write_text(_TERM_COUNTER)
    ends: list[tuple[int | None, str, str]] = []
    for attempt in range(SIGTERM_TRIES):
        log_dir = tmp_path / f"try{attempt}"
        count = tmp_path / f"count{attempt}"
        argv = wrapperscript.wrap_argv(
            [sys.executable, str(script), str(count)],
            str(log_dir),
            metrics_file=str(log_dir / "metrics.log"),
        )
        p = subprocess.Popen([shell, *argv[1:]], stdout=subprocess.PIPE)
        try:
            assert p.stdout is not None
            assert p.stdout.readline() == b"ready\n"
            p.send_signal(signal.SIGTERM)
            try:
                code: int | None = p.wait(20)
            except subprocess.TimeoutExpired:
                code = None  # the SIGTERM was lost: the training process never ended
        finally:
            p.kill()
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
        received = count.read_text() if count.exists() else "none"
        record = Path(procwait.pid_file(log_dir, p.pid)).read_text().strip()
        ends.append((code, received, record))
    wrong = [e for e in ends if e != (5, "1", "exit 5")]
    assert not wrong, f"{len(wrong)} of {len(ends)} tries ended otherwise: {wrong[:5]}"
