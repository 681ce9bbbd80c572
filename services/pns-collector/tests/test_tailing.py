"""Following a metrics file with real files: split writes, partial lines, odd bytes, late
files, rotation and truncation."""

from __future__ import annotations

import os
from pathlib import Path

from kubetune_pns_collector.tailing import FileTail


def read(tail: FileTail, final: bool = False) -> str:
    return "".join(tail.read(final))


def test_lines_split_across_writes_and_a_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "m.log"
    tail = FileTail(path, block=7)
    assert read(tail) == "", "a file that does not exist yet is not an error"
    with open(path, "ab", buffering=0) as fh:
        fh.write(b"loss=0.")
        assert read(tail) == ""
        fh.write(b"5\nacc")
        assert read(tail) == "loss=0.5\n"
        fh.write(b"uracy=0.9\r\nlast=1")
        assert read(tail) == "accuracy=0.9\r\n"
        assert read(tail, final=True) == "last=1", "the last line without \\n counts at the end"
    tail.close()


def test_non_utf8_bytes_become_replacement_characters(tmp_path: Path) -> None:
    path = tmp_path / "m.log"
    path.write_bytes(b"loss=1 \xff\xfe accuracy=2\n\xe2\x82\xac=3\n")
    tail = FileTail(path)
    assert read(tail) == "loss=1 \ufffd\ufffd accuracy=2\n\u20ac=3\n"
    tail.close()


def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "m.log"
    path.write_text("a=1\n")
    tail = FileTail(path)
    assert read(tail) == "a=1\n"
    with open(path, "a") as fh:
        fh.write("a=2\n")
    os.rename(path, tmp_path / "m.log.1")
    path.write_text("a=3\n")
    assert read(tail) == "a=2\na=3\n"
    tail.close()


def test_truncation_starts_again_from_the_beginning(tmp_path: Path) -> None:
    path = tmp_path / "m.log"
    path.write_text("a=1\na=2\n")
    tail = FileTail(path)
    assert read(tail) == "a=1\na=2\n"
    with open(path, "r+") as fh:
        fh.truncate(0)
        fh.write("b=1\n")
    assert read(tail) == "b=1\n"
    tail.close()


def test_an_over_long_line_is_dropped_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.log"
    path.write_bytes(b"a=1\n" + b"x" * 5000 + b"\nb=2\n" + b"y" * 5000)
    tail = FileTail(path, block=1024, max_line=1000)
    assert read(tail, final=True) == "a=1\nb=2\n"
    tail.close()
