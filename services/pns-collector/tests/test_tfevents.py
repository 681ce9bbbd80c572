"""TensorFlow event files written byte by byte the way TensorFlow writes them (TFRecord framing
with masked CRC-32C, Event/Summary protobufs), read back without TensorFlow."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kubetune_pns_collector import tfevents
from kubetune_pns_collector.tfevents import EventDirectory


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = _varint(number << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def simple_value(tag: str, value: float) -> bytes:
    return _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", value))


def tensor_value(tag: str, dtype: int, body: bytes) -> bytes:
    tensor = _field(1, 0, _varint(dtype)) + _field(2, 2, b"") + body
    return _field(1, 2, tag.encode()) + _field(8, 2, tensor)


def event(wall_time: float, step: int, *values: bytes) -> bytes:
    summary = b"".join(_field(1, 2, v) for v in values)
    return (
        _field(1, 1, struct.pack("<d", wall_time))
        + _field(2, 0, _varint(step))
        + _field(5, 2, summary)
    )


def record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", tfevents.masked_crc(header))
        + data
        + struct.pack("<I", tfevents.masked_crc(data))
    )


def test_crc32c_known_answer() -> None:
    assert tfevents.crc32c(b"123456789") == 0xE3069283


def test_scalars_from_simple_values_and_tensors(tmp_path: Path) -> None:
    logs = tmp_path / "tfevent"
    (logs / "train").mkdir(parents=True)
    (logs / "test").mkdir()
    version = _field(1, 1, struct.pack("<d", 1.0)) + _field(3, 2, b"brain.Event:2")
    (logs / "train" / "events.out.tfevents.1.host").write_bytes(
        record(version)
        + record(event(100.0, 1, simple_value("accuracy", 0.5), simple_value("loss", 2.5)))
        + record(
            event(101.0, 2, tensor_value("accuracy", 1, _field(5, 2, struct.pack("<f", 0.75))))
        )
    )
    (logs / "test" / "events.out.tfevents.2.host").write_bytes(
        record(event(102.0, 1, tensor_value("accuracy", 1, _field(4, 2, struct.pack("<f", 0.9)))))
        + record(event(103.0, 1, tensor_value("steps", 9, _field(10, 0, _varint(-3)))))
        + record(event(104.0, 1, tensor_value("accuracy", 2, _field(6, 2, struct.pack("<d", 0.1)))))
    )
    (logs / "notes.txt").write_text("not an event file")
    events = EventDirectory(logs, ["accuracy", "test/accuracy", "loss", "steps"])
    got = events.read()
    events.close()
    assert sorted(got) == sorted(
        [
            ("accuracy", "0.5", 100.0),
            ("loss", "2.5", 100.0),
            ("accuracy", "0.75", 101.0),
            ("accuracy", "0.9", 102.0),
            ("test/accuracy", "0.9", 102.0),
            ("steps", "-3", 103.0),
            ("accuracy", "0.1", 104.0),
            ("test/accuracy", "0.1", 104.0),
        ]
    )


def test_records_are_read_as_they_complete_and_bad_files_skipped(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.3.host"
    first = record(event(1.0, 1, simple_value("loss", 1.0)))
    second = record(event(2.0, 2, simple_value("loss", 0.5)))
    events = EventDirectory(tmp_path, ["loss"])
    with open(path, "wb", buffering=0) as fh:
        fh.write(first + second[:10])
        assert events.read() == [("loss", "1", 1.0)]
        fh.write(second[10:])
        assert events.read() == [("loss", "0.5", 2.0)]
    (tmp_path / "x.tfevents.bad").write_bytes(b"\x00" * 64)
    assert events.read() == []
    events.close()


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.1, "0.1"), (1e-7, "1e-07"), (3.4028234663852886e38, "3.4028235e+38"), (2.5, "2.5")],
)
def test_float32_text_is_the_shortest_that_reads_back(value: float, text: str) -> None:
    as_f32 = struct.unpack("<f", struct.pack("<f", value))[0]
    assert tfevents.format_float32(as_f32) == text
