"""`kubetune.wakeups`: one wait for the first of several events, and `versioned.PerVersion`."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import urllib.request

import pytest

from kubetune.runtime.serving import serve_probes
from kubetune.runtime.versioned import PerVersion
from kubetune.wakeups import Wakeup, first_of


def test_first_of_is_set_by_whichever_source_is_set_first() -> None:
    stop, lost = Wakeup(), Wakeup()
    either = first_of(stop, lost)
    assert not either.is_set()
    threading.Timer(0.05, lost.set).start()
    assert either.wait(10)
    assert lost.is_set() and not stop.is_set()


def test_first_of_a_source_already_set_is_set_at_once() -> None:
    stop = Wakeup()
    stop.set()
    assert first_of(stop, Wakeup()).is_set()


def test_clearing_a_source_leaves_its_listeners_set() -> None:
    leader = Wakeup()
    either = first_of(leader)
    leader.set()
    leader.clear()
    assert either.is_set() and not leader.is_set()


def test_the_probe_server_answers_and_its_shutdown_ends_its_loop() -> None:
    """No poll timer: the loop sleeps in select until a connection, and shutdown wakes it."""
    server = serve_probes("127.0.0.1", 0, healthy=lambda: True, ready=lambda: False)
    port = server.server_address[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
        assert answer.read() == b"ok"
    done = threading.Thread(target=server.shutdown)
    done.start()
    done.join(30)
    assert not done.is_alive(), "shutdown did not end the serving loop"
    server.server_close()


def _obj(uid: str, version: str) -> dict[str, object]:
    return {"metadata": {"uid": uid, "resourceVersion": version}}


def test_a_value_is_computed_once_per_version_and_again_for_a_new_one() -> None:
    memo: PerVersion[int] = PerVersion()
    calls: list[str] = []

    def compute(tag: str) -> int:
        calls.append(tag)
        return len(calls)

    assert memo.get(_obj("u", "1"), lambda: compute("a")) == 1
    assert memo.get(_obj("u", "1"), lambda: compute("b")) == 1  # the same version: remembered
    assert memo.get(_obj("u", "2"), lambda: compute("c")) == 2  # changed: computed again
    assert memo.get(_obj("u", "2"), lambda: compute("d"), "other rules") == 3  # extra key
    assert memo.get({"metadata": {}}, lambda: compute("e")) == 4  # no version: every time
    assert memo.get({"metadata": {}}, lambda: compute("f")) == 5
    assert calls == ["a", "c", "d", "e", "f"]


def test_the_memory_starts_over_past_its_limit() -> None:
    memo: PerVersion[str] = PerVersion(limit=2)
    computed: list[str] = []

    def compute(version: str) -> str:
        computed.append(version)
        return version

    for version in ("1", "2", "3", "1"):
        memo.get(_obj("u", version), functools.partial(compute, version))
    assert computed == ["1", "2", "3", "1"]  # "1" was forgotten when "3" came in


# A SIGTERM the kernel hands to a thread other than the main one: its Python handler runs only
# when the main thread next runs bytecode.
SIGTERM_TO_A_WORKER = """
import signal, sys, threading, time
from kubetune import wakeups
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
def worker():
    time.sleep(0.3)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    time.sleep(60)
threading.Thread(target=worker, daemon=True).start()
if sys.argv[1] == "untimed":
    stop.wait()
else:
    wakeups.wait_in_main_thread(stop)
print("woken", flush=True)
"""


def test_the_main_threads_wait_sees_a_sigterm_delivered_to_another_thread() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SIGTERM_TO_A_WORKER, "helper"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "woken\n", done
    # Why the helper: an untimed wait sleeps through that signal.
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", SIGTERM_TO_A_WORKER, "untimed"], timeout=5)
