"""The collector against real wrapped training processes writing real metrics files."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubetune import procwait
from kubetune.api.common import ObjectiveSpec, ObjectiveType
from kubetune_pns_collector import collecting, parsing, stopping, summaries
from kubetune_pns_collector.collecting import ExitCode

PY = shlex.quote(sys.executable)


def py(code: str) -> str:
    """A training command: python running `code`, unbuffered."""
    return f"{PY} -u -c {shlex.quote(code)}"


def run_in_thread(collector: collecting.Collector) -> tuple[threading.Thread, list[object]]:
    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(collector.run()))
    t.start()
    return t, box


def wait_until(check: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_three_processes_ending_at_different_times_one_failing(
    log_dir: Path, procs, make_collector, metric_of
) -> None:
    train = "import time, sys\nfor i in range(3): print(f'loss={L}{{i}}'); time.sleep({S})\n{E}"
    ps = [
        procs.wrapped(log_dir, py(train.format(L="0.5", S="0.05", E=""))),
        procs.wrapped(log_dir, py(train.format(L="0.3", S="0.15", E="sys.exit(3)"))),
        procs.wrapped(log_dir, py(train.format(L="0.7", S="0.3", E="print('accuracy=0.9')"))),
    ]
    outcome = make_collector(log_dir, expected=3).run()
    assert all(p.poll() is not None for p in ps), "returned only after the last one ended"
    assert outcome.code == ExitCode.TRAINING_FAILED
    assert f"pid {ps[1].pid} exited with code 3" in outcome.message
    assert metric_of(outcome.observation, "loss") == ("0.30", "0.72", "0.72")
    assert metric_of(outcome.observation, "accuracy") == ("0.9", "0.9", "0.9")


def test_a_training_process_killed_by_sigkill_is_a_failure(
    log_dir: Path, procs, make_collector
) -> None:
    victim = procs.wrapped(log_dir, py("import time\nprint('loss=1')\ntime.sleep(60)"))
    other = procs.wrapped(log_dir, py("print('loss=2')"))
    procs.wait_registered(log_dir, victim.pid)
    collector = make_collector(log_dir, expected=2)
    thread, box = run_in_thread(collector)
    wait_until(lambda: collector.summary.count("loss") == 2, what="both values")
    os.kill(victim.pid, signal.SIGKILL)
    thread.join(20)
    (outcome,) = box
    assert outcome.code == ExitCode.TRAINING_FAILED  # type: ignore[attr-defined]
    assert f"pid {victim.pid} vanished" in outcome.message  # type: ignore[attr-defined]
    assert other.wait(5) == 0


def test_processes_that_ended_before_the_collector_started(
    log_dir: Path, procs, make_collector, metric_of
) -> None:
    ok = procs.wrapped(log_dir, py("print('loss=0.1')\nprint('partial loss=0.05', end='')"))
    assert ok.wait(10) == 0
    outcome = make_collector(log_dir).run()
    assert outcome.code == ExitCode.OK
    assert metric_of(outcome.observation, "loss") == ("0.05", "0.1", "0.05")


def test_an_unregistered_sidecar_that_never_exits_is_not_waited_for(
    log_dir: Path, procs, make_collector
) -> None:
    sidecar = procs.popen(["sleep", "300"])  # Argo's `wait`, istio-proxy: nobody registered it
    procs.wrapped(log_dir, py("print('loss=1')"))
    t0 = time.monotonic()
    outcome = make_collector(log_dir).run()
    assert outcome.code == ExitCode.OK
    assert time.monotonic() - t0 < 10
    assert sidecar.poll() is None


def test_a_training_process_that_never_registers_is_a_clear_timeout(
    log_dir: Path, procs, make_collector
) -> None:
    procs.wrapped(log_dir, "sleep 0.1")
    outcome = make_collector(log_dir, expected=2, register_timeout=1.0).run()
    assert outcome.code == ExitCode.WAIT_FAILED
    assert "1 of 2 training process(es) registered" in outcome.message
    assert "within 1s" in outcome.message
    assert metric_of_unavailable(outcome.observation)


def metric_of_unavailable(observation: object) -> bool:
    metrics = getattr(observation, "metrics", None) or []
    return bool(metrics) and all(m.latest == "unavailable" for m in metrics)


def test_values_are_streamed_while_training_runs(
    log_dir: Path, tmp_path: Path, procs, make_collector
) -> None:
    go = tmp_path / "go"
    code = (
        "import os, time\nprint('loss=0.9')\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\nprint('loss=0.1')"
    )
    procs.wrapped(log_dir, py(code))
    collector = make_collector(log_dir)
    thread, box = run_in_thread(collector)
    wait_until(lambda: collector.summary.count("loss") == 1, what="the first value while running")
    assert not box, "still collecting"
    go.touch()
    thread.join(20)
    assert box and collector.summary.count("loss") == 2


def test_file_that_appears_late_and_is_rotated(
    log_dir: Path, tmp_path: Path, procs, make_collector, metric_of
) -> None:
    metrics = tmp_path / "user" / "logs" / "train.log"
    code = (
        "import os, time\n"
        f"p = {str(metrics)!r}\n"
        "time.sleep(0.3)\n"
        "os.makedirs(os.path.dirname(p), exist_ok=True)\n"
        "with open(p, 'w') as f: f.write('loss=5\\n'); f.flush(); time.sleep(0.2)\n"
        "os.rename(p, p + '.1')\n"
        "with open(p, 'w') as f: f.write('loss=4\\nloss=')\n"
        "time.sleep(0.2)\n"
        "with open(p, 'a') as f: f.write('3\\n')\n"
    )
    procs.wrapped(log_dir, py(code), tee=False)
    outcome = make_collector(log_dir, path=metrics).run()
    assert outcome.code == ExitCode.OK
    assert metric_of(outcome.observation, "loss") == ("3", "5", "3")


def test_json_lines_file(log_dir: Path, procs, metric_of, spec) -> None:
    lines = [
        {"loss": "0.5", "timestamp": 3.0},
        {"loss": "0.2", "accuracy": 0.8, "timestamp": 1.0},
        {"loss": "0.4", "timestamp": 2.0},
    ]
    path = log_dir / "metrics.json"
    code = f"import json\nwith open({str(path)!r}, 'w') as f:\n"
    code += "".join(f"    f.write({json.dumps(json.dumps(x) + chr(10))})\n" for x in lines)
    procs.wrapped(log_dir, py(code), tee=False)
    summary = summaries.RunningSummary(spec())
    source = collecting.TextSource(path, parsing.JsonParser(summary.names))
    settings = collecting.Settings(log_dir=log_dir, register_timeout=10, timeout=30)
    outcome = collecting.Collector(settings, source, summary, None).run()
    assert outcome.code == ExitCode.OK
    assert metric_of(outcome.observation, "loss") == ("0.2", "0.5", "0.5"), "latest by timestamp"
    assert metric_of(outcome.observation, "accuracy") == ("0.8", "0.8", "0.8")


def test_early_stopping_marks_and_stops_the_training_process(
    log_dir: Path, procs, metric_of, spec
) -> None:
    code = (
        "import itertools, time\n"
        "for i in itertools.count(): print(f'loss={0.9 - i / 100:.2f}'); time.sleep(0.02)"
    )
    p = procs.wrapped(log_dir, py(code))
    summary = summaries.RunningSummary(spec())
    source = collecting.TextSource(log_dir / "metrics.log", parsing.TextParser(summary.names))
    stopper = stopping.EarlyStopper(
        [stopping.parse_rule("loss;0.8;greater;3")], "loss", ObjectiveType.MINIMIZE
    )
    settings = collecting.Settings(log_dir=log_dir, register_timeout=10, timeout=30)
    outcome = collecting.Collector(settings, source, summary, None, stopper).run()
    assert outcome.code == ExitCode.OK and outcome.early_stopped
    assert p.wait(10) == 0, "stopped through the wrapper, which ends early-stopped ones with 0"
    assert procwait.read_record(log_dir, p.pid) == procwait.parse_record("early-stopped")
    assert outcome.wait is not None and outcome.wait.early_stopped
    low, high, _ = metric_of(outcome.observation, "loss")
    assert (high, float(low or 0) <= 0.88) == ("0.90", True)


def test_tensorflow_event_files(log_dir: Path, procs, metric_of, spec) -> None:
    """Event files appear under the directory while training runs (records framed as TF does)."""
    import struct

    from kubetune_pns_collector import tfevents

    def record(data: bytes) -> bytes:
        header = struct.pack("<Q", len(data))
        crc = struct.pack("<I", tfevents.masked_crc(header))
        return header + crc + data + struct.pack("<I", tfevents.masked_crc(data))

    def scalar_event(wall: float, tag: str, value: float) -> bytes:
        v = b"\x0a" + bytes([len(tag)]) + tag.encode() + b"\x15" + struct.pack("<f", value)
        summary = b"\x0a" + bytes([len(v)]) + v
        return b"\x09" + struct.pack("<d", wall) + b"\x2a" + bytes([len(summary)]) + summary

    events = log_dir / "tfevent" / "train"
    code = (
        "import os, time\n"
        f"os.makedirs({str(events)!r}, exist_ok=True)\n"
        f"p = os.path.join({str(events)!r}, 'events.out.tfevents.1.host')\n"
        "with open(p, 'wb') as f:\n"
        f"    f.write({record(scalar_event(1.0, 'loss', 0.5))!r}); f.flush(); time.sleep(0.3)\n"
        f"    f.write({record(scalar_event(2.0, 'loss', 0.25))!r})\n"
    )
    procs.wrapped(log_dir, py(code), tee=False)
    summary = summaries.RunningSummary(spec(more=()))
    source = collecting.EventSource(log_dir / "tfevent", sorted(summary.names))
    settings = collecting.Settings(log_dir=log_dir, register_timeout=10, timeout=30)
    outcome = collecting.Collector(settings, source, summary, None).run()
    assert outcome.code == ExitCode.OK
    assert metric_of(outcome.observation, "loss") == ("0.25", "0.5", "0.25")


def test_text_source_echoes_every_line_it_reads(tmp_path: Path) -> None:
    """StdOut collection: what the training printed reaches the sidecar's own log, once."""
    import io

    path = tmp_path / "metrics.log"
    path.write_text("epoch 1 loss=0.5\nnot a metric\n")
    echo = io.StringIO()
    source = collecting.TextSource(path, parsing.TextParser(["loss"]), echo)
    list(source.read(final=False))
    with path.open("a") as f:
        f.write("epoch 2 loss=0.4")
    list(source.read(final=True))
    source.close()
    assert echo.getvalue() == "epoch 1 loss=0.5\nnot a metric\nepoch 2 loss=0.4"


