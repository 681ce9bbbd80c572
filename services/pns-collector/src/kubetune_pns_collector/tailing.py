"""Follow a file by path as it is written: complete lines out, in bounded memory.

`collecting` calls `FileTail.read()` whenever watchfiles reports a change (and once more at
the end with `final=True`). The tail copes with a file that does not exist yet, is replaced
(rotation: a new inode at the path; the old file is read to its end first), or is truncated
in place (copytruncate: read again from the start). A line is handed over only once its
`\\n` is written, except the last one at the end; undecodable bytes become U+FFFD. Memory is
one read block plus one partial line, and a "line" longer than `max_line` is dropped.
"""

from __future__ import annotations

import os

from kubetune import lightlog
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import BinaryIO

log = lightlog.get(__name__)

BLOCK = 64 << 10  # small reads keep the heap from growing (glibc reuses them)
MAX_LINE = 1 << 20


class FileTail:
    """Reads what was appended to `path` since the last call."""

    def __init__(self, path: str | os.PathLike[str], block: int = BLOCK, max_line: int = MAX_LINE):
        self.path = os.fspath(path)
        self.block = block
        self.max_line = max_line
        self._fh: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self._pos = 0
        self._partial: list[bytes] = []
        self._partial_len = 0
        self._dropping = False  # inside an over-long line: skip up to its end
        self.bytes_read = 0

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def read(self, final: bool = False) -> Iterator[str]:
        """Blocks of complete lines (each ends with `\\n` except a final partial line)."""
        if self._fh is None and not self._open():
            return
        yield from self._drain()
        # Replaced or truncated since we opened it?
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) != self._ino:
            log.info("%s was replaced (rotated); reading the new file from its start", self.path)
            yield from self._flush_partial()
            self.close()
            if self._open():
                yield from self._drain()
        elif st is not None and st.st_size < self._pos:
            log.info("%s was truncated; reading it again from its start", self.path)
            yield from self._flush_partial()
            assert self._fh is not None
            self._fh.seek(0)
            self._pos = 0
            yield from self._drain()
        if final:
            yield from self._flush_partial()

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - kept open across calls
        except (FileNotFoundError, IsADirectoryError):
            return False
        st = os.fstat(fh.fileno())
        self._fh, self._ino, self._pos = fh, (st.st_dev, st.st_ino), 0
        return True

    def _drain(self) -> Iterator[str]:
        assert self._fh is not None
        while True:
            data = self._fh.read(self.block)
            if not data:
                return
            self._pos += len(data)
            self.bytes_read += len(data)
            cut = data.rfind(b"\n")
            if cut < 0:
                self._keep(data)
                continue
            head, tail = data[: cut + 1], data[cut + 1 :]
            if self._dropping:
                head = head[head.find(b"\n") + 1 :]
                self._dropping = False
            elif self._partial:
                head = b"".join([*self._partial, head])
            self._partial.clear()
            self._partial_len = 0
            self._keep(tail)
            if head:
                yield head.decode("utf-8", "replace")

    def _keep(self, data: bytes) -> None:
        if self._dropping:
            return
        if not data:
            return
        if self._partial_len + len(data) > self.max_line:
            log.warning("dropping a line of %s longer than %d bytes", self.path, self.max_line)
            self._partial.clear()
            self._partial_len = 0
            self._dropping = True
            return
        self._partial.append(data)  # chunks, joined once the line ends: no quadratic copying
        self._partial_len += len(data)

    def _flush_partial(self) -> Iterator[str]:
        if self._partial and not self._dropping:
            yield b"".join(self._partial).decode("utf-8", "replace")
        self._partial.clear()
        self._partial_len = 0
        self._dropping = False
