"""The node agent's entry point: flags, node registration, pod watch, shutdown."""

from __future__ import annotations

import argparse
import glob
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import psutil

from .envvars import service_env
from .events import EventRecorder
from .images import ImageMap
from .kube import ApiError, Kube
from .kubeletserver import KubeletServer
from .names import NameTable
from .netaddr import claim_lo_address, release_lo_address
from .node import NodeManager, default_capacity
from .podworker import PodWorker
from .sandbox import reap_recorded
from .serviceports import ServiceProxy, routes_from

log = logging.getLogger("localcluster.nodeagent")
JSON = dict[str, Any]


def pick_node_ip() -> str:
    """A non-loopback IPv4 address of the host, used only as a status value."""
    for _name, addrs in sorted(psutil.net_if_addrs().items()):
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    raise RuntimeError("no non-loopback IPv4 address on this host; pass --node-ip")


class Agent:
    """Holds the shared context pod workers use and dispatches watch events to them."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.kube = Kube(args.kubeconfig)
        self.node_name: str = args.node_name
        self.state_dir: str = os.path.abspath(args.state_dir)
        self.claimed_ip: str | None = None
        if args.node_ip:
            self.node_ip: str = args.node_ip
        else:
            if args.pod_address == "lo":
                self.claimed_ip = claim_lo_address(f"{self.state_dir}:{self.node_name}")
            self.node_ip = self.claimed_ip or pick_node_ip()
        self.kubelet: KubeletServer | None = None
        if self.claimed_ip and not args.no_kubelet_server:
            self.kubelet = KubeletServer(
                self.state_dir,
                self.claimed_ip,
                self.node_name,
                self.container_running,
                self.start_exec,
            )
        self.image_map = ImageMap.load(args.image_map)
        self.service_env = service_env(self.kube.server_host, self.kube.server_port)
        extra = dict(kv.split("=", 1) for kv in args.extra_resource or [])
        self.allocatable = default_capacity(args.cpu, args.memory, args.max_pods, extra)
        self.backoff_initial: float = args.backoff_initial
        self.backoff_max: float = args.backoff_max
        self.node = NodeManager(
            self.kube,
            self.node_name,
            self.node_ip,
            self.allocatable,
            args.lease_seconds,
            args.status_interval,
            self.kubelet.port if self.kubelet else 0,
        )
        self.events = EventRecorder(self.kube, self.node_name)
        self.names = NameTable()
        self.proxy = ServiceProxy(f"{self.state_dir}:{self.node_name}")
        self.workers: dict[str, PodWorker] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    # context for workers
    def _get(self, path: str) -> JSON | None:
        try:
            return self.kube.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def get_configmap(self, ns: str, name: str) -> JSON | None:
        """A ConfigMap or None."""
        return self._get(f"/api/v1/namespaces/{ns}/configmaps/{name}")

    def get_secret(self, ns: str, name: str) -> JSON | None:
        """A Secret or None."""
        return self._get(f"/api/v1/namespaces/{ns}/secrets/{name}")

    def container_running(self, ns: str, pod: str, container: str) -> bool:
        """For log following: does that container have a live process?"""
        with self.lock:
            workers = list(self.workers.values())
        return any(
            w.ns == ns and w.pod_name == pod and w.is_alive() and w.container_running(container)
            for w in workers
        )

    def start_exec(
        self, ns: str, pod: str, container: str, cmd: list[str]
    ) -> subprocess.Popen[bytes] | None:
        """For ``kubectl exec``: the command started in that container, if it runs here."""
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            if w.ns == ns and w.pod_name == pod and w.is_alive():
                return w.start_exec(container, cmd)
        return None

    # lifecycle
    def reap_leftovers(self) -> None:
        """Kill pod sandboxes an earlier agent run left behind."""
        for rec in glob.glob(os.path.join(self.state_dir, "sandboxes", "*.json")):
            if reap_recorded(rec):
                log.info("killed leftover sandbox %s", rec)
            os.unlink(rec)

    def dispatch(self, pod: JSON) -> None:
        """Give a pod to its worker, starting one for a new non-terminal pod."""
        uid = pod["metadata"]["uid"]
        with self.lock:
            w = self.workers.get(uid)
            if w is not None and w.is_alive():
                w.update(pod)
                return
            if w is not None:
                return  # finished; waits for the DELETED event
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
            if self.stopping.is_set():
                return
            w = PodWorker(self, pod)
            self.workers[uid] = w
            w.start()

    def forget(self, uid: str) -> None:
        """The pod object is gone."""
        with self.lock:
            w = self.workers.pop(uid, None)
        if w is not None:
            w.removed()

    def watch_pods(self) -> None:
        """List+watch pods bound to this node; relist on 410 Gone or errors."""
        selector = f"spec.nodeName={self.node_name}"
        while not self.stopping.is_set():
            try:
                lst = self.kube.get("/api/v1/pods", fieldSelector=selector)
                rv = lst["metadata"]["resourceVersion"]
                seen = set()
                for pod in lst.get("items") or []:
                    seen.add(pod["metadata"]["uid"])
                    self.dispatch(pod)
                with self.lock:
                    stale = [u for u in self.workers if u not in seen]
                for uid in stale:
                    self.forget(uid)
                while not self.stopping.is_set():
                    for ev in self.kube.watch(
                        "/api/v1/pods",
                        fieldSelector=selector,
                        resourceVersion=rv,
                        timeout_seconds=240,
                    ):
                        if self.stopping.is_set():
                            return
                        typ, obj = ev.get("type"), ev.get("object") or {}
                        if typ == "ERROR":
                            raise ApiError(int(obj.get("code", 500)), obj, "WATCH", "pods")
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if typ in ("ADDED", "MODIFIED"):
                            self.dispatch(obj)
                        elif typ == "DELETED":
                            self.forget(obj["metadata"]["uid"])
            except ApiError as exc:
                if exc.status != 410:
                    log.warning("pod watch: %s", exc)
                    self.stopping.wait(1.0)
            except Exception as exc:  # noqa: BLE001 - API restarts, dropped connections
                if self.stopping.is_set():
                    return
                log.warning("pod watch failed (%s); relisting", exc)
                self.stopping.wait(1.0)

    def watch_names(self, interval: float = 1.0) -> None:
        """Keep the pods' hosts files and the Service forwarders current: re-read EndpointSlices
        and Services every ``interval``."""
        while not self.stopping.wait(interval):
            try:
                slices = self.kube.get("/apis/discovery.k8s.io/v1/endpointslices")
                services = self.kube.get("/api/v1/services")
            except Exception as exc:  # noqa: BLE001 - API restarts: the next round retries
                log.debug("endpointslice or service list failed: %s", exc)
                continue
            items = slices.get("items") or []
            forwarded = self.proxy.update(routes_from(services.get("items") or [], items))
            table = NameTable.from_slices(items).with_addresses(forwarded)
            if table == self.names:
                continue
            self.names = table
            with self.lock:
                workers = list(self.workers.values())
            for w in workers:
                if w.is_alive():
                    w.write_hosts()

    def shutdown(self) -> None:
        """Stop all pods' processes and wait for the workers."""
        self.stopping.set()
        self.node.stop()
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            w.shutdown()
        for w in workers:
            w.join(timeout=15)
        if self.kubelet is not None:
            self.kubelet.stop()
        self.proxy.close()
        if self.claimed_ip:
            release_lo_address(self.claimed_ip)
        self.events.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Flags, with NODEAGENT_* environment fallbacks."""
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="python -m localcluster.nodeagent",
        description="Run pods bound to one Node as local processes in Linux namespaces.",
    )
    p.add_argument(
        "--kubeconfig",
        default=env("NODEAGENT_KUBECONFIG", env("KUBECONFIG")),
        required=not (env("NODEAGENT_KUBECONFIG") or env("KUBECONFIG")),
    )
    p.add_argument("--node-name", default=env("NODEAGENT_NODE_NAME", socket.gethostname()))
    p.add_argument("--state-dir", default=env("NODEAGENT_STATE_DIR", "/tmp/nodeagent"))
    p.add_argument(
        "--image-map",
        default=env("NODEAGENT_IMAGE_MAP"),
        help="YAML image map (see localcluster.nodeagent.images)",
    )
    p.add_argument(
        "--node-ip",
        default=env("NODEAGENT_NODE_IP"),
        help="InternalIP/podIP to report as is (default: see --pod-address)",
    )
    p.add_argument(
        "--pod-address",
        choices=["lo", "host"],
        default=env("NODEAGENT_POD_ADDRESS", "lo"),
        help="lo: add a 10.244.x.y/32 to lo and use it as node and pod IP "
        "(removed on exit); host: report the host's first non-loopback "
        "IPv4 (status value only)",
    )
    p.add_argument(
        "--no-kubelet-server",
        action="store_true",
        help="do not serve /containerLogs (kubectl logs)",
    )
    p.add_argument("--cpu", default=env("NODEAGENT_CPU"), help="cpu capacity (default: cores)")
    p.add_argument("--memory", default=env("NODEAGENT_MEMORY"), help="memory capacity")
    p.add_argument("--max-pods", default=env("NODEAGENT_MAX_PODS", "110"))
    p.add_argument(
        "--extra-resource",
        action="append",
        metavar="NAME=QTY",
        help="extra capacity, e.g. nvidia.com/gpu=4 (repeatable)",
    )
    p.add_argument("--lease-seconds", type=int, default=int(env("NODEAGENT_LEASE_SECONDS", "40")))
    p.add_argument(
        "--status-interval", type=float, default=float(env("NODEAGENT_STATUS_INTERVAL", "30"))
    )
    p.add_argument(
        "--backoff-initial",
        type=float,
        default=float(env("NODEAGENT_BACKOFF_INITIAL", "10")),
        help="first CrashLoopBackOff delay in seconds (kubelet: 10)",
    )
    p.add_argument("--backoff-max", type=float, default=float(env("NODEAGENT_BACKOFF_MAX", "300")))
    p.add_argument("--log-level", default=env("NODEAGENT_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT; exit 0 after stopping every pod process."""
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s",
        stream=sys.stdout,
    )
    if os.geteuid() != 0:
        log.error("the node agent needs root (it creates PID and mount namespaces)")
        return 2
    os.makedirs(os.path.abspath(args.state_dir), exist_ok=True)
    agent = Agent(args)
    agent.reap_leftovers()
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    deadline = time.monotonic() + 60
    while True:
        try:
            agent.node.register()
            break
        except Exception as exc:  # noqa: BLE001 - the API server may still be starting
            if time.monotonic() > deadline or stop.is_set():
                log.error("cannot register node %s: %s", agent.node_name, exc)
                agent.shutdown()
                return 1
            log.info("waiting for the API server: %s", exc)
            time.sleep(1)
    agent.node.start()
    if agent.kubelet is not None:
        agent.kubelet.start()
    log.info(
        "node %s registered (InternalIP %s, API %s)",
        agent.node_name,
        agent.node_ip,
        agent.kube.server,
    )
    watcher = threading.Thread(target=agent.watch_pods, name="pod-watch", daemon=True)
    watcher.start()
    threading.Thread(target=agent.watch_names, name="names", daemon=True).start()
    while not stop.wait(1.0):
        if not watcher.is_alive():
            log.error("pod watch thread died")
            agent.shutdown()
            return 1
    agent.shutdown()
    log.info("stopped")
    return 0