class _CountingReporter:
    """Counts the collector's writes (what a write sends is tested on the real API server)."""

    def __init__(self) -> None:
        self.intermediate = 0
        self.final = 0

    def try_report(self, observation: object, history: object = None) -> None:
        self.intermediate += 1

    def report(self, observation: object, timeout: float, history: object = None) -> None:
        self.final += 1


def _reporting_collector(log_dir: Path, interval: float) -> tuple[collecting.Collector, Any]:
    summary = summaries.RunningSummary(ObjectiveSpec(type="minimize", objective_metric_name="loss"))
    source = collecting.TextSource(log_dir / "metrics.log", parsing.TextParser(summary.names, ()))
    settings = collecting.Settings(log_dir=log_dir, timeout=30.0, report_interval=interval)
    reporter = _CountingReporter()
    return collecting.Collector(settings, source, summary, reporter), reporter  # type: ignore[arg-type]


def test_a_trial_shorter_than_the_report_interval_is_written_once(log_dir: Path, procs) -> None:
    """Each write is a request in every trial pod: none before `report_interval` has passed."""
    code = "import time\nfor i in range(5):\n    print(f'loss={i}', flush=True); time.sleep(0.1)"
    procs.wrapped(log_dir, py(code))
    collector, reporter = _reporting_collector(log_dir, interval=30.0)
    outcome = collector.run()
    assert outcome.code == ExitCode.OK
    assert collector.summary.count("loss") == 5
    assert (reporter.intermediate, reporter.final) == (0, 1)


def test_a_longer_trial_gets_intermediate_writes_at_the_interval(log_dir: Path, procs) -> None:
    code = "import time\nfor i in range(8):\n    print(f'loss={i}', flush=True); time.sleep(0.15)"
    procs.wrapped(log_dir, py(code))
    collector, reporter = _reporting_collector(log_dir, interval=0.3)
    assert collector.run().code == ExitCode.OK
    assert 1 <= reporter.intermediate <= 4  # about one per 0.3 s of a 1.2 s run
    assert reporter.final == 1
