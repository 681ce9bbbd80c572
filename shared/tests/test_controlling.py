"""How a reconcile's outcome becomes a queue action (no API server needed for this part)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from kubetune import errors, logs
from kubetune.clock import ManualClock
from kubetune.runtime import Context, Controller, Key, Result
from kubetune.runtime.queue import Backoff, WorkQueue


def _controller(outcome: object) -> tuple[Controller, ManualClock]:
    def reconcile(ctx: Context, key: Key) -> Result:
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, Result)
        return outcome

    clock = ManualClock(100.0)
    return Controller("t", reconcile, queue=WorkQueue(Backoff(base=1.0), clock=clock)), clock


def _run_once(controller: Controller) -> None:
    key = controller.queue.get(0)
    assert key is not None
    controller._handle(key)
    controller.queue.done(key)


KEY = Key("ns", "obj")


def test_success_forgets_backoff_and_does_not_requeue() -> None:
    """Three failed passes build up a backoff; the pass that succeeds forgets it and leaves
    nothing in the queue, neither now nor at any later time."""
    outcomes: list[Exception | None] = [RuntimeError("boom")] * 3 + [None]

    def reconcile(ctx: Context, key: Key) -> Result:
        failure = outcomes.pop(0)
        if failure is not None:
            raise failure
        return Result.done()

    clock = ManualClock(100.0)
    c = Controller("t", reconcile, queue=WorkQueue(Backoff(base=1.0), clock=clock))
    c.queue.add(KEY)
    for attempts in (1, 2, 3):
        _run_once(c)
        assert c.queue.attempts(KEY) == attempts
        clock.advance(2.0**attempts)  # that failure's backoff: base * 2**(attempts - 1)
    _run_once(c)
    assert not outcomes, "the fourth pass succeeded"
    assert c.queue.attempts(KEY) == 0
    assert len(c.queue) == 0, "a successful pass scheduled another"
    clock.advance(10_000)
    assert c.queue.get(0) is None


def test_result_after_requeues_at_that_delay() -> None:
    c, clock = _controller(Result.after(7))
    c.queue.add(KEY)
    _run_once(c)
    assert c.queue.get(0) is None
    clock.advance(7)
    assert c.queue.get(0) == KEY


@pytest.mark.parametrize(
    ("error", "delay", "attempts"),
    [
        (errors.TemporaryError("wait", delay=3), 3.0, 0),
        (RuntimeError("boom"), 1.0, 1),
        (errors.Conflict(409, "Conflict", "stale"), 1.0, 1),
    ],
    ids=["temporary", "unexpected", "conflict"],
)
def test_errors_requeue_after_their_delay(error: Exception, delay: float, attempts: int) -> None:
    c, clock = _controller(error)
    c.queue.add(KEY)
    _run_once(c)
    assert c.queue.attempts(KEY) == attempts
    clock.advance(delay - 0.01)
    assert c.queue.get(0) is None
    clock.advance(0.01)
    assert c.queue.get(0) == KEY


def test_terminal_error_is_dropped() -> None:
    c, clock = _controller(errors.TerminalError("bad spec"))
    c.queue.add(KEY)
    _run_once(c)
    clock.advance(10_000)
    assert c.queue.get(0) is None


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (404, "NotFound", errors.NotFound),
        (409, "AlreadyExists", errors.AlreadyExists),
        (409, "Conflict", errors.Conflict),
        (410, "Expired", errors.Gone),
        (403, "Forbidden", errors.Forbidden),
        (422, "Invalid", errors.Invalid),
        (500, "InternalError", errors.ApiError),
    ],
)
def test_status_mapping(status: int, reason: str, cls: type[errors.ApiError]) -> None:
    error = errors.from_status(status, reason, "m")
    assert type(error) is cls and error.status == status


def test_json_logs_are_one_object_a_line() -> None:
    logs.configure("json", "info")
    stream = io.StringIO()
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    logging.getLogger("kubetune.test").info("hello %s", "world", extra={"trial": "t1"})
    entry = json.loads(stream.getvalue().strip())
    assert entry["message"] == "hello world" and entry["trial"] == "t1" and entry["level"] == "info"
    logs.configure("text", "info")


def test_each_pass_logs_with_its_reconcile_id_and_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every line of a pass names the object and the pass; lines of one pass share the id."""
    ids: list[str] = []

    def reconcile(ctx: Context, key: Key) -> Result:
        ids.append(ctx.reconcile_id)
        ctx.log.info("working on %s", "it")
        raise RuntimeError("boom")  # the runtime's own line about the pass

    controller = Controller("t", reconcile)
    caplog.set_level(logging.INFO)
    for _ in range(2):
        controller.queue.add(KEY)
        _run_once(controller)
    lines = [r for r in caplog.records if r.name == "kubetune.t"]
    assert [r.getMessage().split(": ", 1)[1] for r in lines] == [
        "working on it",
        "failed; retry in 0.01s",
        "working on it",
        "failed; retry in 0.01s",
    ]
    assert len(set(ids)) == 2, "a new id each pass"
    for record, reconcile_id in zip(lines, [ids[0], ids[0], ids[1], ids[1]], strict=True):
        assert record.getMessage().startswith(f"ns/obj [{reconcile_id}]: ")
        fields = (record.reconcile_id, record.namespace, record.object_name)  # type: ignore[attr-defined]
        assert fields == (reconcile_id, "ns", "obj")
    entry = json.loads(logs.JsonFormatter().format(lines[0]))
    assert (entry["reconcile_id"], entry["namespace"], entry["object_name"]) == (
        ids[0],
        "ns",
        "obj",
    )
