"""`cluster.free_port`: a port below the ephemeral range and the node ports, nothing on it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from localcluster import cluster


def test_ports_are_below_the_ephemeral_range_and_bindable() -> None:
    low = min(cluster._ephemeral_low(), cluster.NODE_PORTS_START)
    for _ in range(20):
        port = cluster.free_port()
        assert cluster.LOWEST_PORT <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held, socket.socket() as probe:
        held.bind(("127.0.0.1", 0))
        held.listen()
        probe.bind(("127.0.0.1", 0))
        taken, free = held.getsockname()[1], probe.getsockname()[1]
        probe.close()  # free again: the third pick
        picks = iter([taken, taken, free])
        monkeypatch.setattr(cluster, "_ephemeral_low", lambda: 65000)
        monkeypatch.setattr(cluster._PORTS, "randrange", lambda lo, hi: next(picks))
        assert cluster.free_port() == free


def test_the_ephemeral_range_is_read_from_the_kernel_file(tmp_path: Path) -> None:
    path = tmp_path / "range"
    path.write_text("40000\t60999\n")
    assert cluster._ephemeral_low(str(path)) == 40000
    assert cluster._ephemeral_low(str(tmp_path / "missing")) == 32768
