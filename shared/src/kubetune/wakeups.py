"""Events a thread can wait on together, so an idle process sleeps instead of polling.

Python has no wait for the first of several `threading.Event`s; the usual stand-in, a loop of
short timed waits, wakes an idle controller ten or twenty times a second (each wake takes the
GIL from the threads doing work). A `Wakeup` also sets every event listening to it, and
`first_of` gives one event set as soon as any of its sources is.
"""

from __future__ import annotations

import threading


class Wakeup(threading.Event):
    """An Event that also sets its listeners when set (`clear` leaves them alone)."""

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[threading.Event] = []
        self._listeners_lock = threading.Lock()

    def listen(self, listener: threading.Event) -> None:
        """Set `listener` whenever this is set (at once if it already is)."""
        with self._listeners_lock:
            self._listeners.append(listener)
        if self.is_set():
            listener.set()

    def set(self) -> None:
        super().set()
        with self._listeners_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.set()


def first_of(*sources: Wakeup) -> threading.Event:
    """An event set as soon as any of `sources` is set (already set if one is)."""
    any_set = threading.Event()
    for source in sources:
        source.listen(any_set)
    return any_set


SIGNAL_CHECK = 1.0
"""Seconds between the main thread's looks for a signal while it waits."""


def wait_in_main_thread(event: threading.Event) -> None:
    """Block the main thread until `event` is set (by a signal handler, say), waking once a
    second. CPython runs a signal's handler only when the main thread runs bytecode, and the
    kernel may deliver SIGTERM to any thread: delivered to a gRPC or worker thread, it does not
    interrupt the main thread's untimed wait, which then slept through it for ever (CI saw
    db-manager still running 30 s after SIGTERM, its main thread in `Event.wait()`)."""
    while not event.wait(SIGNAL_CHECK):
        pass
