"""What a request may cost in memory before it is parsed, and the byte budget it waits for.

gRPC hands db-manager a request's raw bytes (the method handlers have no deserializer); parsing
them makes many objects (measured: an upb message of empty metric logs holds ~28x its wire
bytes; 10,000 distinct metric names ~2 KiB each once checked and put into a history). So
a request is priced before parsing from its size and the count of its metric logs, which a
scan of the protobuf wire format finds in at most MAX_LOGS + 16 steps, and runs only once the
budget has room for that price: memory is bounded by bytes in flight, not by RPC count.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

BYTES_FACTOR = 4
"""Memory per wire byte of a request with few logs: the raw bytes, the parsed message and
the Python strings made from it (measured at most ~3.5x for 256-character names)."""
LOG_COST = 2_560
"""Memory per metric log once checked and merged into a Trial's history (measured ~2 KiB for
10,000 distinct names, the worst case)."""
BASE_COST = 16 * 1024
"""Every request: its reply, the Trial patch and read around it."""


class Malformed(ValueError):
    """The bytes are not a protobuf message."""


class Budget:
    """Bytes the requests being served may hold, shared by all of them; `peak` is the most
    ever held (exported, and asserted on by the tests)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._room = threading.Condition()

    def acquire(self, amount: int, timeout: float) -> bool:
        """Hold `amount` bytes once they are free, waiting at most `timeout` seconds; False
        if they were not (or could never be: more than the limit)."""
        if amount > self.limit:
            return False
        with self._room:
            if not self._room.wait_for(lambda: self.used + amount <= self.limit, timeout):
                return False
            self.used += amount
            self.peak = max(self.peak, self.used)
            return True

    def release(self, amount: int) -> None:
        with self._room:
            self.used -= amount
            self._room.notify_all()


def cost(size: int, logs: int) -> int:
    """The bytes a request of `size` wire bytes and `logs` metric logs is charged."""
    return BASE_COST + BYTES_FACTOR * size + LOG_COST * logs


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise Malformed("a truncated or overlong varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes, start: int, end: int, budget: list[int]) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end) of each length-delimited field in data[start:end]; other
    wire types are skipped. Each field spends one of `budget[0]`; none left: Malformed."""
    at = start
    while at < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError
        key, at = _varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == 0:
            _, at = _varint(data, at)
        elif kind == 1:
            at += 8
        elif kind == 5:
            at += 4
        elif kind == 2:
            length, at = _varint(data, at)
            if at + length > end:
                raise Malformed("a field runs past the end of its message")
            yield number, at, at + length
            at += length
        else:
            raise Malformed(f"wire type {kind} (groups are not used by this API)")
    if at != end:
        raise Malformed("a field runs past the end of its message")


def count_metric_logs(raw: bytes, limit: int) -> int | None:
    """The metric logs in a serialized ReportObservationLogRequest (field 2, observation_log;
    its field 1, metric_logs), or None once there are more than `limit` (or more than `limit`
    fields in all): the scan stops there, whatever the size.

    Raises:
        Malformed: not a protobuf message.
    """
    steps = [limit + 16]
    count = 0
    try:
        for number, start, end in _fields(raw, 0, len(raw), steps):
            if number == 2:  # observation_log: repeated occurrences are merged by parsers
                count += sum(1 for inner, _, _ in _fields(raw, start, end, steps) if inner == 1)
            if count > limit:
                return None
    except OverflowError:
        return None
    return count
