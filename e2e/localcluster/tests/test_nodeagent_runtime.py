"""The node agent's process model with real processes: namespaces, mounts, exit codes,
and pod status composed from what really happened. Needs root (unshare/nsenter)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.nodeagent.images import ImageMap
from localcluster.nodeagent.sandbox import ContainerProcess, Sandbox, reap_recorded
from localcluster.nodeagent.status import ContainerStatus, PodView, compose, compute_phase

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: for namespaces")


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    sb = Sandbox.create(str(tmp_path / "sb.json"))
    yield sb
    sb.kill()


def _run(
    sb: Sandbox,
    tmp: Path,
    name: str,
    script: str,
    share: bool = True,
    mounts: list[dict[str, Any]] | None = None,
    argv: list[str] | None = None,
) -> ContainerProcess:
    env = ImageMap.load(None).base_env("python:3")
    spec = {
        "argv": argv or [sys.executable, "-c", script],
        "env": env,
        "mounts": mounts or [],
        "workingDir": "",
        "startError": str(tmp / f"{name}.err"),
    }
    log = open(tmp / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    return ContainerProcess(sb, share, spec, str(tmp / f"{name}.json"), log)


def test_shared_pid_namespace_sees_and_waits(sandbox: Sandbox, tmp_path: Path) -> None:
    target = _run(sandbox, tmp_path, "train", "import time; time.sleep(1.5)")
    watcher = _run(
        sandbox,
        tmp_path,
        "watch",
        (
            "import os, time, json\n"
            "me = os.getpid()\n"
            "def ppid(p):\n"
            "    return int(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1])\n"
            "pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
            "top = sorted(p for p in pids if p not in (1, me) and ppid(p) == 0)\n"
            "print(json.dumps({'me': me, 'ppid': os.getppid(), 'top': top}), flush=True)\n"
            "t0 = time.time()\n"
            "while os.path.exists(f'/proc/{top[0]}'):\n"
            "    time.sleep(0.05)\n"
            "print('waited', round(time.time() - t0, 1), flush=True)\n"
        ),
    )
    assert watcher.wait() == 0
    assert target.wait() == 0
    out = (tmp_path / "watch.log").read_text().splitlines()
    info = json.loads(out[0])
    assert info["ppid"] == 0
    assert info["me"] < 100  # a small PID: the pod's own namespace
    assert len(info["top"]) == 1
    assert out[1].startswith("waited") and float(out[1].split()[1]) >= 0.5


def test_own_pid_namespace_is_pid1(sandbox: Sandbox, tmp_path: Path) -> None:
    p = _run(
        sandbox,
        tmp_path,
        "solo",
        (
            "import os; print(os.getpid(), sorted(int(x) for x in os.listdir('/proc') "
            "if x.isdigit()))"
        ),
        share=False,
    )
    assert p.wait() == 0
    line = (tmp_path / "solo.log").read_text().strip()
    assert line == "1 [1]"


def test_exit_codes_signals_and_start_errors(sandbox: Sandbox, tmp_path: Path) -> None:
    assert _run(sandbox, tmp_path, "three", "raise SystemExit(3)").wait() == 3
    sleeper = _run(sandbox, tmp_path, "sleeper", "import time; time.sleep(60)")
    time.sleep(0.3)
    sleeper.signal(signal.SIGTERM)
    assert sleeper.wait() == 143
    missing = _run(sandbox, tmp_path, "missing", "", argv=["no-such-binary-xyz"])
    assert missing.wait() == 128
    assert "executable file not found" in (tmp_path / "missing.err").read_text()


def test_bind_mounts_read_only_and_private(sandbox: Sandbox, tmp_path: Path) -> None:
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "in.txt").write_text("hello")
    target = f"/tmp/nodeagent-test-mnt-{os.getpid()}"
    rw = _run(
        sandbox,
        tmp_path,
        "rw",
        (f"open('{target}/out.txt', 'w').write(open('{target}/in.txt').read() + ' back')"),
        mounts=[{"source": str(vol), "target": target}],
    )
    assert rw.wait() == 0
    assert (vol / "out.txt").read_text() == "hello back"
    ro = _run(
        sandbox,
        tmp_path,
        "ro",
        f"open('{target}/x', 'w')",
        mounts=[{"source": str(vol), "target": target, "readOnly": True}],
    )
    assert ro.wait() == 1
    assert "Read-only file system" in (tmp_path / "ro.log").read_text()
    # The host never sees the mount, nor the mount point the container needed.
    assert not os.path.exists(target)


def test_a_mount_over_tmp_does_not_hide_later_sources(sandbox: Sandbox, tmp_path: Path) -> None:
    """An emptyDir at /tmp must not hide the sources (and the start-error file) that live
    in a state dir under /tmp: every source is opened before anything is mounted."""
    assert str(tmp_path).startswith("/tmp/")
    empty = tmp_path / "empty"
    empty.mkdir()
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "in.txt").write_text("under tmp")
    target = f"/var/tmp/nodeagent-test-late-{os.getpid()}"
    mounts = [
        {"source": str(empty), "target": "/tmp"},
        {"source": str(vol), "target": target},
    ]
    script = f"print(open('{target}/in.txt').read()); open('/tmp/scratch', 'w').write('x')"
    # The base interpreter, not a venv's: a checkout under /tmp (as CI's may be) would have
    # its venv hidden by the emptyDir at /tmp like any other file there.
    python = os.path.realpath(sys.executable)
    ok = _run(sandbox, tmp_path, "late", "", mounts=mounts, argv=[python, "-c", script])
    assert ok.wait() == 0, (tmp_path / "late.log").read_text()
    assert "under tmp" in (tmp_path / "late.log").read_text()
    assert (empty / "scratch").read_text() == "x"
    bad = _run(sandbox, tmp_path, "bad", "", argv=["no-such-binary-xyz"], mounts=mounts)
    assert bad.wait() == 128
    assert "executable file not found" in (tmp_path / "bad.err").read_text()


def test_mount_points_leave_no_trace_on_the_host(sandbox: Sandbox, tmp_path: Path) -> None:
    """Missing mount points (the service-account token dir, a new top-level dir, a dir in
    /tmp, a file) and workingDir exist in the container only, never on the host."""
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "token").write_text("t")
    (tmp_path / "one.txt").write_text("one")
    tag = f"nodeagent-test-{os.getpid()}"
    targets = {
        "sa": f"/var/run/secrets/{tag}/serviceaccount",
        "top": f"/{tag}/data",
        "tmp": f"/tmp/{tag}/a/b",
        "file": f"/etc/{tag}/one.txt",
    }
    mounts = [
        {"source": str(vol), "target": targets["sa"], "readOnly": True},
        {"source": str(vol), "target": targets["top"]},
        {"source": str(vol), "target": targets["tmp"]},
        {"source": str(tmp_path / "one.txt"), "target": targets["file"], "file": True},
    ]
    marker = tmp_path / "running"
    script = (
        "import os, time\n"
        f"assert open('{targets['sa']}/token').read() == 't'\n"
        f"assert open('{targets['top']}/token').read() == 't'\n"
        f"assert open('{targets['tmp']}/token').read() == 't'\n"
        f"assert open('{targets['file']}').read() == 'one'\n"
        f"assert os.getcwd() == '/{tag}/work'\n"
        "assert os.path.isdir('/usr/bin') and os.path.isdir('/proc/self')\n"
        f"assert os.path.exists('{tmp_path}')\n"
        f"open('{marker}', 'w').close()\n"
        "time.sleep(1.5)\n"
    )
    env = ImageMap.load(None).base_env("python:3")
    spec = {
        "argv": [sys.executable, "-c", script],
        "env": env,
        "mounts": mounts,
        "workingDir": f"/{tag}/work",
        "startError": str(tmp_path / "trace.err"),
    }
    log = open(tmp_path / "trace.log", "ab")  # noqa: SIM115 - handed to the child
    proc = ContainerProcess(sandbox, True, spec, str(tmp_path / "trace.json"), log)
    deadline = time.monotonic() + 20
    while not marker.exists() and proc.popen.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    host_paths = [f"/var/run/secrets/{tag}", f"/run/secrets/{tag}", f"/{tag}", f"/tmp/{tag}"]
    leftovers = [p for p in [*host_paths, f"/etc/{tag}"] if os.path.lexists(p)]
    assert proc.wait() == 0, (tmp_path / "trace.log").read_text()
    assert leftovers == []
    assert not any(os.path.lexists(p) for p in (f"/{tag}", f"/tmp/{tag}", f"/etc/{tag}"))


def test_killing_the_sandbox_ends_every_process(tmp_path: Path) -> None:
    sb = Sandbox.create(str(tmp_path / "sb.json"))
    procs = [
        _run(sb, tmp_path, f"c{i}", "import time; time.sleep(60)", share=bool(i % 2))
        for i in range(2)
    ]
    time.sleep(0.3)
    sb.kill()
    assert [p.wait() for p in procs] == [137, 137]
    assert not sb.alive()


def test_reap_recorded_kills_leftover(tmp_path: Path) -> None:
    rec = str(tmp_path / "sb.json")
    sb = Sandbox.create(rec)
    assert reap_recorded(rec)
    sb.holder.wait(timeout=5)
    assert not reap_recorded(rec)


def _status_of(proc: ContainerProcess, name: str) -> ContainerStatus:
    st = ContainerStatus(name=name, image="python:3")
    st.set_running(proc.id)
    st.started = st.ready = True
    st.set_terminated(proc.wait())
    return st


def test_status_composition_from_real_runs(sandbox: Sandbox, tmp_path: Path) -> None:
    ok = _status_of(_run(sandbox, tmp_path, "ok", "pass"), "ok")
    bad = _status_of(_run(sandbox, tmp_path, "bad", "raise SystemExit(2)"), "bad")
    view = PodView(
        restart_policy="Never",
        init=[],
        containers=[ok],
        sandbox_ready=True,
        pod_ip="192.0.2.2",
        host_ip="192.0.2.2",
    )
    st = compose(view)
    assert st["phase"] == "Succeeded"
    term = st["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    assert st["containerStatuses"][0]["state"]["running"] is None
    assert {c["type"]: c["status"] for c in st["conditions"]}["Ready"] == "False"
    view.containers = [ok, bad]
    assert compute_phase(view) == "Failed"
    st = compose(view)
    bterm = st["containerStatuses"][1]["state"]["terminated"]
    assert bterm["exitCode"] == 2 and bterm["reason"] == "Error"
    view.restart_policy = "OnFailure"
    bad.set_waiting("CrashLoopBackOff", "back-off")
    assert compute_phase(view) == "Running"
    assert compose(view)["containerStatuses"][1]["lastState"]["terminated"]["exitCode"] == 2


def test_status_running_ready_and_init(sandbox: Sandbox, tmp_path: Path) -> None:
    init = _status_of(_run(sandbox, tmp_path, "init", "pass"), "init")
    init.init = True
    main = ContainerStatus(name="main", image="python:3")
    view = PodView(
        restart_policy="Always",
        init=[init],
        containers=[main],
        sandbox_ready=True,
        start_time="2026-01-01T00:00:00Z",
    )
    assert compute_phase(view) == "Pending"
    proc = _run(sandbox, tmp_path, "main", "import time; time.sleep(30)")
    main.set_running(proc.id)
    main.started = main.ready = True
    st = compose(view)
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert st["phase"] == "Running"
    assert conds == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    assert st["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert st["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    first = {c["type"]: c["lastTransitionTime"] for c in st["conditions"]}
    assert {c["type"]: c["lastTransitionTime"] for c in compose(view)["conditions"]} == first
    proc.signal(signal.SIGKILL)
    assert proc.wait() == 137


def test_pod_dies_with_the_thread_that_started_it(tmp_path: Path) -> None:
    """An agent killed with SIGKILL must not leave pods running (PDEATHSIG chain)."""
    import threading

    box: list[Sandbox] = []
    t = threading.Thread(target=lambda: box.append(Sandbox.create(str(tmp_path / "sb.json"))))
    t.start()
    t.join()
    sb = box[0]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and os.path.exists(f"/proc/{sb.pause_pid}"):
        sb.holder.poll()
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{sb.pause_pid}")


def test_lo_pod_address_claim_release_and_sweep(tmp_path: Path) -> None:
    import subprocess
    import uuid

    from localcluster.nodeagent import netaddr

    ip = netaddr.claim_lo_address(f"test-{uuid.uuid4()}")
    assert ip is not None and ip.startswith("10.244.")
    try:
        assert ip in netaddr.host_addresses()
        # Pretend the owner died: the next claim removes the orphan.
        with open(os.path.join(netaddr.REGISTRY, ip), "w") as fh:
            json.dump({"pid": 2**22 + 1, "ctime": 0.0}, fh)
        other = netaddr.claim_lo_address(f"test-{uuid.uuid4()}")
        assert other is not None and other != ip
        netaddr.release_lo_address(other)
        assert ip not in netaddr.host_addresses()
    finally:
        subprocess.run(
            ["ip", "addr", "del", f"{ip}/32", "dev", "lo"], capture_output=True, check=False
        )
