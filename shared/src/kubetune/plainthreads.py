"""A thread and an event on `_thread` alone, for the trial pod's collector.

Why: `import threading` brings `functools`, `collections`, `weakref` and more, about a sixth
of the instructions the collector's start executes in every trial pod; it needs one thread
(the wait for the training processes), two events and locks (`_thread.allocate_lock`, which
is what `threading.Lock` is). The services keep `threading` and `kubetune.wakeups`.
"""

from __future__ import annotations

import _thread

from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


class Event:
    """`threading.Event`'s `set`, `is_set` and `wait`: once set it stays set.

    The gate lock is held while unset; `set` releases it for good, so every waiter's acquire
    succeeds (and hands it back at once) from then on."""

    __slots__ = ("_flag", "_gate", "_guard")

    def __init__(self) -> None:
        self._flag = False
        self._gate = _thread.allocate_lock()
        self._gate.acquire()
        self._guard = _thread.allocate_lock()

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._guard:
            if not self._flag:
                self._flag = True
                self._gate.release()

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False when `timeout` seconds passed first."""
        if self._flag:
            return True
        if self._gate.acquire(True, -1 if timeout is None else max(0.0, timeout)):
            self._gate.release()
        return self._flag


def start(target: Callable[[], object]) -> None:
    """Run `target` in a new thread; the process does not wait for it at exit (daemon)."""
    _thread.start_new_thread(target, ())
