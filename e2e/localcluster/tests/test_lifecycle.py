"""``up``/``down``/``status``/``env`` through the real CLI, and clean teardown in every path."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from localcluster import cluster

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "localcluster"]


def _cli(state_dir: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LOCALCLUSTER_NODEAGENT="0")
    return subprocess.run(
        [*CLI, "--state-dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def _listening_ports(owned_by: str = "") -> set[int]:
    """Ports in LISTEN state; with ``owned_by``, only those of processes naming that path.

    Other clusters on this machine (parallel sessions) may reuse a freed port, so the
    teardown check asks whether anything of *ours* still listens.
    """
    ports = set()
    for c in psutil.net_connections(kind="tcp"):
        if c.status != psutil.CONN_LISTEN or not c.laddr:
            continue
        if owned_by:
            try:
                cmdline = " ".join(psutil.Process(c.pid).cmdline()) if c.pid else ""
            except psutil.Error:
                continue
            if owned_by not in cmdline:
                continue
        ports.add(int(c.laddr[1]))
    return ports


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if cluster.pid_alive(p)]


def _assert_nothing_left(pids: list[int], ports: list[int], etcd_dir: str, state_dir: str) -> None:
    assert pids, "the test saw no component PIDs"
    assert _alive(pids) == []
    assert set(ports) & _listening_ports(owned_by=state_dir) == set()
    assert set(ports) & _listening_ports(owned_by=etcd_dir) == set()
    assert not Path(etcd_dir).exists()


def test_up_status_env_down_leaves_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    up = _cli(state_dir, "up")
    assert up.returncode == 0, up.stderr + up.stdout
    st = json.loads(_cli(state_dir, "status", "--json").stdout)
    assert st["running"] and st["apiserver_ready"]
    pids = [c["pid"] for c in st["components"].values()]
    assert set(st["components"]) >= {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    }
    assert all(c["alive"] for c in st["components"].values())
    state = cluster.State.load(state_dir)
    assert state is not None
    ports = list(state.ports.values())
    ours = _listening_ports(state.state_dir) | _listening_ports(state.etcd_data_dir)
    assert set(ports) <= ours
    # Each component leads its own process group.
    assert all(os.getpgid(p) == p for p in pids)
    env = _cli(state_dir, "env")
    assert env.stdout.strip() == f"export KUBECONFIG={state.kubeconfig}"
    assert _cli(state_dir, "up").returncode == 1  # refuses a second cluster on the same state

    down = _cli(state_dir, "down")
    assert down.returncode == 0, down.stderr
    _assert_nothing_left(pids, ports, state.etcd_data_dir, state.state_dir)
    assert _cli(state_dir, "status").returncode == 3
    assert _cli(state_dir, "env").returncode == 3


def test_failed_up_leaves_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    # Too short for the apiserver to become ready: up must fail and clean up after itself.
    up = _cli(state_dir, "up", "--timeout", "2")
    assert up.returncode == 1
    assert "timed out" in up.stderr
    log_dir = state_dir / "logs"
    assert not log_dir.exists()  # state removed
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(state_dir) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []


def test_interrupted_session_leaves_nothing(tmp_path: Path) -> None:
    """Ctrl-C during a pytest session still runs ``down`` for the session cluster."""
    marker = tmp_path / "state-dir.txt"
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(
        textwrap.dedent(f"""
        import time
        def test_sleeps(cluster):
            open({str(marker)!r}, "w").write(cluster.state.state_dir)
            time.sleep(300)
    """)
    )
    env = dict(os.environ, LOCALCLUSTER_NODEAGENT="0")
    env.pop("KUBETUNE_E2E_EXISTING_CLUSTER", None)
    # Ctrl-C as a terminal sends it, even when this session runs in a background job (a
    # non-interactive shell starts those with SIGINT ignored, and children inherit that).
    inner = (
        "import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler);"
        "sys.exit(pytest.main(sys.argv[1:]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", inner, "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 150
        while not marker.exists() or not marker.read_text():
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "inner session never got a cluster"
            time.sleep(0.5)
        state = cluster.State.load(Path(marker.read_text()))
        assert state is not None
        pids = [c.pid for c in state.components.values()]
        ports = list(state.ports.values())
        assert len(_alive(pids)) == 4
        proc.send_signal(signal.SIGINT)
        # communicate, not wait: the session's last words must not fill the pipe and block it.
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_nothing_left(pids, ports, state.etcd_data_dir, state.state_dir)


def test_sweep_removes_only_unused_old_etcd_dirs(tmp_path: Path) -> None:
    old = tmp_path / "localcluster-etcd-old"
    fresh = tmp_path / "localcluster-etcd-fresh"
    busy = tmp_path / "localcluster-etcd-busy"
    for d in (old, fresh, busy):
        d.mkdir()
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(busy, (past, past))
    # A live process naming the dir as --data-dir (in its argv, as etcd would) keeps it.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", f"--data-dir={busy}"],
        start_new_session=True,
    )
    try:
        # Until it has exec'd, the child still shows this process's argv: wait for its own.
        deadline = time.monotonic() + 10
        while f"--data-dir={busy}" not in psutil.Process(holder.pid).cmdline():
            assert time.monotonic() < deadline, "the holder process never started"
            time.sleep(0.01)
        removed = cluster.sweep_stale_etcd_dirs(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert removed == [old]
    assert not old.exists() and fresh.exists() and busy.exists()


def test_port_taken_before_bind_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port found free and then bound by another process only costs a second start."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = int(holder.getsockname()[1])
    real_free_port = cluster.free_port
    picks: list[int] = []

    def apiserver_port_taken_once(host: str = "127.0.0.1") -> int:
        # The fifth pick is the API server's (after etcd's two, KCM's and the scheduler's).
        picks.append(0)
        return taken if len(picks) == 5 else real_free_port(host)

    monkeypatch.setattr(cluster, "free_port", apiserver_port_taken_once)
    monkeypatch.setenv("LOCALCLUSTER_NODEAGENT", "0")
    state_dir = tmp_path / "state"
    try:
        state = cluster.up(state_dir, with_nodeagent=False, bind_to_parent=True)
        try:
            assert state.ports["kube-apiserver"] != taken
            assert len(picks) == 10
            assert "taken between its pick and its bind" in capsys.readouterr().out
            assert cluster.status(state_dir)["apiserver_ready"] is True
        finally:
            assert cluster.down(state_dir, quiet=True)
    finally:
        holder.close()
