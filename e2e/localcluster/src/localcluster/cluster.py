"""Start, inspect and stop the local control plane as plain processes.

Every component runs in its own process group with its own log file; ports are picked
free on 127.0.0.1 and written, with PIDs, to a state file so ``down``/``status`` (and
other processes such as tests) can find the cluster again.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from localcluster import build, certs, kubeconfig, node

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
NODE_NAME = "localcluster-node"
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 10.0
NODEAGENT_MODULE = "localcluster.nodeagent"
# Components in start order; ``down`` stops them in reverse.
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "nodeagent",
    "containerd",
    "kubelet",
    "kube-proxy",
)
# The real node's components: once one has started, a failed start is not retried.
NODE_COMPONENTS = ("containerd", "kubelet", "kube-proxy")
# Starts tried when a component finds its port taken (see ``_port_taken``).
START_ATTEMPTS = 3


class ClusterError(RuntimeError):
    """The cluster could not be started or inspected; the message says where to look."""


class RealNodeBusy(ClusterError):
    """Another run holds the machine's one real node; nothing was started, so trying again
    later is safe."""


def default_state_dir() -> Path:
    env = os.environ.get("LOCALCLUSTER_STATE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "kubetune" / "localcluster"


@dataclass
class Component:
    """One running process: its PID (also its process-group id) and log file."""

    name: str
    pid: int
    log: str
    cmd: list[str]


@dataclass
class State:
    """What ``up`` wrote: enough for ``down``, ``status`` and clients to find everything."""

    state_dir: str
    etcd_data_dir: str
    ports: dict[str, int] = field(default_factory=dict)
    components: dict[str, Component] = field(default_factory=dict)
    kubeconfig: str = ""
    kubectl: str = ""
    server: str = ""
    node_name: str = ""
    version: str = ""
    # A real node (``up --node kubelet``): its mode, address and the host settings to restore.
    node_mode: str = ""
    node_ip: str = ""
    sysctls: dict[str, str] = field(default_factory=dict)
    # ``up(audit=True)``: the API server's audit log (one JSON line per request).
    audit_log: str = ""

    @property
    def node_dir(self) -> Path:
        return Path(self.state_dir) / "node"

    @property
    def path(self) -> Path:
        return Path(self.state_dir) / "state.json"

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(self.path)

    @classmethod
    def load(cls, state_dir: Path) -> State | None:
        path = state_dir / "state.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        comps = {k: Component(**v) for k, v in data.pop("components", {}).items()}
        return cls(components=comps, **data)


_PORTS = random.SystemRandom()  # never the same sequence in two processes, whatever the seed
LOWEST_PORT = 10000
NODE_PORTS_START = 30000  # Services' node ports (30000-32767) are left to them


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The first port the kernel gives to outgoing connections (32768 by default)."""
    try:
        with open(path) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, below the kernel's ephemeral range and the node ports, checked
    by binding it.

    Why not the kernel's pick (bind to 0): that port comes from the ephemeral range, and it is
    free only until an outgoing connection of any process is given it. kube-apiserver once failed
    with "bind: address already in use" on such a port, taken in the second etcd needed to start.
    Outside that range only another listener can take it. Falls back to the kernel's pick when
    the range leaves no room below it or 200 random tries are all taken.
    """
    low = min(_ephemeral_low(), NODE_PORTS_START)
    for _ in range(200 if low > LOWEST_PORT + 1000 else 0):
        port = _PORTS.randrange(LOWEST_PORT, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _pdeathsig() -> None:
    """Runs in the child: die with the parent (used by the pytest session, never by ``up``)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
