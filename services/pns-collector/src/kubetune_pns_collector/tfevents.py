"""TensorFlow event files to metric values, without TensorFlow or tensorboard.

Why our own reader: the `tensorboard` package drags in numpy, protobuf, grpcio and a web
server (well over 50 MiB installed) into a sidecar that needs four protobuf fields. An event
file is a TFRecord stream (u64 length, u32 masked CRC-32C of the length, the bytes, u32 masked
CRC-32C of the bytes) of `Event` messages; we read `wall_time` (1), `summary` (5) and in each
`Summary.Value` the `tag` (1), `simple_value` (2) and a scalar `tensor` (8, `TensorProto`
dtype/float_val/double_val/int_val/int64_val/tensor_content). Only the length CRC is checked
(a mismatch means the file is not a record stream: it is skipped, as upstream skips bad files);
a record not yet fully written is read on the next call.

Matching follows upstream: metric `m` takes a tag that starts with the last
`/`-component of `m` from files whose directory ends with `dirname(m)`. Values are the
shortest text that reads back to the same float32 (upstream prints `str()` of the number).
"""

from __future__ import annotations

import os
import posixpath
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kubetune import lightlog

log = lightlog.get(__name__)

MAX_RECORD = 64 << 20
_MASK_DELTA = 0xA282EAD8
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64 = 1, 2, 3, 9
_DT_INT_LIKE = {3: "<i", 4: "<B", 5: "<h", 6: "<b", 9: "<q", 10: "<?"}
Triple = tuple[str, str, float]


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class CorruptRecord(ValueError):
    """Not a TFRecord stream (or a broken one)."""


# --- protobuf wire format, the little we need -------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecord("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise CorruptRecord("varint too long")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a message: ints for varint/fixed, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise CorruptRecord(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise CorruptRecord("truncated field")
        yield number, wire, value


def _f32(bits: int) -> float:
    value: float = struct.unpack("<f", bits.to_bytes(4, "little"))[0]
    return value


def _f64(bits: int) -> float:
    value: float = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    return value


def format_float32(value: float) -> str:
    """The shortest decimal text that reads back to the same float32."""
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == value:
                return text
        except OverflowError:
            continue
    return repr(value)


def _tensor_scalar(buf: bytes) -> str | None:
    """The value of a one-element numeric TensorProto, else None."""
    dtype = 0
    content = b""
    floats: list[float] = []
    doubles: list[float] = []
    ints: list[int] = []
    for number, _wire, value in fields(buf):
        if number == 1 and isinstance(value, int):
            dtype = value
        elif number == 4 and isinstance(value, bytes):
            content = value
        elif number == 5:
            if isinstance(value, bytes):
                floats += [v for (v,) in struct.iter_unpack("<f", value[: len(value) // 4 * 4])]
            else:
                floats.append(_f32(value))
        elif number == 6:
            if isinstance(value, bytes):
                doubles += [v for (v,) in struct.iter_unpack("<d", value[: len(value) // 8 * 8])]
            else:
                doubles.append(_f64(value))
        elif number in (7, 10):
            if isinstance(value, bytes):
                pos = 0
                while pos < len(value):
                    v, pos = _varint(value, pos)
                    ints.append(v)
            else:
                ints.append(value)
    if dtype == _DT_FLOAT:
        if content:
            floats = [v for (v,) in struct.iter_unpack("<f", content[: len(content) // 4 * 4])]
        return format_float32(floats[0]) if len(floats) == 1 else None
    if dtype == _DT_DOUBLE:
        if content:
            doubles = [v for (v,) in struct.iter_unpack("<d", content[: len(content) // 8 * 8])]
        return repr(doubles[0]) if len(doubles) == 1 else None
    if dtype in _DT_INT_LIKE:
        fmt = _DT_INT_LIKE[dtype]
        if content:
            size = struct.calcsize(fmt)
            if len(content) != size:
                return None
            return str(int(struct.unpack(fmt, content)[0]))
        if len(ints) != 1:
            return None
        v = ints[0]
        if v >= 1 << 63:  # negative numbers are ten-byte two's complement varints
            v -= 1 << 64
        return str(v)
    return None


@dataclass(frozen=True)
class Scalar:
    tag: str
    value: str
    wall_time: float


def event_scalars(record: bytes) -> list[Scalar]:
    """The scalar summary values of one serialised `Event`."""
    wall_time = 0.0
    summaries: list[bytes] = []
    for number, _wire, value in fields(record):
        if number == 1 and isinstance(value, int):
            wall_time = _f64(value)
        elif number == 5 and isinstance(value, bytes):
            summaries.append(value)
    out: list[Scalar] = []
    for summary in summaries:
        for number, _wire, value in fields(summary):
            if number != 1 or not isinstance(value, bytes):
                continue
            tag, text = "", None
            for n2, _w2, v2 in fields(value):
                if n2 == 1 and isinstance(v2, bytes):
                    tag = v2.decode("utf-8", "replace")
                elif n2 == 2 and isinstance(v2, int):
                    text = format_float32(_f32(v2))
                elif n2 == 8 and isinstance(v2, bytes):
                    text = _tensor_scalar(v2)
            if tag and text is not None:
                out.append(Scalar(tag, text, wall_time))
    return out


class RecordReader:
    """Complete TFRecords appended to one file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: BinaryIO | None = None
        self._buf = b""
        self.broken = False

    def records(self) -> Iterator[bytes]:
        if self.broken:
            return
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open across calls
            except OSError:
                return
        self._buf += self._fh.read()
        pos = 0
        try:
            while len(self._buf) - pos >= 12:
                header = self._buf[pos : pos + 8]
                (length,) = struct.unpack("<Q", header)
                (crc,) = struct.unpack("<I", self._buf[pos + 8 : pos + 12])
                if masked_crc(header) != crc or length > MAX_RECORD:
                    raise CorruptRecord(f"bad record header at byte {pos}")
                end = pos + 12 + length + 4
                if len(self._buf) < end:
                    break
                yield self._buf[pos + 12 : pos + 12 + length]
                pos = end
        except CorruptRecord as e:
            log.warning("skipping %s: not a readable event file (%s)", self.path, e)
            self.broken = True
            self._buf = b""
            self.close()
            return
        self._buf = self._buf[pos:]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def matches(metric: str, tag: str, file_dir: str) -> bool:
    """Upstream's rule: tag starts with the metric's last component, dir ends with the rest."""
    head, base = posixpath.split(metric)
    return tag.startswith(base) and file_dir.rstrip("/").endswith(head.rstrip("/"))


class EventDirectory:
    """Every event file under a directory, read incrementally."""

    def __init__(self, root: str | os.PathLike[str], names: Iterable[str]) -> None:
        self.root = Path(root)
        self.names = list(names)
        self._readers: dict[Path, RecordReader] = {}

    def _scan(self) -> None:
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                path = Path(dirpath) / name
                if "tfevents" in name and path not in self._readers:
                    self._readers[path] = RecordReader(path)

    def read(self) -> list[Triple]:
        self._scan()
        out: list[Triple] = []
        for path, reader in sorted(self._readers.items()):
            file_dir = str(path.parent)
            for record in reader.records():
                try:
                    scalars = event_scalars(record)
                except CorruptRecord as e:
                    log.warning("skipping an unreadable event in %s: %s", path, e)
                    continue
                for s in scalars:
                    for name in self.names:
                        if matches(name, s.tag, file_dir):
                            out.append((name, s.value, s.wall_time))
        return out

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