"""Components started by this process, kept so that reaping goes through their Popen objects
(a Popen dropped while its process runs makes Python warn, which fails strict test runs)."""


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop_group(pgid: int, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM a process group, wait, then SIGKILL whatever is left."""
    try:
        _stop_group(pgid, timeout)
    finally:
        # Collect the leader's exit status even when it died between two checks.
        for _ in range(20):
            _reap(pgid)
            if pgid not in _CHILDREN:
                break
            time.sleep(0.05)


def _stop_group(pgid: int, timeout: float) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pgid)
        if not _group_alive(pgid) or not _group_has_live_members(pgid):
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(50):
        _reap(pgid)
        if not _group_has_live_members(pgid):
            return
        time.sleep(0.1)


def _group_has_live_members(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class _Starter:
    """Launches components, recording each in the state file as soon as it exists."""

    def __init__(self, state: State, bind_to_parent: bool) -> None:
        self.state = state
        self.bind_to_parent = bind_to_parent
        self.log_dir = Path(state.state_dir) / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Component:
        log = self.log_dir / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.state.state_dir,
                start_new_session=True,
                env=env,
                preexec_fn=_pdeathsig if self.bind_to_parent else None,
            )
        _CHILDREN[proc.pid] = proc
        comp = Component(name=name, pid=proc.pid, log=str(log), cmd=cmd)
        self.state.components[name] = comp
        self.state.save()
        return comp


def _ssl_context(pki: certs.Pki | None, verify: bool = True) -> ssl.SSLContext:
    if pki is None or not verify:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=str(pki.p("ca.crt")))
    if pki is not None:
        ctx.load_cert_chain(str(pki.p("admin.crt")), str(pki.p("admin.key")))
    return ctx


def _http_ok(url: str, ctx: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _wait(what: str, check: Any, deadline: float, comp: Component | None) -> None:
    while time.monotonic() < deadline:
        if check():
            return
        if comp is not None and not pid_alive(comp.pid):
            raise ClusterError(
                f"{what} exited during startup; see {comp.log}:\n" + _tail(Path(comp.log))
            )
        time.sleep(0.2)
    where = f"; see {comp.log}:\n{_tail(Path(comp.log))}" if comp else ""
    raise ClusterError(f"timed out waiting for {what}{where}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def nodeagent_available() -> bool:
    """The node agent is written separately; ``up`` runs it only once it exists."""
    try:
        return importlib.util.find_spec(NODEAGENT_MODULE + ".__main__") is not None
    except ModuleNotFoundError:
        return False


def nodeagent_command(
    kubeconfig_path: Path, node_name: str, state_dir: Path, image_map: Path
) -> list[str]:
    """The agreed node-agent command line (kept in one place for the agent's author)."""
    return [
        sys.executable,
        "-m",
        NODEAGENT_MODULE,
        "--kubeconfig",
        str(kubeconfig_path),
        "--node-name",
        node_name,
        "--state-dir",
        str(state_dir),
        "--image-map",
        str(image_map),
    ]


def default_image_map() -> str:
    """Image -> local command table for the node agent (empty: images must be mapped)."""
    return (
        "# image -> command rules for the localcluster node agent (format: see\n"
        "# localcluster/nodeagent/images.py); python images are built in.\nimages: []\n"
    )


def _etcd_args(bins: build.Binaries, data: Path, client: int, peer: int) -> list[str]:
    curl, purl = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    return [
        str(bins.path("etcd")),
        "--name=localcluster",
        f"--data-dir={data}",
        f"--listen-client-urls={curl}",
        f"--advertise-client-urls={curl}",
        f"--listen-peer-urls={purl}",
        f"--initial-advertise-peer-urls={purl}",
        f"--initial-cluster=localcluster={purl}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
        "--auto-compaction-retention=1",
        "--quota-backend-bytes=8589934592",
    ]


def _apiserver_args(
    bins: build.Binaries,
    pki: certs.Pki,
    etcd_port: int,
    port: int,
    cert_dir: Path,
    node_ip: str = "",
) -> list[str]:
    p = pki.p
    args = [
        str(bins.path("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--etcd-prefix=/registry",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={p('apiserver.crt')}",
        f"--tls-private-key-file={p('apiserver.key')}",
        f"--client-ca-file={p('client-ca.crt')}",
        f"--service-account-issuer=https://127.0.0.1:{port}",
        f"--service-account-key-file={p('sa.pub')}",
        f"--service-account-signing-key-file={p('sa.key')}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        (
            "--enable-admission-plugins=NodeRestriction,MutatingAdmissionWebhook,"
            "ValidatingAdmissionWebhook"
        ),
        "--allow-privileged=true",
        # The kubernetes Service endpoint would be 127.0.0.1, which validation rejects.
        "--endpoint-reconciler-type=none",
        # Service-based webhooks dial an endpoint IP: there is no kube-proxy.
        "--enable-aggregator-routing=true",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        # ConfigMap watches bypass the watch cache and read etcd, so a test can compact etcd
        # and see the 410 Gone that informers must survive in production.
        "--watch-cache-sizes=configmaps#0",
        f"--kubelet-client-certificate={p('apiserver-kubelet-client.crt')}",
        f"--kubelet-client-key={p('apiserver-kubelet-client.key')}",
        "--profiling=false",
        "--v=1",
    ]
    if node_ip:
        # Pods reach the kubernetes Service: serve on the node's address and keep its
        # endpoint by lease; the kubelet's serving certificate is checked against our CA.
        replace = {
            "--bind-address=127.0.0.1": f"--bind-address={node_ip}",
            "--advertise-address=127.0.0.1": f"--advertise-address={node_ip}",
            "--endpoint-reconciler-type=none": "--endpoint-reconciler-type=lease",
            f"--service-account-issuer=https://127.0.0.1:{port}": (
                f"--service-account-issuer=https://{node_ip}:{port}"
            ),
        }
        args = [replace.get(a, a) for a in args]
        args.append(f"--kubelet-certificate-authority={p('ca.crt')}")
    return args


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
# One event per request, when it completes: who asked, the verb and the resource, no bodies.
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
"""


def _audit_args(state: State) -> list[str]:
    """The API server's flags for ``up(audit=True)``: the Metadata policy, a JSON log file."""
    if not state.audit_log:
        return []
    policy = Path(state.state_dir) / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    Path(state.audit_log).parent.mkdir(parents=True, exist_ok=True)
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={state.audit_log}",
        "--audit-log-format=json",
        "--audit-log-maxsize=2000",
        "--audit-log-maxbackup=1",
    ]


def _kcm_args(
    bins: build.Binaries, pki: certs.Pki, kcfg: Path, port: int, cert_dir: Path
) -> list[str]:
    p = pki.p
    return [
        str(bins.path("kube-controller-manager")),
        f"--kubeconfig={kcfg}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
        "--controllers=*",
        "--use-service-account-credentials=false",
        f"--root-ca-file={p('ca.crt')}",
        f"--service-account-private-key-file={p('sa.key')}",
        f"--cluster-signing-cert-file={p('client-ca.crt')}",
        f"--cluster-signing-key-file={p('client-ca.key')}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Short periods so tests see node death and binding quickly.
        "--node-monitor-period=2s",
        "--node-monitor-grace-period=20s",
        "--node-startup-grace-period=30s",
        "--pvclaimbinder-sync-period=2s",
        "--resource-quota-sync-period=10s",
        "--namespace-sync-period=30s",
        "--terminated-pod-gc-threshold=200",
        "--enable-hostpath-provisioner=true",
        "--profiling=false",
        "--v=1",
    ]


def _scheduler_args(bins: build.Binaries, kcfg: Path, port: int, cert_dir: Path) -> list[str]:
    return [
        str(bins.path("kube-scheduler")),
        f"--kubeconfig={kcfg}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
        "--profiling=false",
        "--v=1",
    ]


def _data_dirs_in_use() -> set[str]:
    used: set[str] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        used.update(a.removeprefix("--data-dir=") for a in args if a.startswith("--data-dir="))
    return used


def sweep_stale_etcd_dirs(parent: Path, min_age: float = 60.0) -> list[Path]:
    """Remove etcd data dirs left on tmpfs by a session that was SIGKILLed (no ``down`` ran).

    Only dirs no live process names as ``--data-dir`` and older than ``min_age`` go, so
    clusters of concurrent sessions are safe.
    """
    used = _data_dirs_in_use()
    removed = []
    for d in parent.glob("localcluster-etcd-*"):
        try:
            age = time.time() - d.stat().st_mtime
        except OSError:
            continue
        if str(d) not in used and age > min_age:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _is_running(state: State) -> bool:
    return any(pid_alive(c.pid) for c in state.components.values())


def up(
    state_dir: Path | None = None,
    *,
    with_nodeagent: bool | None = None,
    image_map: Path | None = None,
    bind_to_parent: bool = False,
    timeout: float = READY_TIMEOUT,
    quiet: bool = False,
    node_mode: str = "",
    audit: bool = False,
    before: Callable[[], None] | None = None,
) -> State:
    """Start etcd, kube-apiserver, KCM, scheduler (and the node agent) and wait for Ready.

    ``node_mode="kubelet"`` runs a real node instead of the node agent (see ``node``);
    ``before`` then runs once a dead node's leftovers are gone and before the node is claimed,
    where a snapshot of the host sees no node.
    ``audit`` makes the API server log every request at the Metadata level (who, verb,
    resource) to ``<state>/logs/audit.log`` (``State.audit_log``), for counting requests by
    client: its own metrics have no client label.
    On any failure everything already started is stopped again before the error is raised;
    a control-plane port taken between its pick and its bind starts again on new ports.
    """

    def say(msg: str) -> None:
        if not quiet:
            print(f"[localcluster] {msg}", flush=True)

    state_dir = (state_dir or default_state_dir()).resolve()
    bins = build.binaries()
    if not build.have_binaries():
        raise ClusterError(
            f"control-plane binaries missing in {bins.bin_dir}: run `localcluster build` first"
        )
    old = State.load(state_dir)
    if old is not None and _is_running(old):
        raise ClusterError(f"a cluster already runs from {state_dir}: `localcluster down` first")
    node_ip = ""
    if node_mode:
        try:
            node.validate_mode(node_mode)
            node_ip = node.node_ip()
            reap_stale_node(quiet)
            if before is not None:
                before()
            node.claim(state_dir, _holds_real_node)
        except node.NodeBusy as exc:
            raise RealNodeBusy(str(exc)) from None
        except node.NodeError as exc:
            raise ClusterError(str(exc)) from None
    if old is not None:
        _cleanup(old)
    for attempt in range(1, START_ATTEMPTS + 1):
        state = _fresh_state(state_dir, bins, node_mode, node_ip, audit)
        try:
            _start_all(state, bins, with_nodeagent, image_map, bind_to_parent, timeout, say)
            break
        except BaseException as exc:
            if attempt < START_ATTEMPTS and _port_taken(exc) and not _node_started(state):
                say(f"a port was taken between its pick and its bind: again ({attempt + 1})")
                _stop_components(state, quiet=True)
                _cleanup(state)
                continue
            say("startup failed: stopping what was started")
            down(state_dir, quiet=True)
            raise
    if node_mode:
        node.started(state_dir)
    return state


def _fresh_state(
    state_dir: Path, bins: build.Binaries, node_mode: str, node_ip: str, audit: bool
) -> State:
    """An empty state directory, a new etcd data directory and newly picked ports, saved."""
    if state_dir.exists():
        shutil.rmtree(state_dir)
    state_dir.mkdir(parents=True)
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    sweep_stale_etcd_dirs(shm)
    etcd_data = Path(tempfile.mkdtemp(prefix="localcluster-etcd-", dir=shm))
    ports = {
        n: free_port()
        for n in (
            "etcd-client",
            "etcd-peer",
            "kube-controller-manager",
            "kube-scheduler",
        )
    }
    ports["kube-apiserver"] = free_port(node_ip or "127.0.0.1")
    if node_mode:
        ports["kubelet"] = free_port(node_ip)
        ports.update({n: free_port() for n in node.LOCAL_PORTS})
    state = State(
        state_dir=str(state_dir),
        etcd_data_dir=str(etcd_data),
        ports=ports,
        kubeconfig=str(state_dir / "admin.kubeconfig"),
        kubectl=str(bins.kubectl),
        server=f"https://{node_ip or '127.0.0.1'}:{ports['kube-apiserver']}",
        version=bins.version,
        node_mode=node_mode,
        node_ip=node_ip,
        sysctls=node.read_sysctls() if node_mode else {},
        audit_log=str(state_dir / "logs" / "audit.log") if audit else "",
    )
    state.save()
    return state


def _port_taken(exc: BaseException) -> bool:
    """Whether a component failed because its picked port was bound by someone else first.

    ``free_port`` checks a port by binding it and lets go; another process (a parallel test
    session's cluster, say) may bind it before the component does. Only a new start helps.
    """
    return isinstance(exc, ClusterError) and "address already in use" in str(exc)


def _node_started(state: State) -> bool:
    return any(name in state.components for name in NODE_COMPONENTS)


def _start_all(
    state: State,
    bins: build.Binaries,
    with_nodeagent: bool | None,
    image_map: Path | None,
    bind_to_parent: bool,
    timeout: float,
    say: Any,
) -> None:
    t0 = time.monotonic()
    deadline = t0 + timeout
    state_dir = Path(state.state_dir)
    ports = state.ports
    real_node = (NODE_NAME, state.node_ip) if state.node_mode else None
    pki = certs.generate(state_dir / "pki", SERVICE_IP, node=real_node)
    for stem, user in (
        ("admin", "admin"),
        ("controller-manager", "kube-controller-manager"),
        ("scheduler", "kube-scheduler"),
    ):
        _client_kubeconfig(state_dir / f"{stem}.kubeconfig", state, pki, stem, user)
    starter = _Starter(state, bind_to_parent)

    etcd = starter.start(
        "etcd",
        _etcd_args(bins, Path(state.etcd_data_dir), ports["etcd-client"], ports["etcd-peer"]),
    )
    _wait(
        "etcd /health",
        lambda: _http_ok(f"http://127.0.0.1:{ports['etcd-client']}/health"),
        deadline,
        etcd,
    )
    say(f"etcd ready on 127.0.0.1:{ports['etcd-client']} ({time.monotonic() - t0:.1f}s)")

    api = starter.start(
        "kube-apiserver",
        _apiserver_args(
            bins,
            pki,
            ports["etcd-client"],
            ports["kube-apiserver"],
            state_dir / "certs" / "api",
            state.node_ip,
        )
        + _audit_args(state),
    )
    ctx = _ssl_context(pki)
    _wait("kube-apiserver /readyz", lambda: _http_ok(f"{state.server}/readyz", ctx), deadline, api)
    say(f"kube-apiserver ready at {state.server} ({time.monotonic() - t0:.1f}s)")

    kcm = starter.start(
        "kube-controller-manager",
        _kcm_args(
            bins,
            pki,
            state_dir / "controller-manager.kubeconfig",
            ports["kube-controller-manager"],
            state_dir / "certs" / "kcm",
        ),
    )
    sched = starter.start(
        "kube-scheduler",
        _scheduler_args(
            bins,
            state_dir / "scheduler.kubeconfig",
            ports["kube-scheduler"],
            state_dir / "certs" / "scheduler",
        ),
    )
    insecure = _ssl_context(None, verify=False)
    for comp in (kcm, sched):
        url = f"https://127.0.0.1:{ports[comp.name]}/healthz"
        _wait(f"{comp.name} /healthz", lambda u=url: _http_ok(u, insecure), deadline, comp)
    say(f"controller-manager and scheduler healthy ({time.monotonic() - t0:.1f}s)")

    if state.node_mode:
        _start_node(state, pki, starter, deadline, say)
        say(f"cluster up in {time.monotonic() - t0:.1f}s; export KUBECONFIG={state.kubeconfig}")
        return
    if with_nodeagent is None and os.environ.get("LOCALCLUSTER_NODEAGENT") == "0":
        with_nodeagent = False
    run_agent = nodeagent_available() if with_nodeagent is None else with_nodeagent
    if run_agent and not nodeagent_available():
        raise ClusterError(f"node agent requested but module {NODEAGENT_MODULE} is missing")
    if run_agent:
        if image_map is None and os.environ.get("LOCALCLUSTER_IMAGE_MAP"):
            image_map = Path(os.environ["LOCALCLUSTER_IMAGE_MAP"])
        if image_map is None:
            image_map = state_dir / "image-map.yaml"
            image_map.write_text(default_image_map())
        agent_dir = state_dir / "nodeagent"
        agent_dir.mkdir()
        agent = starter.start(
            "nodeagent", nodeagent_command(Path(state.kubeconfig), NODE_NAME, agent_dir, image_map)
        )
        state.node_name = NODE_NAME
        state.save()
        _wait(
            f"node {NODE_NAME} Ready and untainted",
            lambda: _node_ready(state, NODE_NAME),
            deadline,
            agent,
        )
        say(f"node {NODE_NAME} Ready ({time.monotonic() - t0:.1f}s)")
    else:
        why = "disabled" if with_nodeagent is False else f"{NODEAGENT_MODULE} not installed"
        say(f"node agent not started ({why}): pods will stay Pending")
    say(f"cluster up in {time.monotonic() - t0:.1f}s; export KUBECONFIG={state.kubeconfig}")


def _client_kubeconfig(path: Path, state: State, pki: certs.Pki, cert: str, user: str) -> None:
    """A kubeconfig at `path` for the client certificate `<cert>.crt`/`.key` of the cluster PKI."""
    kubeconfig.write(
        path, state.server, pki.p("ca.crt"), pki.p(f"{cert}.crt"), pki.p(f"{cert}.key"), user
    )


def _start_node(state: State, pki: certs.Pki, starter: _Starter, deadline: float, say: Any) -> None:
    """containerd (with the node's own images), kubelet, kube-proxy, then CoreDNS."""
    t0 = time.monotonic()
    node_dir = state.node_dir
    node_dir.mkdir(parents=True, exist_ok=True)
    for stem, user in (("kubelet", "kubelet-client"), ("kube-proxy", "kube-proxy")):
        _client_kubeconfig(node_dir / f"{stem}.kubeconfig", state, pki, user, user)
    try:
        cmds = node.prepare(node_dir, pki.directory, state.node_ip, NODE_NAME, state.ports)
        containerd = starter.start("containerd", cmds["containerd"], env=node.containerd_env())
        _wait("containerd", node.containerd_ready, deadline, containerd)
        node.import_node_images(node_dir)
        say(f"containerd ready, node images imported ({time.monotonic() - t0:.1f}s)")
    except node.NodeError as exc:
        raise ClusterError(str(exc)) from None
    kubelet = starter.start("kubelet", cmds["kubelet"])
    starter.start("kube-proxy", cmds["kube-proxy"])
    state.node_name = NODE_NAME
    state.save()
    _wait(
        f"node {NODE_NAME} Ready and untainted",
        lambda: _node_ready(state, NODE_NAME),
        deadline,
        kubelet,
    )
    say(f"node {NODE_NAME} (kubelet) Ready ({time.monotonic() - t0:.1f}s)")
    manifests = node_dir / "coredns.yaml"
    manifests.write_text(yaml.safe_dump_all(node.coredns_manifests()))
    out = subprocess.run(
        [state.kubectl, "--kubeconfig", state.kubeconfig, "apply", "-f", str(manifests)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise ClusterError(f"deploying CoreDNS failed: {out.stderr}")
    _wait(
        "CoreDNS Ready",
        lambda: _deployment_available(state, "kube-system", "coredns"),
        deadline,
        kubelet,
    )
    say(f"CoreDNS ready at {node.DNS_SERVICE_IP} ({time.monotonic() - t0:.1f}s)")


def _deployment_available(state: State, namespace: str, name: str) -> bool:
    out = subprocess.run(
        [state.kubectl, "--kubeconfig", state.kubeconfig, "-n", namespace, "get", "deployment",
         name, "-o", "jsonpath={.status.availableReplicas}"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    return out.returncode == 0 and out.stdout.strip() not in ("", "0")


def up_real_node(
    state_dir: Path,
    *,
    wait: float,
    before: Callable[[], None] | None = None,
    poll: float = 5.0,
    **options: Any,
) -> State:
    """``up(node_mode="kubelet")`` once no other run holds the machine's one real node, waiting
    at most ``wait`` seconds (test envs run side by side). ``before`` is ``up``'s, run on each
    try."""
    deadline = time.monotonic() + wait
    while True:
        if _real_node_held_by_another(state_dir) and time.monotonic() < deadline:
            time.sleep(poll)
            continue
        try:
            return up(state_dir, node_mode="kubelet", before=before, **options)
        except RealNodeBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(poll)


def reap_stale_node(quiet: bool = False) -> list[str]:
    """Remove what a real node whose run died without ``down`` (a killed CI job, a crash) left
    on the host: its pods' processes, mounts, nft tables, the bridge, the fixed paths. A new
    node would start on top of them, and its ``down`` would remove more than it made. Nothing
    is touched while a live run holds the node. Returns what was found."""
    if node.owner(_holds_real_node):
        return []
    held, _ = node.recorded_claim()
    old = State.load(Path(held)) if held else None
    containerd_root = old.node_dir / "containerd-root" if old else node.RUN_DIR / "containerd-root"
    found = node.leftovers(containerd_root, {})
    if not found:
        return []
    if not quiet:
        print(f"[localcluster] removing a dead real node's leftovers: {'; '.join(found)}")
    if old is not None and old.node_mode:
        down(Path(held), quiet=True)  # its saved sysctls are restored too
    else:
        node.teardown(containerd_root, {})
    return found


def _real_node_held_by_another(state_dir: Path) -> bool:
    held = node.owner(_holds_real_node)
    return bool(held) and held != str(state_dir)


def _holds_real_node(state_dir: Path, claimer: int) -> bool:
    """A claim stands while its cluster runs, and while the process that claimed it is still
    starting it (between the claim and its first process a starting node shows none)."""
    return (claimer > 0 and pid_alive(claimer)) or _runs_from(state_dir)


def _runs_from(state_dir: Path) -> bool:
    old = State.load(state_dir)
    return old is not None and _is_running(old)


def _node_ready(state: State, name: str) -> bool:
    """Ready=True and the not-ready taint removed by the node-lifecycle controller."""
    out = subprocess.run(
        [state.kubectl, "--kubeconfig", state.kubeconfig, "get", "node", name, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return False
    node = json.loads(out.stdout)
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions", [])
    )
    tainted = any(
        t.get("key") == "node.kubernetes.io/not-ready"
        for t in node.get("spec", {}).get("taints") or []
    )
    return ready and not tainted


def _stop_node(state: State, quiet: bool) -> None:
    """Delete the pods (no controller recreates them), stop the node, clean the host."""
    for name in ("kube-scheduler", "kube-controller-manager"):
        comp = state.components.get(name)
        if comp is not None and pid_alive(comp.pid):
            stop_group(comp.pid)
    api = state.components.get("kube-apiserver")
    containerd = state.components.get("containerd")
    if api and pid_alive(api.pid) and containerd and pid_alive(containerd.pid):
        node.delete_pods(state.kubectl, state.kubeconfig)
    for name in ("kube-proxy", "kubelet", "containerd"):
        comp = state.components.get(name)
        if comp is not None and (_group_alive(comp.pid) or pid_alive(comp.pid)):
            stop_group(comp.pid)
    left = node.teardown(state.node_dir / "containerd-root", state.sysctls)
    node.release(Path(state.state_dir))
    if left and not quiet:
        print(f"[localcluster] the node left behind: {'; '.join(left)}", file=sys.stderr)


def _stop_components(state: State, quiet: bool) -> None:
    """Stop every component still running, in reverse start order."""
    for name in reversed(COMPONENTS):
        comp = state.components.get(name)
        if comp is None:
            continue
        if _group_alive(comp.pid) or pid_alive(comp.pid):
            stop_group(comp.pid)
            if not quiet:
                print(f"[localcluster] stopped {name} (pid {comp.pid})")


def _cleanup(state: State) -> None:
    shutil.rmtree(state.etcd_data_dir, ignore_errors=True)


def down(state_dir: Path | None = None, *, quiet: bool = False, remove_state: bool = True) -> bool:
    """Stop every component (reverse start order) and remove the etcd data and state.

    Returns False when no cluster state was found.
    """
    state_dir = (state_dir or default_state_dir()).resolve()
    state = State.load(state_dir)
    if state is None:
        if not quiet:
            print(f"[localcluster] no cluster state in {state_dir}")
        return False
    if state.node_mode:
        _stop_node(state, quiet)
    _stop_components(state, quiet)
    _cleanup(state)
    if remove_state:
        shutil.rmtree(state_dir, ignore_errors=True)
    return True


def status(state_dir: Path | None = None) -> dict[str, Any]:
    """What runs: per component its PID, liveness and port, plus the kubeconfig."""
    state_dir = (state_dir or default_state_dir()).resolve()
    state = State.load(state_dir)
    if state is None:
        return {"running": False, "state_dir": str(state_dir), "components": {}}
    comps = {}
    for name, comp in state.components.items():
        comps[name] = {
            "pid": comp.pid,
            "alive": pid_alive(comp.pid),
            "port": state.ports.get("etcd-client" if name == "etcd" else name),
            "log": comp.log,
        }
    api_ok = False
    if state.components.get("kube-apiserver") and pid_alive(state.components["kube-apiserver"].pid):
        pki = certs.Pki(Path(state.state_dir) / "pki")
        api_ok = _http_ok(f"{state.server}/readyz", _ssl_context(pki))
    return {
        "running": _is_running(state),
        "apiserver_ready": api_ok,
        "state_dir": state.state_dir,
        "kubeconfig": state.kubeconfig,
        "server": state.server,
        "version": state.version,
        "components": comps,
    }
